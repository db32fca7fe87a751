package proxy

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/redact"
)

// benchStream is the stream bench/upstream sends when the gateway asks for
// the usage: five content chunks, a finish chunk, a usage chunk, [DONE].
func benchStream() []byte {
	const head = `data: {"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"bench-model","choices":`
	var b strings.Builder
	for i, w := range []string{"Hello", " from", " the", " mock", " upstream."} {
		delta := `{"content":"` + w + `"}`
		if i == 0 {
			delta = `{"role":"assistant","content":"` + w + `"}`
		}
		b.WriteString(head + `[{"index":0,"delta":` + delta + `,"finish_reason":null}]}` + "\n\n")
	}
	b.WriteString(head + `[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n")
	b.WriteString(head + `[],"usage":{"prompt_tokens":12,"completion_tokens":5,"total_tokens":17}}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return []byte(b.String())
}

// BenchmarkSSEFilter is one stream through the filter as the forwarder
// runs it with every stage on: every detector, the usage the gateway asked
// for read and dropped, the release notes and the answer's hash; each
// event read as the wire delivers it (one Read per event).
func BenchmarkSSEFilter(b *testing.B) {
	red, err := redact.New(redact.Config{Detectors: redact.Names()})
	if err != nil {
		b.Fatal(err)
	}
	in := benchStream()
	events := bytes.SplitAfter(in, []byte("\n\n"))
	for _, v := range []struct {
		name string
		r    *redact.Redactor
	}{{"redact", red}, {"check", nil}} {
		b.Run(v.name, func(b *testing.B) {
			buf := make([]byte, 32<<10)
			b.ReportAllocs()
			b.SetBytes(int64(len(in)))
			for b.Loop() {
				src := &eventReader{events: append([][]byte(nil), events...)}
				f := newSSEFilter(io.NopCloser(src), true, func(scope.Usage) {}, newChunkScanner(v.r))
				f.onRelease = func(bool, []string) {}
				f.finish = func(string, bool) error { return nil }
				for {
					_, err := f.Read(buf)
					if err != nil {
						break
					}
				}
				_ = f.Close()
			}
		})
	}
}

// BenchmarkChunkScan is the check and redaction of one content chunk, in
// one pass (the common shape) and the general way (every other shape).
func BenchmarkChunkScan(b *testing.B) {
	red, err := redact.New(redact.Config{Detectors: redact.Names()})
	if err != nil {
		b.Fatal(err)
	}
	data := []byte(`{"id":"chatcmpl-bench","object":"chat.completion.chunk","created":1700000000,"model":"bench-model","choices":[{"index":0,"delta":{"content":" mock"},"finish_reason":null}]}`)
	for _, general := range []bool{false, true} {
		name := "one-pass"
		if general {
			name = "general"
		}
		b.Run(name, func(b *testing.B) {
			s := newChunkScanner(red)
			s.hideUsage, s.general = true, general
			b.ReportAllocs()
			for b.Loop() {
				if _, err := s.event(data); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// eventReader hands out one event per Read, as a flushed upstream does.
type eventReader struct {
	events [][]byte
	i      int
}

func (e *eventReader) Read(p []byte) (int, error) {
	for e.i < len(e.events) && len(e.events[e.i]) == 0 {
		e.i++
	}
	if e.i >= len(e.events) {
		return 0, io.EOF
	}
	n := copy(p, e.events[e.i])
	e.events[e.i] = e.events[e.i][n:]
	return n, nil
}
