package anthropic

import (
	"bytes"
	"io"
	"path/filepath"
	"testing"
)

// BenchmarkProvider is the translation to and from an anthropic upstream
// alone, on the recorded fixtures: the request (a tool round trip), the
// answer, and the event stream, whose cost is also given per event it
// reads ("ns/event").
func BenchmarkProvider(b *testing.B) {
	chat := readFile(b, filepath.Join("provider", "tool_result.chat.json"))
	answer := readFile(b, filepath.Join("provider", "tool_call.answer.json"))
	stream := readFile(b, filepath.Join("provider", "tool_stream.anthropic.sse"))
	events := bytes.Count(stream, []byte("\n\n"))
	b.Run("request", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, _, err := ProviderRequest(chat, ProviderOptions{MaxTokens: 4096}); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("response", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := ProviderResponse(answer, 1); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("stream", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(stream)))
		for b.Loop() {
			if _, err := io.Copy(io.Discard, NewChunkReader(io.NopCloser(bytes.NewReader(stream)), true, 1)); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(events), "ns/event")
	})
}

// BenchmarkStream is the other direction's stream translation alone: the
// gateway's chunk stream said as Anthropic's event stream (what a
// Messages-API agent reads), per chunk it reads ("ns/event").
func BenchmarkStream(b *testing.B) {
	in := readFile(b, filepath.Join("provider", "tool_stream.openai.sse"))
	events := bytes.Count(in, []byte("\n\n"))
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for b.Loop() {
		s := NewStream(io.Discard, "")
		if _, err := s.Write(in); err != nil {
			b.Fatal(err)
		}
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(events), "ns/event")
}
