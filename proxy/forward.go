package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"mime"
	"net/http"
	"net/http/httputil"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sacpgw/gateway/apierror"
	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/redact"
	"github.com/sacpgw/gateway/scope"
	"github.com/sacpgw/gateway/tracing"
	"github.com/sacpgw/gateway/upstream"
)

// maxAnswerSize bounds a non-streaming answer the gateway reads into memory.
const maxAnswerSize = 64 << 20

// errTimeout is the cancellation cause when timeouts.response expires.
var errTimeout = errors.New("upstream response timeout")

// Forwarder sends a request to its upstream through httputil.ReverseProxy:
// Rewrite points it at the provider and swaps the agent's token for the
// provider's key, ModifyResponse reads usage (and, for whole answers,
// enforces the answer size), ErrorHandler maps failures to 502/504.
type Forwarder struct {
	// Timeout bounds the wait for the provider's answer: the whole body for
	// JSON answers, the response headers for streams (a stream may then run
	// as long as it needs). Zero means no timeout.
	Timeout time.Duration
	// Log receives the reverse proxy's own error reports.
	Log *slog.Logger
	// Audit writes the llm.request and llm.response entries.
	Audit *httpx.Recorder
	// Redactor, if set, redacts answers (whole or streamed).
	Redactor *redact.Redactor
	// KeepAlive is the interval of SSE comments sent while an upstream
	// stream is silent; zero: none.
	KeepAlive time.Duration
	// StreamIdle ends a stream whose upstream sends nothing this long with
	// an error event; zero: no limit.
	StreamIdle time.Duration

	bufPool bufferPool
	errLog  *log.Logger
	once    sync.Once
}

// call is the per-request state of one forward; the reverse proxy is built
// around it per request because its hooks only see the request or response.
type call struct {
	f         *Forwarder
	ex        *scope.Exchange
	up        *upstream.Upstream
	path      string
	body      []byte
	dropUsage bool
	cancel    context.CancelCauseFunc
	timer     *time.Timer
	kind      Kind
	// waitRequest returns once the llm.request entry is durable (or failed).
	waitRequest func() error
	// responseAudited is set once an llm.response entry was attempted.
	responseAudited bool
	// sent is when the request left for the provider.
	sent time.Time
}

// Forward is the endpoint of the embeddings chain.
func (f *Forwarder) Forward(w http.ResponseWriter, r *http.Request) error {
	return f.forward(w, r, KindEmbeddings)
}

// ForwardChat is the endpoint of the chat chain for agents without the protocol.
func (f *Forwarder) ForwardChat(w http.ResponseWriter, r *http.Request) error {
	return f.forward(w, r, KindChat)
}

func (f *Forwarder) forward(w http.ResponseWriter, r *http.Request, kind Kind) error {
	f.once.Do(func() { f.errLog = slog.NewLogLogger(f.Log.Handler(), slog.LevelWarn) })
	ex := scope.Get(r.Context())
	up := ex.Route
	if up == nil {
		return apierror.ModelNotFound(ex.Model)
	}
	c := &call{f: f, ex: ex, up: up, path: r.URL.Path, body: ex.Body, kind: kind}
	if kind == KindChat && f.Redactor == nil {
		ex.Check("redaction", map[string]any{"verdict": "disabled"})
	}
	if ex.Stream && ex.Agent != nil && !ex.Agent.TokenLimit.IsZero() {
		// Token accounting needs the stream's usage: ask for it, and hide it
		// from a client that did not.
		c.body, c.dropUsage = withStreamUsage(c.body)
	}
	ctx, cancel := context.WithCancelCause(r.Context())
	c.cancel = cancel
	defer cancel(nil)
	if f.Timeout > 0 {
		c.timer = time.AfterFunc(f.Timeout, func() { cancel(errTimeout) })
		defer c.timer.Stop()
	}
	ex.Attempts++
	ex.Audited = true
	c.sent = time.Now()
	c.waitRequest = f.Audit.Start(ctx, record(ex, audit.KindLLMRequest, ex.PayloadSHA256, requestSummary(ex, r)))
	rp := &httputil.ReverseProxy{
		Rewrite:        c.rewrite,
		Transport:      up.Transport,
		FlushInterval:  -1,
		ModifyResponse: c.modifyResponse,
		ErrorHandler:   c.errorHandler,
		BufferPool:     &f.bufPool,
		ErrorLog:       f.errLog,
	}
	rp.ServeHTTP(w, r.WithContext(ctx))
	return nil
}

// forwardedHeaders are the only request headers that reach a provider: the
// agent's credentials, cookies and client fingerprints stay here.
var forwardedHeaders = []string{"Content-Type", "Accept", "X-Request-Id", "X-Session-Id", "X-Correlation-Id", "Traceparent", "Tracestate", "Openai-Beta"}

func (c *call) rewrite(pr *httputil.ProxyRequest) {
	out := pr.Out
	out.URL = c.up.Target(c.path)
	out.Host = ""
	out.Header = outboundHeader(pr.In.Context(), pr.In.Header, c.ex, c.up)
	body := c.body
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	out.ContentLength = int64(len(body))
}

// outboundHeader builds the headers of a request to a provider. With
// tracing on, the traceparent names the gateway's span as the parent.
func outboundHeader(ctx context.Context, in http.Header, ex *scope.Exchange, up *upstream.Upstream) http.Header {
	h := make(http.Header, len(forwardedHeaders)+2)
	for _, k := range forwardedHeaders {
		if v := in[k]; len(v) > 0 {
			h[k] = v
		}
	}
	if ex.RequestID != "" {
		h.Set("X-Request-Id", ex.RequestID)
	}
	h.Set("Content-Type", "application/json")
	tracing.Inject(ctx, h)
	up.Authorize(h)
	return h
}

// answerHeaders are the only response headers passed back from a provider;
// its rate-limit, organisation and tracing headers describe the gateway's
// account, not the agent's.
var answerHeaders = map[string]bool{"Content-Type": true, "Content-Length": true}

func (c *call) modifyResponse(resp *http.Response) error {
	c.ex.UpstreamTime = time.Since(c.sent)
	for k := range resp.Header {
		if !answerHeaders[k] {
			delete(resp.Header, k)
		}
	}
	if resp.StatusCode >= 500 {
		resp.Body.Close()
		return &upstreamStatusError{status: resp.StatusCode}
	}
	ctx := resp.Request.Context()
	media := mediaType(resp.Header.Get("Content-Type"))
	if media == "text/event-stream" && resp.StatusCode == http.StatusOK && c.kind == KindChat {
		// A stream has started: from here it may run as long as it needs.
		// The timer stops before the audit wait below, which is the
		// gateway's own time, not the provider's.
		if err := c.stopTimer(); err != nil {
			resp.Body.Close()
			return err
		}
		// No answer leaves before the request is on record.
		if err := c.waitRequest(); err != nil {
			resp.Body.Close()
			return err
		}
		resp.Header = http.Header{}
		resp.Header.Set("Content-Type", "text/event-stream")
		resp.Header.Set("Cache-Control", "no-cache")
		resp.Header.Set("X-Accel-Buffering", "no")
		status := resp.StatusCode
		scan := newChunkScanner(c.f.Redactor)
		filter := newSSEFilter(resp.Body, c.dropUsage, c.recordUsage, scan)
		filter.KeepAlive, filter.Idle = c.f.KeepAlive, c.f.StreamIdle
		filter.onRefuse = func(reason string) {
			c.ex.Check("answer", map[string]any{"verdict": "refused", "reason": reason})
			c.ex.ErrCode = "upstream_error"
		}
		filter.finish = func(sum string, complete bool) error {
			if c.redacts() {
				c.noteRedactions(scan.result())
			}
			if !complete && c.ex.ErrCode == "" {
				c.ex.ErrCode = "stream_incomplete"
			}
			return c.f.Audit.Write(context.WithoutCancel(ctx), record(c.ex, audit.KindLLMResponse, sum, responseSummary(c.ex, status)))
		}
		resp.Body = filter
		return nil
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerSize+1))
	resp.Body.Close()
	if err != nil {
		return fmt.Errorf("read answer: %w", err)
	}
	if len(body) > maxAnswerSize {
		return &upstreamStatusError{tooLarge: true}
	}
	if err := c.stopTimer(); err != nil {
		return err
	}
	if err := c.waitRequest(); err != nil {
		return err
	}
	if media != "application/json" {
		return c.unknownShape("an answer of type " + strconvQuote(media))
	}
	out, sh, res, err := checkAnswer(c.f.Redactor, body, resp.StatusCode == http.StatusOK && c.kind == KindChat)
	if err != nil {
		return c.unknownShape(err.Error())
	}
	if resp.StatusCode == http.StatusOK {
		switch {
		case sh != nil && sh.Usage != nil:
			c.recordUsage(*sh.Usage)
		case sh == nil:
			var doc struct {
				Usage *scope.Usage `json:"usage"`
			}
			// Already read strictly by checkAnswer.
			if json.Unmarshal(body, &doc) == nil && doc.Usage != nil {
				c.recordUsage(*doc.Usage)
			}
		}
	}
	if c.redacts() {
		c.noteRedactions(res)
	}
	body = out
	// Closed fail mode: the answer waits for its entry.
	if err := c.f.Audit.Write(ctx, record(c.ex, audit.KindLLMResponse, sha256Hex(body), responseSummary(c.ex, resp.StatusCode))); err != nil {
		c.responseAudited = true
		return err
	}
	c.responseAudited = true
	resp.Header = http.Header{}
	resp.Header.Set("Content-Type", "application/json")
	resp.Body = io.NopCloser(bytes.NewReader(body))
	resp.ContentLength = int64(len(body))
	resp.Header.Set("Content-Length", strconv.Itoa(len(body)))
	return nil
}

// unknownShape refuses an answer the gateway cannot read into the shape it
// knows: never passed on, a 502, and the audit entry says which check
// refused it.
func (c *call) unknownShape(reason string) error {
	c.f.Log.Warn("upstream answer refused", "request_id", c.ex.RequestID, "upstream", c.up.Name, "reason", reason)
	c.ex.Check("answer", map[string]any{"verdict": "refused", "reason": "unknown_shape"})
	return &upstreamStatusError{shape: reason}
}

// mediaType is the lowercased media type of a Content-Type header, without
// parameters ("" when absent or malformed).
func mediaType(ct string) string {
	mt, _, err := mime.ParseMediaType(ct)
	if err != nil {
		return ""
	}
	return mt
}

func strconvQuote(s string) string { return strconv.Quote(s) }

// redacts reports whether this answer is scanned: chat answers of agents
// without the protocol (the protocol stage redacts its own fields).
func (c *call) redacts() bool {
	return c.f.Redactor != nil
}

func (c *call) noteRedactions(res redact.Result) {
	c.ex.Redacted(res.Counts)
	verdict := map[string]any{"verdict": "applied", "count": res.Total()}
	if res.Blocked != "" {
		verdict["blocked"] = res.Blocked
	}
	c.ex.Check("redaction", verdict)
}

// stopTimer ends the response timeout; it reports errTimeout when the
// timer had already fired (the context is cancelled: nothing may follow).
func (c *call) stopTimer() error {
	if c.timer != nil && !c.timer.Stop() {
		return errTimeout
	}
	return nil
}

func (c *call) recordUsage(u scope.Usage) {
	if u.TotalTokens == 0 {
		u.TotalTokens = u.PromptTokens + u.CompletionTokens
	}
	c.ex.Usage = u
	c.ex.UsageKnown = true
}

type upstreamStatusError struct {
	status   int
	tooLarge bool
	// shape is why an answer of unknown shape was refused.
	shape string
}

func (e *upstreamStatusError) Error() string {
	if e.shape != "" {
		// The reason stays in the log: it may quote the provider's keys.
		return "it sent an answer the gateway cannot read, which was not passed on"
	}
	if e.tooLarge {
		return fmt.Sprintf("answer larger than %d bytes", maxAnswerSize)
	}
	return fmt.Sprintf("status %d", e.status)
}

func (c *call) errorHandler(w http.ResponseWriter, r *http.Request, err error) {
	ctx := r.Context()
	name := c.up.Name
	defer func() {
		if !c.responseAudited {
			c.responseAudited = true
			status := c.ex.Status
			if status == 0 {
				status = 499 // client closed the request
			}
			_ = c.f.Audit.Write(ctx, record(c.ex, audit.KindLLMResponse, "", responseSummary(c.ex, status)))
		}
	}()
	var ae *apierror.Error
	if errors.As(err, &ae) {
		httpx.Fail(w, r, ae) // an audit failure: 503
		return
	}
	switch {
	case errors.Is(context.Cause(ctx), errTimeout):
		httpx.Fail(w, r, apierror.Upstream(http.StatusGatewayTimeout,
			fmt.Sprintf("Upstream %s did not answer within %s.", name, c.f.Timeout), err))
	case ctx.Err() != nil:
		// The client went away; there is nobody to answer.
		c.ex.ErrCode = "client_closed_request"
		c.ex.Err = err
	default:
		var se *upstreamStatusError
		msg := fmt.Sprintf("Upstream %s failed: %s.", name, describe(err))
		if errors.As(err, &se) {
			msg = fmt.Sprintf("Upstream %s failed: %s.", name, se.Error())
		}
		httpx.Fail(w, r, apierror.Upstream(http.StatusBadGateway, msg, err))
	}
}

// describe gives the innermost reason of a transport error ("connection
// refused"), without the request details the outer layers add.
func describe(err error) string {
	for {
		inner := errors.Unwrap(err)
		if inner == nil {
			return err.Error()
		}
		err = inner
	}
}

// withStreamUsage returns body with stream_options.include_usage set, and
// whether it had to be added (so the usage chunk must be hidden again).
// body has passed the strict reading: it is spliced, not decoded and
// encoded again, so every other byte goes upstream as it was checked.
func withStreamUsage(body []byte) ([]byte, bool) {
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return body, false
	}
	members := 0
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return body, false
		}
		name := tok.String() // valid until the next read
		raw, err := dec.ReadValue()
		if err != nil {
			return body, false
		}
		members++
		if name != "stream_options" {
			continue
		}
		end := dec.InputOffset()
		opts, ok := includeUsage(raw)
		if !ok {
			return body, false
		}
		return slices.Concat(body[:end-int64(len(raw))], opts, body[end:]), true
	}
	last := bytes.LastIndexByte(body, '}')
	if last < 0 {
		return body, false
	}
	add := `"stream_options":{"include_usage":true}`
	if members > 0 {
		add = "," + add
	}
	return slices.Concat(body[:last], []byte(add), body[last:]), true
}

// includeUsage returns stream_options (null or an object) with
// include_usage true; ok is false when it is already so, or of another
// type (the provider refuses that request itself).
func includeUsage(raw jsontext.Value) ([]byte, bool) {
	switch raw.Kind() {
	case 'n':
		return []byte(`{"include_usage":true}`), true
	case '{':
	default:
		return nil, false
	}
	dec := jsontext.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.ReadToken(); err != nil {
		return nil, false
	}
	out := []byte{'{'}
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return nil, false
		}
		name := tok.String() // valid until the next read
		v, err := dec.ReadValue()
		if err != nil {
			return nil, false
		}
		if name == "include_usage" {
			if string(v) == "true" {
				return nil, false
			}
			continue
		}
		out, _ = jsontext.AppendQuote(out, name)
		out = append(append(out, ':'), v...)
		out = append(out, ',')
	}
	return append(out, `"include_usage":true}`...), true
}

// bufferPool recycles the reverse proxy's copy buffers.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, 32<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }
