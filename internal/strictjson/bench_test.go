package strictjson

import "testing"

var benchChunk = []byte(`{"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":"The answer "},"finish_reason":null}]}`)

// BenchmarkCheckChunk is the strict reading of one stream chunk.
func BenchmarkCheckChunk(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if err := Check(benchChunk, shape); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRewriteChunk is the reading plus a changed string re-encoded.
func BenchmarkRewriteChunk(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := Rewrite(benchChunk, shape, func(p Path, s string) (string, bool) { return s + "x", true }); err != nil {
			b.Fatal(err)
		}
	}
}
