package anthropic

import (
	"net/http"
	"strings"

	"github.com/go-json-experiment/json"

	"github.com/sacpgw/gateway/dialect/internal/neutral"
)

// Error translates an OpenAI error body ({"error": {message, type, code}})
// and its HTTP status into an Anthropic error body
// ({"type":"error","error":{"type": ..., "message": ...}}).
//
// The type follows the status, as Anthropic's do (and as its SDKs pick
// their exception by status, the glue should keep the status as it is):
//
//	400 invalid_request_error    401 authentication_error
//	402 billing_error            403 permission_error
//	404 not_found_error          413 request_too_large
//	429 rate_limit_error         other 4xx invalid_request_error
//	500 api_error                502 api_error
//	503 overloaded_error         504 timeout_error
//	529 overloaded_error         anything else api_error
//
// 502 is api_error: the upstream failed, an unexpected error the client
// can do nothing about but retry. 503 is overloaded_error: the gateway's
// 503s (its shared state, its audit trail, a queue) say "temporarily
// unable, retry shortly", which is what overloaded_error tells an
// Anthropic client. 504 is timeout_error, the type Anthropic documents
// for its own 504 ("the request timed out while processing").
//
// The message is the OpenAI error's message; a body that is not an OpenAI
// error (or has no message) gets the status's text instead, never the
// body itself, which may be a provider's HTML page.
func Error(status int, openAIError []byte) []byte {
	return errorBody(statusType(status), errorMessage(status, openAIError))
}

func statusType(status int) string {
	switch status {
	case http.StatusPaymentRequired:
		return "billing_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusServiceUnavailable, 529:
		return "overloaded_error"
	case http.StatusGatewayTimeout:
		return "timeout_error"
	}
	if typ := neutral.StatusType(status); typ != "" {
		return typ
	}
	return "api_error"
}

// apiError is OpenAI's error object.
type apiError struct {
	Message string `json:"message"`
	Type    string `json:"type"`
}

// errorMessage reads the OpenAI error's message leniently: this is the
// path of something already gone wrong, and the client should learn what.
func errorMessage(status int, body []byte) string {
	object, text := neutral.ReadError(body)
	if object != nil {
		var a apiError
		if json.Unmarshal(object, &a) == nil && strings.TrimSpace(a.Message) != "" {
			return a.Message
		}
	}
	if text != "" {
		return text
	}
	return neutral.StatusText(status)
}

// streamType maps the type of an OpenAI error event, which has no status,
// to Anthropic's error types. The gateway ends a stream with upstream_error
// (an idle or unreadable upstream) and server_error (its audit trail), both
// api_error here.
func streamType(openAIType string) string {
	switch openAIType {
	case "invalid_request_error", "authentication_error", "permission_error", "not_found_error", "rate_limit_error":
		return openAIType
	}
	return "api_error"
}

// errorBody is Anthropic's error shape: a response body, and the data of
// an error event.
func errorBody(typ, message string) []byte {
	b, err := json.Marshal(errorOut{Type: "error", Error: errorDetail{Type: typ, Message: message}})
	if err != nil {
		// Only invalid UTF-8 in the message can fail; say so in ASCII.
		b, _ = json.Marshal(errorOut{Type: "error", Error: errorDetail{Type: typ, Message: "The upstream's error message is not valid UTF-8."}})
	}
	return b
}

type errorOut struct {
	Type  string      `json:"type"`
	Error errorDetail `json:"error"`
}

type errorDetail struct {
	Type    string `json:"type"`
	Message string `json:"message"`
}
