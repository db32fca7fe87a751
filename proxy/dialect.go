package proxy

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"strconv"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/scope"
)

// A dialect is an API agents speak other than OpenAI Chat Completions,
// served at the edge of the chat chain: its request is translated into the
// neutral form (an OpenAI Chat Completions body) after the agent is
// identified, the same stages govern it (limits, Rego with input.dialect,
// the protocol, redaction, audit) and the same send calls the provider;
// the answer, a stream or not, and every error are translated back on the
// way out. One exchange, one journal, whatever the dialect.
type dialect struct {
	// name is input.dialect and the audit entries' "dialect".
	name string
	// request translates a request body into the neutral form; its error
	// is the client's (a 400 naming the field).
	request func(body []byte) (chat []byte, stream bool, model string, err error)
	// response translates a chat completion; an error is the provider's
	// answer the dialect cannot say (a 502).
	response func(chat []byte) ([]byte, error)
	// errorBody translates an OpenAI error body of status.
	errorBody func(status int, openAIError []byte) []byte
	// stream translates a chunk stream as it is written.
	stream func(w io.Writer, model string) io.WriteCloser
	// check, if set, refuses a request before anything else (a version
	// header the translation does not speak).
	check func(r *http.Request) error
	// session, if set, makes the translation one of the exchange: the
	// dialect keeps state between its requests (the Responses API's
	// previous_response_id). It is called once per exchange at the edge,
	// and what it returns replaces request, response and stream for that
	// exchange.
	session func() dialectSession
}

// A dialectSession is a dialect's translation of one exchange, for a
// dialect that keeps state: its request may load what an earlier exchange
// kept (for the identified agent: it runs after identify), and its answer
// may keep what a later one continues.
type dialectSession interface {
	// request translates the body. Its error is what the client gets: a
	// 400 naming the field, a 404 for state that is not there, a 503 for a
	// state backend that is down.
	request(r *http.Request, raw []byte) (chat []byte, err error)
	// response translates a chat completion (as dialect.response).
	response(chat []byte) ([]byte, error)
	// stream translates a chunk stream (as dialect.stream).
	stream(w io.Writer, model string) io.WriteCloser
}

type sessionKey struct{}

// sessionOf is the exchange's dialect session, nil when its dialect keeps
// no state.
func sessionOf(r *http.Request) dialectSession {
	s, _ := r.Context().Value(sessionKey{}).(dialectSession)
	return s
}

// edge translates every answer of h, errors included, into d's format.
func (d *dialect) edge(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dw := &dialectWriter{d: d, w: w, header: http.Header{}, ex: scope.Get(r.Context())}
		if d.session != nil {
			dw.sess = d.session()
			r = r.WithContext(context.WithValue(r.Context(), sessionKey{}, dw.sess))
		}
		defer dw.finish()
		if d.check != nil {
			if err := d.check(r); err != nil {
				httpx.Fail(dw, r, err)
				return
			}
		}
		h.ServeHTTP(dw, r)
	})
}

// readRequest is the stage, after identify, that reads the request through
// the agent's max_request_size, translates it into the neutral form and
// hands that body to the chat stages.
func (d *dialect) readRequest() Stage {
	return StageFunc(func(w http.ResponseWriter, r *http.Request, next http.Handler) error {
		ex := scope.Get(r.Context())
		raw, err := httpx.ReadLimited(r, int64(ex.Agent.MaxRequestSize))
		if err != nil {
			return err
		}
		var chat []byte
		if sess := sessionOf(r); sess != nil {
			if chat, err = sess.request(r, raw); err != nil {
				return err
			}
		} else if chat, _, _, err = d.request(raw); err != nil {
			return apierror.BadRequest("", "%s", err.Error())
		}
		ex.Dialect = d.name
		r2 := r.Clone(r.Context())
		r2.Body = io.NopCloser(bytes.NewReader(chat))
		r2.ContentLength = int64(len(chat))
		// From here on it is a chat completion: the provider is asked on
		// its chat route.
		r2.URL.Path, r2.URL.RawPath = "/v1/chat/completions", ""
		r2.Header.Set("Content-Type", "application/json")
		next.ServeHTTP(w, r2)
		return nil
	})
}

// dialectWriter is the ResponseWriter the chat chain writes to under a
// dialect: a stream is translated event by event as it is written,
// anything else is held and translated whole.
type dialectWriter struct {
	d      *dialect
	sess   dialectSession // nil: d's translation
	w      http.ResponseWriter
	header http.Header
	ex     *scope.Exchange
	status int
	stream io.WriteCloser
	buf    bytes.Buffer
}

func (a *dialectWriter) Header() http.Header { return a.header }

func (a *dialectWriter) WriteHeader(status int) {
	if a.status != 0 {
		return
	}
	a.status = status
	if status == http.StatusOK && mediaType(a.header.Get("Content-Type")) == "text/event-stream" {
		a.copyHeaders()
		a.w.Header().Set("Content-Type", "text/event-stream")
		a.w.WriteHeader(http.StatusOK)
		if a.sess != nil {
			a.stream = a.sess.stream(a.w, a.ex.Model)
		} else {
			a.stream = a.d.stream(a.w, a.ex.Model)
		}
	}
}

func (a *dialectWriter) Write(p []byte) (int, error) {
	if a.status == 0 {
		a.WriteHeader(http.StatusOK)
	}
	if a.stream != nil {
		return a.stream.Write(p)
	}
	return a.buf.Write(p)
}

// Flush passes a stream's events on as soon as they are translated.
func (a *dialectWriter) Flush() {
	if a.stream != nil {
		_ = http.NewResponseController(a.w).Flush()
	}
}

// Unwrap lets the chain's deadlines reach the connection.
func (a *dialectWriter) Unwrap() http.ResponseWriter { return a.w }

// copyHeaders passes on the chain's headers but those the translation
// rewrites.
func (a *dialectWriter) copyHeaders() {
	for k, v := range a.header {
		switch k {
		case "Content-Type", "Content-Length":
			continue
		}
		a.w.Header()[k] = v
	}
}

// finish writes what was held, translated; a stream is closed (an
// unfinished one ends with the dialect's error event).
func (a *dialectWriter) finish() {
	if a.stream != nil {
		_ = a.stream.Close()
		_ = http.NewResponseController(a.w).Flush()
		return
	}
	if a.status == 0 {
		return // nothing was answered (the client left)
	}
	body, status := a.buf.Bytes(), a.status
	if status == http.StatusOK {
		translate := a.d.response
		if a.sess != nil {
			translate = a.sess.response
		}
		out, err := translate(body)
		if err != nil {
			// The chain passed on an answer the translation cannot read:
			// the gateway's fault, not the client's.
			status = http.StatusBadGateway
			out = a.d.errorBody(status, []byte(`{"error":{"message":"The provider's answer could not be translated into this API's format.","type":"upstream_error","code":"upstream_error"}}`))
		}
		body = out
	} else {
		body = a.d.errorBody(status, body)
	}
	a.copyHeaders()
	h := a.w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(body)))
	a.w.WriteHeader(status)
	_, _ = a.w.Write(body)
}
