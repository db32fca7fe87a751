package approval

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/limit"
)

type nopAudit struct{}

func (nopAudit) Append(context.Context, audit.Record) (audit.Entry, error) { return audit.Entry{}, nil }

// BenchmarkSubmit is POST /agent/request end to end in process (decode,
// rate limit, two audit appends, the test decider, two store writes,
// encode) without the network or the real policy and audit trail.
func BenchmarkSubmit(b *testing.B) {
	cfg := testConfig()
	cat, err := LoadCatalogue("../config/specs")
	if err != nil {
		b.Fatal(err)
	}
	svc, err := New(Deps{Config: cfg, Decider: &testDecider{}, Authorizer: testAuthorizer(cfg), Store: NewMemoryStore(),
		Limiter: limit.NewMemory(), Rate: limit.Rule{N: 1 << 30, Period: 1}, Audit: &door.Recorder{Log: nopAudit{}, FailClosed: true, Logger: slog.New(slog.DiscardHandler)},
		Catalogue: cat, Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	body, _ := json.Marshal(approvalRequest())
	h := svc.Submit()
	agent := cfg.Agents["claude-3"]
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	for b.Loop() {
		r := httptest.NewRequest(http.MethodPost, "/agent/request", bytes.NewReader(body))
		r = scope.Attach(r, &scope.Exchange{RequestID: "bench", Agent: agent})
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		if w.Code != http.StatusOK {
			b.Fatalf("status %d: %s", w.Code, w.Body)
		}
	}
}
