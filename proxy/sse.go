package proxy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"sync"
	"time"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/scope"
)

// sseFilter passes an upstream chat completion stream on event by event,
// so that the forwarder flushes each one as soon as it is complete,
// never gathering the stream. Each event is read per the WHATWG rules
// (sseReader), checked strictly, redacted (chunkScanner) and re-emitted in
// one canonical form: "data: <json>\n\n". An event the gateway cannot read
// into the chunk shape it knows is never passed on: the stream ends with
// an error event and no [DONE].
//
// On the way it reads the usage chunk (stream_options.include_usage) for
// token accounting, and drops it when the gateway asked for it on the
// agent's behalf. While the upstream is silent it sends ": keep-alive"
// comment lines every KeepAlive, and after Idle of silence it ends the
// stream with an error event.
//
// The upstream is read by one goroutine (started on the first Read) so
// that keep-alives and the idle deadline do not wait for the provider. It
// only frames events; checking, redacting and everything that touches the
// Exchange happen in Read's goroutine (the handler's, whose stack the
// request's earlier stages have already grown), and in Close, which waits
// for the reader first.
type sseFilter struct {
	src    *sseReader
	closer io.Closer
	// dropUsage removes usage-only chunks the client did not ask for (and
	// scan the usage members of the others).
	dropUsage bool
	onUsage   func(scope.Usage)
	// scan checks and redacts each chunk (its Redactor may be nil: check only).
	scan *chunkScanner
	// finish, if set, is called once: when the [DONE] event is about to be
	// sent (complete), or when the stream ends, fails or is closed without
	// one. sum is the SHA-256 of every event sent, [DONE] included
	// (keep-alive comments are not part of the answer). An error at [DONE]
	// replaces it with an error event: the stream is not completed.
	finish func(sum string, complete bool) error
	// onRefuse is told why the stream was ended by the gateway (unknown
	// shape, idle upstream); nil: not recorded.
	onRefuse func(reason string)
	// onRelease, if set, is told of the chunks released to the client as
	// Read releases them (the time to first token and the gaps between
	// tokens are the client's): whether they carry content of the answer
	// (text, refusal, reasoning or a tool call; not the role-only opening
	// chunk, a usage chunk or an empty finishing delta), and the finish
	// reasons of the choices they end. What Close drains after the client
	// left is not released.
	onRelease func(content bool, finish []string)
	// KeepAlive is the interval of keep-alive comments; zero: none.
	KeepAlive time.Duration
	// Idle ends a stream silent this long; zero: no limit.
	Idle time.Duration

	hash     hash.Hash
	finished bool
	closing  bool
	out      []byte // bytes ready for Read (own, or keepAliveLine: never appended to)
	own      []byte // the buffer out is built in, reused once Read has copied it out
	off      int
	err      error

	once  sync.Once
	heard time.Time // when the upstream last sent something
	keep  *time.Timer
	keepC <-chan time.Time
	idle  *time.Timer
	idleC <-chan time.Time
	items chan sseItem
	done  chan struct{}
	quit  chan struct{}
	stop  sync.Once

	// rd and dec read released chunks for onRelease, reused across events.
	rd  bytes.Reader
	dec jsontext.Decoder
}

// sseItem is one framed event from the upstream, or the error that ended
// its reading.
type sseItem struct {
	msg sseMessage
	err error
}

func newSSEFilter(body io.ReadCloser, dropUsage bool, onUsage func(scope.Usage), scan *chunkScanner) *sseFilter {
	scan.hideUsage = dropUsage
	return &sseFilter{src: newSSEReader(body), closer: body, dropUsage: dropUsage, onUsage: onUsage, scan: scan,
		hash: sha256.New(), items: make(chan sseItem, 4), done: make(chan struct{}), quit: make(chan struct{})}
}

func (f *sseFilter) Read(p []byte) (int, error) {
	f.once.Do(f.start)
	for f.off >= len(f.out) {
		if f.err != nil {
			return 0, f.err
		}
		select {
		case it := <-f.items:
			f.out, f.off = f.own[:0], 0
			f.take(it)
			// Take what else the pump has ready: one write to the
			// client (and one flush) for every event already read.
			for f.err == nil && len(f.items) > 0 {
				f.take(<-f.items)
			}
			f.quiet()
		case <-f.keepC:
			if f.rearm(f.keep, f.KeepAlive) {
				continue
			}
			f.keep.Reset(f.KeepAlive)
			f.out, f.off = keepAliveLine, 0
		case <-f.idleC:
			if f.rearm(f.idle, f.Idle) {
				continue
			}
			// The pump is still blocked on the upstream: stop it, take
			// what it left, then say why in the stream.
			f.halt()
			<-f.done
			f.drain()
			if !f.finished {
				f.out = append(f.out, f.refuse("idle", "The upstream sent nothing for "+f.Idle.String()+"; the answer was ended.")...)
			}
			f.err = io.EOF
		}
	}
	n := copy(p, f.out[f.off:])
	f.off += n
	return n, nil
}

// start launches the pump and the timers.
func (f *sseFilter) start() {
	f.heard = time.Now()
	if f.KeepAlive > 0 {
		f.keep = time.NewTimer(f.KeepAlive)
		f.keepC = f.keep.C
	}
	if f.Idle > 0 {
		f.idle = time.NewTimer(f.Idle)
		f.idleC = f.idle.C
	}
	go f.pump()
}

// quiet notes that the upstream just sent something. The silence timers
// are not reset for every event (two timer resets cost more than the rest
// of the event's handling): one that fires before its silence has lasted
// is re-armed for the rest (rearm).
func (f *sseFilter) quiet() {
	if f.keep != nil || f.idle != nil {
		f.heard = time.Now()
	}
}

// rearm re-arms t, which just fired, when the upstream was heard less than
// d ago; false: the silence has lasted d.
func (f *sseFilter) rearm(t *time.Timer, d time.Duration) bool {
	if left := d - time.Since(f.heard); left > 0 {
		t.Reset(left)
		return true
	}
	return false
}

// take processes one item of the pump and appends what to send for it;
// an error ends the stream after those bytes.
func (f *sseFilter) take(it sseItem) {
	if f.err != nil {
		return
	}
	b, err := f.process(it)
	f.out, f.err = append(f.out, b...), err
	f.own = f.out[:0]
}

// drain takes what the stopped pump left, after what Read has not sent yet.
func (f *sseFilter) drain() {
	f.out, f.off = append(f.own[:0], f.out[f.off:]...), 0
	for {
		select {
		case it := <-f.items:
			f.take(it)
		default:
			return
		}
	}
}

var keepAliveLine = []byte(": keep-alive\n")

// halt stops the pump: the upstream body is closed, which ends its read.
func (f *sseFilter) halt() {
	f.stop.Do(func() {
		close(f.quit)
		_ = f.closer.Close()
	})
}

func (f *sseFilter) Close() error {
	f.closing = true
	f.once.Do(func() { close(f.done) }) // never started: nothing to wait for
	f.halt()
	<-f.done
	if f.keep != nil {
		f.keep.Stop()
	}
	if f.idle != nil {
		f.idle.Stop()
	}
	// Events the pump read but nobody took still count (usage, the
	// answer's hash, a [DONE]); their bytes go nowhere.
	f.drain()
	f.end(false)
	// The pump is gone and nothing is read any more: the buffers go back.
	if f.src != nil {
		f.src.release()
		f.scan.release()
		f.src = nil
	}
	return nil
}

// pump frames the upstream's events until the stream ends.
func (f *sseFilter) pump() {
	defer close(f.done)
	for {
		msg, err := f.src.next()
		if err != nil {
			select {
			case <-f.quit:
				// Halted (idle upstream or client gone): Read or Close end it.
				return
			default:
			}
		}
		select {
		case f.items <- sseItem{msg: msg, err: err}:
		case <-f.quit:
			return
		}
		if err != nil {
			return
		}
	}
}

// end calls finish once.
func (f *sseFilter) end(complete bool) error {
	if f.finished || f.finish == nil {
		f.finished = true
		return nil
	}
	f.finished = true
	return f.finish(hex.EncodeToString(f.hash.Sum(nil)), complete)
}

// process returns what to send for one framed event (nothing for a usage
// chunk the client did not ask for); err ends the stream after those bytes.
func (f *sseFilter) process(it sseItem) ([]byte, error) {
	msg, err := it.msg, it.err
	if err != nil {
		if errors.Is(err, io.EOF) {
			// The upstream ended without [DONE]: what was sent stands, the
			// answer is incomplete.
			f.end(false)
			return nil, io.EOF
		}
		if errors.Is(err, errEventTooLarge) {
			return f.refuse("unknown_shape", "The upstream sent a stream event too large to check; the answer was ended."), io.EOF
		}
		f.end(false)
		return nil, err
	}
	switch {
	case msg.comment:
		// A provider's keep-alive: passed on as one comment line with no
		// blank line after it (several SDKs dispatch an empty event on
		// ": x\n\n"), and never its text, which nobody checked.
		return keepAliveLine, nil
	case msg.name != "" && msg.name != "message":
		return f.refuse("unknown_shape", "The upstream sent a stream event of a kind the gateway does not know; the answer was ended."), io.EOF
	case string(msg.data) == "[DONE]":
		return f.complete()
	}
	res, err := f.scan.event(msg.data)
	if err != nil {
		return f.refuse("unknown_shape", "The upstream sent a stream event the gateway cannot read; the answer was ended."), io.EOF
	}
	if res.usage != nil && f.onUsage != nil {
		f.onUsage(*res.usage)
		if f.dropUsage && res.usageOnly {
			return nil, nil
		}
	}
	if res.noted {
		f.note(res.notes.content, res.notes.finish)
	} else {
		f.released(res.out)
	}
	if res.blocked {
		// The content_filter ending carries its own [DONE].
		f.hash.Write(res.out)
		if err := f.end(true); err != nil {
			return auditFail, io.EOF
		}
		return res.out, io.EOF
	}
	f.hash.Write(res.out)
	return res.out, nil
}

// complete sends what the redactor held back, then [DONE] once the answer is
// on record.
func (f *sseFilter) complete() ([]byte, error) {
	out, blocked := f.scan.flush()
	f.released(out) // text the redactor held back until the end
	if blocked {
		f.hash.Write(out)
		if err := f.end(true); err != nil {
			return auditFail, io.EOF
		}
		return out, io.EOF
	}
	out = append(out, doneEvent...)
	f.hash.Write(out)
	if err := f.end(true); err != nil {
		return append(out[:len(out)-len(doneEvent)], auditFail...), io.EOF
	}
	return out, io.EOF
}

// released tells onRelease about out, the events process is about to
// release: canonical "data: <json>\n\n" events as sseEvent writes them
// (already read strictly), so a light token scan suffices.
func (f *sseFilter) released(out []byte) {
	if f.onRelease == nil || f.closing || len(out) == 0 {
		return
	}
	var content bool
	var finish []string
	for {
		data, ok := bytes.CutPrefix(out, sseDataPrefix)
		if !ok || bytes.HasPrefix(data, doneData) {
			break
		}
		f.rd.Reset(data)
		f.dec.Reset(&f.rd)
		if !scanChunk(&f.dec, &content, &finish) {
			break
		}
		out = bytes.TrimLeft(data[f.dec.InputOffset():], "\r\n\t ")
	}
	f.note(content, finish)
}

// note passes the release notes of what Read is about to release on to
// onRelease, when they say something.
func (f *sseFilter) note(content bool, finish []string) {
	if f.onRelease == nil || f.closing {
		return
	}
	if content || len(finish) > 0 {
		f.onRelease(content, finish)
	}
}

var (
	sseDataPrefix = []byte("data: ")
	doneData      = []byte("[DONE]")
)

// scanChunk reads one chunk from dec, noting whether a choice's delta (or
// message) carries content and the choices' finish reasons; false when
// the chunk could not be read to its end.
func scanChunk(dec *jsontext.Decoder, content *bool, finish *[]string) bool {
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return false
	}
	for dec.PeekKind() == '"' {
		name, err := dec.ReadToken()
		if err != nil {
			return false
		}
		if name.String() != "choices" || dec.PeekKind() != '[' {
			if dec.SkipValue() != nil {
				return false
			}
			continue
		}
		if _, err := dec.ReadToken(); err != nil {
			return false
		}
		for dec.PeekKind() == '{' {
			if !scanChoice(dec, content, finish) {
				return false
			}
		}
		if _, err := dec.ReadToken(); err != nil { // ]
			return false
		}
	}
	_, err := dec.ReadToken() // }
	return err == nil
}

// scanChoice reads one element of choices.
func scanChoice(dec *jsontext.Decoder, content *bool, finish *[]string) bool {
	if _, err := dec.ReadToken(); err != nil { // {
		return false
	}
	for dec.PeekKind() == '"' {
		name, err := dec.ReadToken()
		if err != nil {
			return false
		}
		switch n := name.String(); {
		case (n == "delta" || n == "message") && dec.PeekKind() == '{':
			if _, err := dec.ReadToken(); err != nil {
				return false
			}
			for dec.PeekKind() == '"' {
				field, err := dec.ReadToken()
				if err != nil {
					return false
				}
				kind := contentKind(field.String()) // the token is valid until the next read
				v, err := dec.ReadValue()
				if err != nil {
					return false
				}
				if carriesContent(kind, v) {
					*content = true
				}
			}
			if _, err := dec.ReadToken(); err != nil { // }
				return false
			}
		case n == "finish_reason":
			v, err := dec.ReadValue()
			if err != nil {
				return false
			}
			if v.Kind() == '"' && len(v) > 2 {
				if r, err := jsontext.AppendUnquote(nil, v); err == nil {
					*finish = append(*finish, string(r))
				}
			}
		default:
			if dec.SkipValue() != nil {
				return false
			}
		}
	}
	_, err := dec.ReadToken() // }
	return err == nil
}

// Fields of a delta that may carry content.
const (
	notContent      = iota
	textContent     // content (a string or parts), refusal, reasoning
	toolCallContent // tool_calls
	functionContent // function_call (the deprecated single tool call)
)

func contentKind(field string) int {
	switch field {
	case "content", "refusal", "reasoning_content", "reasoning":
		return textContent
	case "tool_calls":
		return toolCallContent
	case "function_call":
		return functionContent
	}
	return notContent
}

// carriesContent reports whether a delta's field of kind k, v, is content
// of the answer: non-empty text or a tool call. The role, and "" or null,
// are not.
func carriesContent(k int, v jsontext.Value) bool {
	switch k {
	case textContent:
		return v.Kind() == '"' && len(v) > len(`""`) || v.Kind() == '[' && hasElements(v)
	case toolCallContent:
		return v.Kind() == '[' && hasElements(v)
	case functionContent:
		return v.Kind() == '{'
	}
	return false
}

// hasElements reports whether the array v is not empty.
func hasElements(v jsontext.Value) bool {
	return len(bytes.TrimSpace(v[1:len(v)-1])) > 0
}

// refuse ends the stream with an OpenAI-shaped error event and no [DONE].
func (f *sseFilter) refuse(reason, message string) []byte {
	if f.onRefuse != nil {
		f.onRefuse(reason)
	}
	b := errorEvent("upstream_error", "upstream_error", message)
	f.hash.Write(b)
	f.end(false)
	return b
}

var (
	doneEvent = []byte("data: [DONE]\n\n")
	auditFail = errorEvent("server_error", "audit_unavailable", "The audit trail is unavailable; the answer was not completed.")
)

// errorEvent is an SSE event in OpenAI's error shape.
func errorEvent(typ, code, message string) []byte {
	return errorEventOf(&apierror.Error{Type: typ, Code: code, Message: message})
}

// errorEventOf is e as the event that ends a stream already begun.
func errorEventOf(e *apierror.Error) []byte {
	return sseEvent(bytes.TrimSuffix(e.JSON(), []byte("\n")))
}
