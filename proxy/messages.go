package proxy

import (
	"io"
	"net/http"
	"time"

	"github.com/sacpgw/gateway/dialect/anthropic"
	"github.com/sacpgw/gateway/internal/apierror"
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

// supportedVersion reports whether an anthropic-version header (a date,
// YYYY-MM-DD) is 2023-06-01 or later.
func supportedVersion(v string) bool {
	t, err := time.Parse(time.DateOnly, v)
	return err == nil && !t.Before(time.Date(2023, 6, 1, 0, 0, 0, 0, time.UTC))
}
