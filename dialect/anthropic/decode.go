package anthropic

import "github.com/sacpgw/gateway/dialect/internal/neutral"

// decodeRequest is the one strict reading of the body (see neutral.Decode).
func decodeRequest(body []byte) (*request, error) {
	return neutral.Decode[request](body, nil)
}
