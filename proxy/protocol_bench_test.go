package proxy

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/redact"
	"github.com/sacpgw/gateway/sacp"
	"github.com/sacpgw/gateway/scope"
)

// answerOfSize builds a realistic SACP answer of about n bytes: prose, then a
// fenced JSON object whose data holds records with a little personal data.
func answerOfSize(n int) string {
	var items []string
	for i := 0; len(strings.Join(items, ","))+300 < n; i++ {
		items = append(items, fmt.Sprintf(`{"id":%d,"name":"customer %d","note":"call +1 (555) 123-%04d or mail c%d@example.com about order %d","amount":%d.5}`, i, i, i%10000, i, i*7, i))
	}
	return "Here is the result you asked for:\n```json\n" +
		`{"thought":"I listed the open orders.","status":"success","data":{"amount":1,"orders":[` + strings.Join(items, ",") +
		`]},"message":"Found the orders; contact ops@example.com."}` + "\n```\nAnything else?"
}

// BenchmarkProtocolAnswer is the per-answer cost of the protocol stage:
// sanitize + validate (with a data schema) + redact the apply_to fields.
func BenchmarkProtocolAnswer(b *testing.B) {
	schema := []byte(`{"type":"object","properties":{"amount":{"type":"number"},"orders":{"type":"array","items":{"type":"object","required":["id","amount"]}}},"required":["amount"]}`)
	v, err := sacp.NewValidator(schema, "bench")
	if err != nil {
		b.Fatal(err)
	}
	red, _ := redact.New(redact.Config{})
	p := &Protocol{Redactor: red, ApplyTo: map[string]bool{"message": true, "data": true}}
	for _, size := range []int{1 << 10, 16 << 10, 256 << 10} {
		content := answerOfSize(size)
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(content)))
			for b.Loop() {
				out := v.Check(content)
				if !out.Valid {
					b.Fatalf("invalid: %v", out.Errors)
				}
				resp := out.Response
				p.redactResponse(&scope.Exchange{}, &resp)
				_ = resp.Compact()
			}
		})
	}
}

// BenchmarkStreamRedactorEvent is the cost the plain-stream redaction adds
// to one SSE chunk: decode, redact across the boundary, re-encode.
func BenchmarkStreamRedactorEvent(b *testing.B) {
	red, _ := redact.New(redact.Config{})
	words := strings.Fields("Please write to jane.doe@example.com about the invoice and call +44 20 7946 0958 before noon, thanks a lot")
	var events [][]byte
	for i := 0; i < len(words); i += 3 {
		piece := strings.Join(words[i:min(len(words), i+3)], " ") + " "
		c, _ := json.Marshal(map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
			"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": piece}, "finish_reason": nil}}})
		events = append(events, sseEvent(c))
	}
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for b.Loop() {
		s := newStreamRedactor(red)
		for _, ev := range events {
			s.event(ev, eventData(ev))
			n++
		}
		s.flush()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n)/1000, "µs/chunk")
}
