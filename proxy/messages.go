package proxy

import (
	"io"
	"net/http"
	"time"

	"github.com/sacpgw/gateway/dialect/anthropic"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/httpx"
)

// DialectMessages is the dialect name of the Anthropic Messages API
// (POST /v1/messages), as the chat policy's input.dialect and the audit
// entries give it.
const DialectMessages = "anthropic"

// anthropicVersion is the Messages API version the translation speaks.
// Later versions keep its request and answer shapes (what they add, the
// strict translation refuses by name), so they are accepted too; earlier
// ones had another shape.
const anthropicVersion = "2023-06-01"

// messagesDialect is the Anthropic Messages API.
var messagesDialect = &dialect{
	name:      DialectMessages,
	request:   anthropic.Request,
	response:  anthropic.Response,
	errorBody: anthropic.Error,
	stream:    func(w io.Writer, model string) io.WriteCloser { return anthropic.NewStream(w, model) },
	check: func(r *http.Request) error {
		if v := r.Header.Get("Anthropic-Version"); v != "" && !supportedVersion(v) {
			return apierror.BadRequest("anthropic-version", "anthropic-version %q is not supported: the gateway speaks %s and the versions after it.", v, anthropicVersion)
		}
		return nil
	},
}

// Messages serves POST /v1/messages.
func (g *Gateway) Messages() http.Handler { return g.messages }

// CountTokens serves POST /v1/messages/count_tokens.
func (g *Gateway) CountTokens() http.Handler { return g.count }

// MessagesNotFound answers any other path under /v1/messages/ with
// Anthropic's 404, as an Anthropic client expects on that API's paths.
func (g *Gateway) MessagesNotFound() http.Handler { return messagesNotFound }

var messagesNotFound = countDialect.edge(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
	httpx.Fail(w, r, &apierror.Error{Status: http.StatusNotFound, Type: apierror.TypeInvalidRequest, Code: "not_found",
		Message: "No such endpoint: " + r.Method + " " + r.URL.Path + ". Under /v1/messages the gateway serves POST /v1/messages and POST /v1/messages/count_tokens."})
}))

// supportedVersion reports whether an anthropic-version header (a date,
// YYYY-MM-DD) is 2023-06-01 or later.
func supportedVersion(v string) bool {
	t, err := time.Parse(time.DateOnly, v)
	return err == nil && !t.Before(time.Date(2023, 6, 1, 0, 0, 0, 0, time.UTC))
}
