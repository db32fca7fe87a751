package proxy

import (
	"testing"

	"github.com/sacpgw/gateway/policy"
)

// BenchmarkReadForContentPolicy is the reading of a chat request for an
// agent whose chat policy reads the messages: the strict reading and the
// policy's value of the body, parsed twice (the reader, then the engine
// converting the body) or once (the value built in the reader's pass).
//
//	go test ./proxy -run '^$' -bench ReadForContentPolicy -benchmem
func BenchmarkReadForContentPolicy(b *testing.B) {
	body := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are terse."},` +
		`{"role":"user","content":"What is six times seven?"},{"role":"assistant","content":"42."},` +
		`{"role":"user","content":[{"type":"text","text":"And six times eight?"}]}]}`)
	b.Run("twice", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, err := DecodeRequest(KindChat, body); err != nil {
				b.Fatal(err)
			}
			if _, err := policy.JSONInput(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("once", func(b *testing.B) {
		b.ReportAllocs()
		for range b.N {
			if _, v, err := decodeRead(KindChat, body, true); err != nil || v == nil {
				b.Fatal(err)
			}
		}
	})
}
