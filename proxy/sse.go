package proxy

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"hash"
	"io"

	"github.com/sacpgw/gateway/scope"
)

// sseFilter passes an upstream SSE stream through event by event, so that
// the reverse proxy flushes each event to the client as soon as it is
// complete, never gathering the stream. On the way it reads the usage chunk
// (stream_options.include_usage) for token accounting, and drops it when the
// gateway asked for it on the agent's behalf, so the client sees exactly the
// stream it asked for.
type sseFilter struct {
	src    *bufio.Reader
	closer io.Closer
	// dropUsage removes usage-only chunks (no choices) the client did not ask for.
	dropUsage bool
	onUsage   func(scope.Usage)
	// finish, if set, is called once: when the [DONE] event is about to be
	// sent (complete), or when the stream ends or is closed without one.
	// sum is the SHA-256 of every byte sent, [DONE] included. An error at
	// [DONE] replaces it with an error event: the stream is not completed.
	finish   func(sum string, complete bool) error
	finished bool
	hash     hash.Hash
	// content, if set, redacts the content deltas across chunks.
	content *streamRedactor

	ev  []byte // the event being assembled
	out []byte // bytes ready for Read
	off int
	err error
}

func newSSEFilter(body io.ReadCloser, dropUsage bool, onUsage func(scope.Usage)) *sseFilter {
	return &sseFilter{src: bufio.NewReaderSize(body, 16<<10), closer: body, dropUsage: dropUsage, onUsage: onUsage, hash: sha256.New()}
}

func (f *sseFilter) Read(p []byte) (int, error) {
	for f.off >= len(f.out) {
		if f.err != nil {
			return 0, f.err
		}
		f.out, f.off = f.out[:0], 0
		f.next()
	}
	n := copy(p, f.out[f.off:])
	f.off += n
	return n, nil
}

func (f *sseFilter) Close() error {
	f.end(false)
	return f.closer.Close()
}

// end calls finish once.
func (f *sseFilter) end(complete bool) error {
	if f.finished || f.finish == nil {
		return nil
	}
	f.finished = true
	return f.finish(hex.EncodeToString(f.hash.Sum(nil)), complete)
}

// send queues bytes for the client and hashes them.
func (f *sseFilter) send(b []byte) {
	f.out = append(f.out, b...)
	f.hash.Write(b)
}

// next reads one event (up to and including its blank line) into f.out.
func (f *sseFilter) next() {
	f.ev = f.ev[:0]
	for {
		line, err := f.src.ReadSlice('\n')
		f.ev = append(f.ev, line...)
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if err != nil {
			// End of stream (or a cut upstream): pass what there is, then the error.
			f.emit()
			if f.content != nil && !f.finished && f.err == nil {
				if out, blocked := f.content.flush(); !blocked {
					f.send(out)
				}
			}
			if f.err == nil {
				f.err = err
			}
			f.end(false)
			return
		}
		if isBlank(line) {
			f.emit()
			return
		}
	}
}

var (
	usageKey  = []byte(`"usage"`)
	doneData  = []byte("[DONE]")
	auditFail = []byte(`data: {"error":{"message":"The audit trail is unavailable; the answer was not completed.","type":"server_error","code":"audit_unavailable","param":null}}` + "\n\n")
)

func (f *sseFilter) emit() {
	if len(f.ev) == 0 {
		return
	}
	done := bytes.Contains(f.ev, doneData) && bytes.Equal(eventData(f.ev), doneData)
	if f.content != nil {
		var out []byte
		var blocked bool
		if done {
			out, blocked = f.content.flush()
			if !blocked {
				f.send(out)
			}
		} else {
			out, blocked = f.content.event(f.ev, eventData(f.ev))
		}
		if blocked {
			// The content_filter ending carries its own [DONE]; nothing more
			// is read from the upstream.
			f.ev = out
			f.err = io.EOF
			done = true
		} else if !done {
			f.ev = out
		}
	}
	if done {
		if f.finish == nil || f.finished {
			f.send(f.ev)
			return
		}
		f.hash.Write(f.ev)
		f.finished = true
		if err := f.finish(hex.EncodeToString(f.hash.Sum(nil)), true); err != nil {
			f.out = append(f.out, auditFail...)
			return
		}
		f.out = append(f.out, f.ev...)
		return
	}
	if commentOnly(f.ev) {
		// A provider's keep-alive (": ping\n\n"): the blank line after it
		// makes several SDKs (openai-go before #621, openai-python #2722)
		// dispatch an empty event and fail on it. The comment line alone
		// still keeps idle-timeout proxies awake.
		f.send(append(bytes.TrimRight(f.ev, "\r\n"), '\n'))
		return
	}
	if bytes.Contains(f.ev, usageKey) {
		if data := eventData(f.ev); data != nil {
			var chunk struct {
				Choices []json.RawMessage `json:"choices"`
				Usage   *scope.Usage      `json:"usage"`
			}
			if json.Unmarshal(data, &chunk) == nil && chunk.Usage != nil {
				f.onUsage(*chunk.Usage)
				if f.dropUsage && len(chunk.Choices) == 0 {
					return
				}
			}
		}
	}
	f.send(f.ev)
}

// commentOnly reports whether an event holds nothing but ":" comment lines
// (and its terminating blank line).
func commentOnly(ev []byte) bool {
	sawComment := false
	for _, line := range bytes.Split(ev, []byte("\n")) {
		line = bytes.TrimRight(line, "\r")
		switch {
		case len(line) == 0:
		case line[0] == ':':
			sawComment = true
		default:
			return false
		}
	}
	return sawComment && (bytes.HasSuffix(ev, []byte("\n\n")) || bytes.HasSuffix(ev, []byte("\n\r\n")))
}

func isBlank(line []byte) bool {
	return len(line) == 1 || (len(line) == 2 && line[0] == '\r')
}

// eventData returns the joined "data:" lines of one SSE event.
func eventData(ev []byte) []byte {
	var data []byte
	for len(ev) > 0 {
		line := ev
		if i := bytes.IndexByte(ev, '\n'); i >= 0 {
			line, ev = ev[:i], ev[i+1:]
		} else {
			ev = nil
		}
		line = bytes.TrimRight(line, "\r")
		if v, ok := bytes.CutPrefix(line, []byte("data:")); ok {
			if data != nil {
				data = append(data, '\n')
			}
			data = append(data, bytes.TrimPrefix(v, []byte(" "))...)
		}
	}
	return data
}
