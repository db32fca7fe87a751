package proxy

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
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

	ev  []byte // the event being assembled
	out []byte // bytes ready for Read
	off int
	err error
}

func newSSEFilter(body io.ReadCloser, dropUsage bool, onUsage func(scope.Usage)) *sseFilter {
	return &sseFilter{src: bufio.NewReaderSize(body, 16<<10), closer: body, dropUsage: dropUsage, onUsage: onUsage}
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

func (f *sseFilter) Close() error { return f.closer.Close() }

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
			f.err = err
			return
		}
		if isBlank(line) {
			f.emit()
			return
		}
	}
}

var usageKey = []byte(`"usage"`)

func (f *sseFilter) emit() {
	if len(f.ev) == 0 {
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
	f.out = append(f.out, f.ev...)
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
