package proxy

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/redact"
)

// compactOfSize builds a fenced compact answer of about n bytes whose ctx
// holds records, one in twenty with an e-mail address.
func compactOfSize(n int) string {
	var items []string
	for i := 0; len(strings.Join(items, ","))+200 < n; i++ {
		note := fmt.Sprintf("order %d shipped on time", i*7)
		if i%20 == 0 {
			note = fmt.Sprintf("mail c%d@example.com about order %d", i, i*7)
		}
		items = append(items, fmt.Sprintf(`{"id":%d,"note":%q,"amount":%d.5}`, i, note, i))
	}
	return "Result:\n```json\n" + `{"msg_id":"r-1","reply_to":"t-1","g":"PREDICT","ctx":{"orders":[` + strings.Join(items, ",") +
		`]},"plan":[["predict","PRC_EST",{"window":3,"method":"arima"}]],"state":"DONE"}` + "\n```"
}

// BenchmarkCompactAnswer is the per-answer cost of a sacp_compact agent:
// sanitize, validate against the library, redact every string value and
// compact.
func BenchmarkCompactAnswer(b *testing.B) {
	red, _ := redact.New(redact.Config{Detectors: redact.Names()})
	for _, size := range []int{1 << 10, 16 << 10, 256 << 10} {
		content := compactOfSize(size)
		b.Run(fmt.Sprintf("%dKB", size>>10), func(b *testing.B) {
			c := testChecker(b, "raw", red)
			b.ReportAllocs()
			b.SetBytes(int64(len(content)))
			for b.Loop() {
				if ok, errs := c.Check(content); !ok {
					b.Fatalf("invalid: %v", errs)
				}
				_ = c.Settle(context.Background(), &scope.Exchange{Attempts: 1}, content)
			}
		})
	}
}
