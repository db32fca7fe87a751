package proxy

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/redact"
	"github.com/sacpgw/gateway/sacp"
)

// answerOfSize builds a SACP answer of about n bytes: prose, then a fenced
// JSON object whose data holds records. dense puts a phone number and an
// e-mail address in every record (~1 value per 50 bytes); otherwise one
// record in twenty has one (~1 value per KB).
func answerOfSize(n int, dense bool) string {
	var items []string
	for i := 0; len(strings.Join(items, ","))+300 < n; i++ {
		note := fmt.Sprintf("order %d shipped on time, invoice settled, nothing to report", i*7)
		if dense || i%20 == 0 {
			note = fmt.Sprintf("call +1 (555) 123-%04d or mail c%d@example.com about order %d", i%10000, i, i*7)
		}
		items = append(items, fmt.Sprintf(`{"id":%d,"name":"customer %d","note":%q,"amount":%d.5}`, i, i, note, i))
	}
	return "Here is the result you asked for:\n```json\n" +
		`{"thought":"I listed the open orders.","status":"success","data":{"amount":1,"orders":[` + strings.Join(items, ",") +
		`]},"message":"Found the orders; contact ops@example.com."}` + "\n```\nAnything else?"
}

// BenchmarkProtocolAnswer is the per-answer cost of the protocol stage:
// sanitize + validate (with a data schema) + redact the apply_to fields.
// "typical": a schema on the top-level data fields, ~1 personal value per
// KB; "dense": every line item checked by the schema and a phone number and
// an e-mail address in every record.
func BenchmarkProtocolAnswer(b *testing.B) {
	red, _ := redact.New(redact.Config{Detectors: redact.Names()})
	p := &Protocol{Redactor: red, ApplyTo: map[string]bool{"message": true, "data": true}}
	for _, variant := range []struct {
		name   string
		schema string
		dense  bool
	}{
		{"typical", `{"type":"object","properties":{"amount":{"type":"number"},"orders":{"type":"array"}},"required":["amount"]}`, false},
		{"dense", `{"type":"object","properties":{"amount":{"type":"number"},"orders":{"type":"array","items":{"type":"object","required":["id","amount"]}}},"required":["amount"]}`, true},
	} {
		v, err := sacp.NewValidator([]byte(variant.schema), "bench")
		if err != nil {
			b.Fatal(err)
		}
		for _, size := range []int{1 << 10, 16 << 10, 256 << 10} {
			content := answerOfSize(size, variant.dense)
			b.Run(fmt.Sprintf("%s/%dKB", variant.name, size>>10), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(content)))
				for b.Loop() {
					out := v.Check(content)
					if !out.Valid {
						b.Fatalf("invalid: %v", out.Errors)
					}
					resp := out.Response
					p.redactResponse(&scope.Exchange{}, &resp, nil)
					_ = resp.Compact()
				}
			})
		}
	}
}

// BenchmarkStreamRedactorEvent is the cost the plain-stream redaction adds
// to one SSE chunk: decode, redact across the boundary, re-encode.
func BenchmarkStreamRedactorEvent(b *testing.B) {
	red, _ := redact.New(redact.Config{Detectors: redact.Names()})
	words := strings.Fields("Please write to jane.doe@example.com about the invoice and call +44 20 7946 0958 before noon, thanks a lot")
	var events [][]byte
	for i := 0; i < len(words); i += 3 {
		piece := strings.Join(words[i:min(len(words), i+3)], " ") + " "
		c, _ := json.Marshal(map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
			"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": piece}, "finish_reason": nil}}})
		events = append(events, c)
	}
	b.ReportAllocs()
	b.ResetTimer()
	n := 0
	for b.Loop() {
		s := newChunkScanner(red)
		for _, data := range events {
			if _, err := s.event(data); err != nil {
				b.Fatal(err)
			}
			n++
		}
		s.flush()
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(n)/1000, "µs/chunk")
}
