package proxy

import (
	"bytes"
	"net/http"
	"strconv"
	"time"

	"github.com/sacpgw/gateway/dialect/anthropic"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/scope"
)

// The Anthropic Messages API (POST /v1/messages) is a dialect at the edge
// of the chat chain: its request is translated into the neutral form (an
// OpenAI Chat Completions body) after the agent is identified, the same
// stages govern it (limits, Rego with input.dialect "messages", the
// protocol, redaction, audit) and the same send calls the provider; the
// answer, a stream or not, and every error are translated back on the way
// out. One exchange, one journal, whatever the dialect.

// DialectMessages is the dialect name of the Anthropic Messages API, as
// the chat policy's input.dialect and the audit entries give it.
const DialectMessages = "messages"

// anthropicVersion is the Messages API version the translation speaks.
// Later versions keep its request and answer shapes (what they add, the
// strict translation refuses by name), so they are accepted too; earlier
// ones had another shape.
const anthropicVersion = "2023-06-01"

// Messages serves POST /v1/messages.
func (g *Gateway) Messages() http.Handler { return g.messages }

// anthropicEdge translates every answer of h, errors included, into the
// Anthropic wire format.
func anthropicEdge(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		aw := &anthropicWriter{w: w, header: http.Header{}, ex: scope.Get(r.Context())}
		defer aw.finish()
		if v := r.Header.Get("Anthropic-Version"); v != "" && !supportedVersion(v) {
			httpx.Fail(aw, r, apierror.BadRequest("anthropic-version", "anthropic-version %q is not supported: the gateway speaks %s and the versions after it.", v, anthropicVersion))
			return
		}
		h.ServeHTTP(aw, r)
	})
}

// AnthropicRequest is the stage, after identify, that reads a Messages
// request through the agent's max_request_size, translates it into the
// neutral form and hands that body to the chat stages.
func AnthropicRequest() Stage {
	return StageFunc(func(w http.ResponseWriter, r *http.Request, next http.Handler) error {
		ex := scope.Get(r.Context())
		raw, err := httpx.ReadLimited(r, int64(ex.Agent.MaxRequestSize))
		if err != nil {
			return err
		}
		chat, _, _, err := anthropic.Request(raw)
		if err != nil {
			return apierror.BadRequest("", "%s", err.Error())
		}
		ex.Dialect = DialectMessages
		r2 := r.Clone(r.Context())
		r2.Body = http.NoBody
		if len(chat) > 0 {
			r2.Body = readCloser{bytes.NewReader(chat)}
		}
		r2.ContentLength = int64(len(chat))
		// From here on it is a chat completion: the provider is asked on
		// its chat route.
		r2.URL.Path, r2.URL.RawPath = "/v1/chat/completions", ""
		r2.Header.Set("Content-Type", "application/json")
		next.ServeHTTP(w, r2)
		return nil
	})
}

// supportedVersion reports whether an anthropic-version header (a date,
// YYYY-MM-DD) is 2023-06-01 or later.
func supportedVersion(v string) bool {
	t, err := time.Parse(time.DateOnly, v)
	return err == nil && !t.Before(time.Date(2023, 6, 1, 0, 0, 0, 0, time.UTC))
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }

// anthropicWriter is the ResponseWriter the chat chain writes to under the
// Messages dialect: a stream is translated event by event as it is
// written, anything else is held and translated whole.
type anthropicWriter struct {
	w      http.ResponseWriter
	header http.Header
	ex     *scope.Exchange
	status int
	stream *anthropic.Stream
	buf    bytes.Buffer
}

func (a *anthropicWriter) Header() http.Header { return a.header }

func (a *anthropicWriter) WriteHeader(status int) {
	if a.status != 0 {
		return
	}
	a.status = status
	if status == http.StatusOK && mediaType(a.header.Get("Content-Type")) == "text/event-stream" {
		a.copyHeaders()
		a.w.Header().Set("Content-Type", "text/event-stream")
		a.w.WriteHeader(http.StatusOK)
		a.stream = anthropic.NewStream(a.w, a.ex.Model)
	}
}

func (a *anthropicWriter) Write(p []byte) (int, error) {
	if a.status == 0 {
		a.WriteHeader(http.StatusOK)
	}
	if a.stream != nil {
		return a.stream.Write(p)
	}
	return a.buf.Write(p)
}

// Flush passes a stream's events on as soon as they are translated.
func (a *anthropicWriter) Flush() {
	if a.stream != nil {
		_ = http.NewResponseController(a.w).Flush()
	}
}

// Unwrap lets the chain's deadlines reach the connection.
func (a *anthropicWriter) Unwrap() http.ResponseWriter { return a.w }

// copyHeaders passes on the chain's headers but those the translation
// rewrites.
func (a *anthropicWriter) copyHeaders() {
	for k, v := range a.header {
		switch k {
		case "Content-Type", "Content-Length":
			continue
		}
		a.w.Header()[k] = v
	}
}

// finish writes what was held, translated; a stream is closed (an
// unfinished one ends with an error event).
func (a *anthropicWriter) finish() {
	if a.stream != nil {
		_ = a.stream.Close()
		_ = http.NewResponseController(a.w).Flush()
		return
	}
	if a.status == 0 {
		return // nothing was answered (the client left)
	}
	body := a.buf.Bytes()
	status := a.status
	if status == http.StatusOK {
		out, err := anthropic.Response(body)
		if err != nil {
			// The chain passed on an answer the translation cannot read:
			// the gateway's fault, not the client's.
			status, out = http.StatusBadGateway, anthropic.Error(http.StatusBadGateway, []byte(`{"error":{"message":"The provider's answer could not be translated into the Messages format.","type":"upstream_error"}}`))
		}
		body = out
	} else {
		body = anthropic.Error(status, body)
	}
	a.copyHeaders()
	h := a.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	a.w.WriteHeader(status)
	_, _ = a.w.Write(body)
}
