package proxy

import (
	"io"
	"net/http"

	"github.com/sacpgw/gateway/dialect/responses"
)

// DialectResponses is the dialect name of the OpenAI Responses API
// (POST /v1/responses), as the chat policy's input.dialect and the audit
// entries give it.
const DialectResponses = "responses"

// responsesDialect is the OpenAI Responses API's translation. The gateway
// serves it with state (newResponsesDialect, responses_state.go): a request
// may continue a response the gateway kept (previous_response_id). What
// needs state the gateway does not keep (conversation objects, background
// runs) is refused by the translation, by name.
var responsesDialect = &dialect{
	name:      DialectResponses,
	request:   responses.Request,
	response:  responses.Response,
	errorBody: responses.Error,
	stream:    func(w io.Writer, model string) io.WriteCloser { return responses.NewStream(w, model) },
}

// Responses serves POST /v1/responses.
func (g *Gateway) Responses() http.Handler { return g.responses }
