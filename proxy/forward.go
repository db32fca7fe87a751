package proxy

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"go.opentelemetry.io/otel/trace"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/internal/tracing"
	"github.com/sacpgw/gateway/redact"
)

// maxAnswerSize bounds a non-streaming answer the gateway reads into memory.
const maxAnswerSize = 64 << 20

// errTimeout is the cancellation cause when timeouts.response expires.
var errTimeout = errors.New("upstream response timeout")

// Forwarder is the endpoint of agents without a response protocol (and of
// embeddings): one call to the exchange's route through send, the answer
// read strictly and redacted (whole, or event by event for a stream), one
// llm.response entry however it ends.
type Forwarder struct {
	// Timeout bounds the wait for the provider's answer: the whole body for
	// JSON answers, the response headers for streams (a stream may then run
	// as long as it needs). Zero means no timeout.
	Timeout time.Duration
	// Log receives warnings (an answer refused).
	Log *slog.Logger
	// Audit writes the llm.request and llm.response entries.
	Audit *door.Recorder
	// Redactor, if set, redacts answers (whole or streamed).
	Redactor *redact.Redactor
	// KeepAlive is the interval of SSE comments sent while an upstream
	// stream is silent; zero: none.
	KeepAlive time.Duration
	// StreamIdle ends a stream whose upstream sends nothing this long with
	// an error event; zero: no limit.
	StreamIdle time.Duration

	bufPool bufferPool
}

// call is the per-request state of one forward.
type call struct {
	f         *Forwarder
	ex        *scope.Exchange
	j         journal
	kind      Kind
	dropUsage bool
	timer     *time.Timer
	// status, respModel and finish are what the model call's span
	// records: the provider's status, the model its answer names and its
	// choices' finish reasons.
	status    int
	respModel string
	finish    []string
}

// maxFinishReasons bounds the finish reasons a span records: one per
// choice is expected, and a provider repeating them must not grow it.
const maxFinishReasons = 64

// Forward is the endpoint of the embeddings chain.
func (f *Forwarder) Forward(w http.ResponseWriter, r *http.Request) error {
	return f.forward(w, r, KindEmbeddings)
}

// ForwardChat is the endpoint of the chat chain for agents without the protocol.
func (f *Forwarder) ForwardChat(w http.ResponseWriter, r *http.Request) error {
	return f.forward(w, r, KindChat)
}

func (f *Forwarder) forward(w http.ResponseWriter, r *http.Request, kind Kind) error {
	ex := scope.Get(r.Context())
	if ex.Route == nil {
		return apierror.ModelNotFound(ex.Model)
	}
	c := &call{f: f, ex: ex, kind: kind, j: journalOf(r, f.Audit)}
	if kind == KindChat && f.Redactor == nil {
		ex.Check(scope.Verdict{Check: scope.CheckRedaction, Verdict: "disabled"})
	}
	body := ex.Body
	if ex.Stream && kind == KindChat {
		// Every stream is priced (the books, the spend metric, the token
		// and dollar budgets): ask for its usage, and hide it from a
		// client that did not.
		body, c.dropUsage = withStreamUsage(body)
	}
	ctx, cancel := c.start(r)
	defer cancel(nil)
	defer c.stopTimer()
	op := tracing.OperationChat
	if kind == KindEmbeddings {
		op = tracing.OperationEmbeddings
	}
	// The span covers the call up to the answer's end (a stream's too),
	// and the provider sees it as its parent.
	ctx, span := tracing.StartModelCall(ctx, op, ex.Model)
	defer c.endSpan(span)
	sent := time.Now()
	resp, err := send(ctx, r.Header, ex, r.URL.Path, body)
	if err != nil {
		return c.fail(ctx, w, r, err)
	}
	c.status = resp.StatusCode
	ex.UpstreamTime = time.Since(sent)
	if mediaType(resp.Header.Get("Content-Type")) == "text/event-stream" && resp.StatusCode == http.StatusOK && kind == KindChat {
		return c.stream(ctx, w, r, resp)
	}
	return c.whole(ctx, w, r, resp)
}

// stream passes a chat completion stream on event by event.
func (c *call) stream(ctx context.Context, w http.ResponseWriter, r *http.Request, resp *http.Response) error {
	// A stream has started: from here it may run as long as it needs. The
	// timer stops before the audit wait below, which is the gateway's own
	// time, not the provider's.
	if err := c.stopTimer(); err != nil {
		resp.Body.Close()
		return c.fail(ctx, w, r, err)
	}
	// No answer leaves before the request is on record.
	if err := c.j.requested(); err != nil {
		resp.Body.Close()
		return c.fail(ctx, w, r, err)
	}
	scan := newChunkScanner(c.f.Redactor)
	filter := newSSEFilter(resp.Body, c.dropUsage, c.recordUsage, scan)
	filter.KeepAlive, filter.Idle = c.f.KeepAlive, c.f.StreamIdle
	filter.onRelease = c.released
	filter.onRefuse = func(reason string) {
		c.ex.Check(scope.Verdict{Check: scope.CheckAnswer, Verdict: "refused", Reason: reason})
		c.ex.ErrCode = "upstream_error"
	}
	filter.finish = func(sum string, complete bool) error {
		if c.redacts() {
			c.noteRedactions(scan.result())
		}
		if !complete && c.ex.ErrCode == "" {
			c.ex.ErrCode = "stream_incomplete"
		}
		return c.j.respond(ctx, http.StatusOK, sum)
	}
	writeSSEHeader(w, http.StatusOK)
	c.f.copyStream(w, filter)
	c.respModel = scan.model
	return nil
}

// released notes what a stream released to the client: content times the
// answer's pace (time to first token, gaps between tokens).
func (c *call) released(content bool, finish []string) {
	if content {
		c.ex.Content(time.Now())
	}
	c.noteFinish(finish...)
}

func (c *call) noteFinish(reasons ...string) {
	for _, r := range reasons {
		if len(c.finish) < maxFinishReasons {
			c.finish = append(c.finish, r)
		}
	}
}

// endSpan ends the model call's span with what the call learned.
func (c *call) endSpan(span trace.Span) {
	u := c.ex.Usage
	endModelCall(span, c.ex, tracing.ModelCall{Status: c.status, ResponseModel: c.respModel, FinishReasons: c.finish,
		UsageKnown: c.ex.UsageKnown, InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens,
		ErrorType: tracing.ErrorTypeOf(c.ex.ErrCode, c.status)})
}

// endModelCall ends the span of a model call made for ex, with the
// upstream that answered it (or failed last: a failover is one span).
func endModelCall(span trace.Span, ex *scope.Exchange, mc tracing.ModelCall) {
	if !span.IsRecording() {
		return
	}
	if up := ex.Route; up != nil {
		mc.Provider, mc.Target = up.Type, up.Target("", ex.Model)
	}
	mc.Upstream, mc.NoOutput = ex.Upstream, ex.NoCompletion
	tracing.EndModelCall(span, mc)
}

// writeSSEHeader commits an event stream's headers.
func writeSSEHeader(w http.ResponseWriter, status int) {
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	w.WriteHeader(status)
}

// copyStream writes what the filter releases, flushing each piece. A
// stream the upstream broke is cut (http.ErrAbortHandler), so the client
// sees a broken stream rather than a clean end; a client that left ends
// the copy, and closing the filter records the stream as incomplete.
func (f *Forwarder) copyStream(w http.ResponseWriter, src *sseFilter) {
	rc := http.NewResponseController(w)
	buf := f.bufPool.Get()
	defer f.bufPool.Put(buf)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				src.Close()
				return
			}
			_ = rc.Flush()
		}
		if err != nil {
			src.Close()
			if !errors.Is(err, io.EOF) {
				panic(http.ErrAbortHandler)
			}
			return
		}
	}
}

// readJSON reads a whole answer of at most limit bytes, stops the answer
// timer, makes the request durable in the journal (closed mode: before
// anything of the answer is used) and refuses a media type other than
// JSON. Its error goes to fail.
func (c *call) readJSON(resp *http.Response, limit int) ([]byte, error) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(limit)+1))
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read answer: %w", err)
	}
	if len(body) > limit {
		return nil, &upstreamStatusError{tooLarge: true}
	}
	if err := c.stopTimer(); err != nil {
		return nil, err
	}
	if err := c.j.requested(); err != nil {
		return nil, err
	}
	if media := mediaType(resp.Header.Get("Content-Type")); media != "application/json" {
		return nil, c.unknownShape("an answer of type " + strconv.Quote(media))
	}
	return body, nil
}

// whole reads a JSON answer, checks and redacts it, records it and only
// then releases it.
func (c *call) whole(ctx context.Context, w http.ResponseWriter, r *http.Request, resp *http.Response) error {
	body, err := c.readJSON(resp, maxAnswerSize)
	if err != nil {
		return c.fail(ctx, w, r, err)
	}
	out, sh, res, err := checkAnswer(c.f.Redactor, body, resp.StatusCode == http.StatusOK && c.kind == KindChat)
	if err != nil {
		return c.fail(ctx, w, r, c.unknownShape(err.Error()))
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
	if sh != nil {
		c.respModel = sh.Model
		for _, ch := range sh.Choices {
			if ch.FinishReason != nil && *ch.FinishReason != "" {
				c.noteFinish(*ch.FinishReason)
			}
		}
	}
	if c.redacts() {
		c.noteRedactions(res)
	}
	// Closed fail mode: the answer waits for its entry.
	if err := c.j.respond(ctx, resp.StatusCode, sha256Hex(out)); err != nil {
		httpx.Fail(w, r, err)
		return nil
	}
	if ra := resp.Header.Get("Retry-After"); ra != "" {
		// A provider's 429 or 503 says when to come back: the agent's SDK
		// waits that long.
		w.Header().Set("Retry-After", ra)
		apierror.FailFast(w.Header(), resp.StatusCode, time.Now())
	}
	if resp.StatusCode == http.StatusOK && c.kind == KindChat {
		// A JSON answer's first token reaches the client with the rest.
		c.ex.Content(time.Now())
	}
	httpx.WriteRawJSON(w, resp.StatusCode, out)
	return nil
}

// fail answers a call that produced no answer, in OpenAI's shape (nobody
// when the client left), and records it.
func (c *call) fail(ctx context.Context, w http.ResponseWriter, r *http.Request, err error) error {
	var ae *apierror.Error
	if !errors.As(err, &ae) && !errors.Is(context.Cause(ctx), errTimeout) && ctx.Err() != nil {
		c.j.abandoned(ctx, err)
		return nil
	}
	e := apierror.From(upstreamError(ctx, c.ex.Route.Name, c.f.Timeout, err))
	httpx.Fail(w, r, e)
	_ = c.j.respond(ctx, e.Status, "")
	return nil
}

// unknownShape refuses an answer the gateway cannot read into the shape it
// knows: never passed on, a 502, and the audit entry says which check
// refused it.
func (c *call) unknownShape(reason string) error {
	c.f.Log.Warn("upstream answer refused", "request_id", c.ex.RequestID, "upstream", c.ex.Upstream, "reason", reason)
	c.ex.Check(scope.Verdict{Check: scope.CheckAnswer, Verdict: "refused", Reason: "unknown_shape"})
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

// redacts reports whether this answer is scanned: chat answers of agents
// without the protocol (the protocol stage redacts its own fields).
func (c *call) redacts() bool {
	return c.f.Redactor != nil
}

func (c *call) noteRedactions(res redact.Result) {
	c.ex.Redacted(res.Counts)
	c.ex.Check(scope.Verdict{Check: scope.CheckRedaction, Verdict: "applied", Count: res.Total(), Blocked: res.Blocked})
}

// start begins an attempt at the provider: a context the response timeout
// cancels (errTimeout), the attempt counted, and the llm.request entry
// begun under that context. The caller defers cancel(nil) and stopTimer.
func (c *call) start(r *http.Request) (context.Context, context.CancelCauseFunc) {
	ctx, cancel := context.WithCancelCause(r.Context())
	if c.f.Timeout > 0 {
		c.timer = time.AfterFunc(c.f.Timeout, func() { cancel(errTimeout) })
	}
	c.ex.Attempts++
	c.j.begin(ctx, r)
	return ctx, cancel
}

// stopTimer ends the response timeout; it reports errTimeout when the
// timer had already fired (the context is cancelled: nothing may follow).
func (c *call) stopTimer() error {
	if c.timer != nil && !c.timer.Stop() {
		return errTimeout
	}
	return nil
}

// recordUsage records a usage report of the answer. An unreadable one
// (scope.Usage) leaves the usage unknown and the answer as it is: the
// provider did the work, its content passed every check, and the books
// charge the whole reservation for it (billOf); refusing the answer would
// cost the agent both, and a stream's content is out before its usage
// comes anyway.
func (c *call) recordUsage(u scope.Usage) {
	if u.Unreadable != "" {
		c.f.Log.Warn("upstream usage not believed", "request_id", c.ex.RequestID, "upstream", c.ex.Upstream, "reason", u.Unreadable)
	}
	c.ex.Report(u)
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
		name, raw, ok := nextMember(dec)
		if !ok {
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

// nextMember reads one member of the object dec is in: its name and its
// value (valid until the next read).
func nextMember(dec *jsontext.Decoder) (string, jsontext.Value, bool) {
	tok, err := dec.ReadToken()
	if err != nil {
		return "", nil, false
	}
	name := tok.String() // the token is valid only until the next read
	v, err := dec.ReadValue()
	if err != nil {
		return "", nil, false
	}
	return name, v, true
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
		name, v, ok := nextMember(dec)
		if !ok {
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

// bufferPool recycles the stream copy buffers.
type bufferPool struct{ p sync.Pool }

func (b *bufferPool) Get() []byte {
	if v, ok := b.p.Get().(*[]byte); ok {
		return *v
	}
	return make([]byte, 32<<10)
}

func (b *bufferPool) Put(buf []byte) { b.p.Put(&buf) }
