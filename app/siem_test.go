package app

import (
	"context"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/testkit"
	"github.com/sacpgw/gateway/internal/testotlp"
)

const siemKey = "siem-test-key-7b2e"

// siemGateway is the gateway of dir as Serve builds it (the trail, Build,
// Run, a server), until stop.
func siemGateway(t *testing.T, dir string, logs *testkit.LogBuffer) (url string, stop func()) {
	t.Helper()
	cfg, err := config.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	auditLog, err := openAudit(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Build(cfg, Options{Log: log, Audit: auditLog, Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	srv := httptest.NewServer(a.server.Handler())
	return srv.URL, func() {
		srv.Close()
		cancel()
		<-done
		a.Close()
		_ = auditLog.Close()
	}
}

// trailLines reads every committed line of the chain.
func trailLines(t *testing.T, dir, chain string) []audit.Line {
	t.Helper()
	lines, err := audit.NewFollower(dir, chain, 0, "").Next(math.MaxInt64, math.MaxInt32, math.MaxInt64)
	if err != nil {
		t.Fatal(err)
	}
	return lines
}

// TestTrailReachesTheSIEMAcrossARestart: with audit.otlp set, every entry
// the gateway writes (chats and a refused key) reaches an OTLP
// collector exactly as the trail has it, across a restart on the same
// audit directory, with the configured key on every export and never in
// the gateway's log. The bound on duplicates: at most one batch
// (batch_size entries), and only entries written before the restart;
// after this clean stop there are none.
func TestTrailReachesTheSIEMAcrossARestart(t *testing.T) {
	col := testotlp.New(t)
	g := newA2A(t, a2aOpts{})
	g.stop()
	auditDir := filepath.Join(t.TempDir(), "audit")
	path := filepath.Join(g.dir, config.GatewayFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const batch = 4
	otlp := "audit:\n  otlp:\n    endpoint: " + col.URL + "\n    headers:\n      Authorization: Bearer ${SIEM_TEST_KEY}\n    interval: 20ms\n    batch_size: 4\n" +
		"  dir: " + auditDir + "\n"
	gw := strings.Replace(string(data), "audit:\n  dir: "+g.auditDir+"\n", otlp, 1)
	if gw == string(data) {
		t.Fatal("the test config has no audit section to extend")
	}
	if err := os.WriteFile(path, []byte(gw), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SIEM_TEST_KEY", siemKey)
	logs := &testkit.LogBuffer{}
	chat := func(url, token string) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", strings.NewReader(`{"model":"mock-1","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
	}
	allArrived := func(rs []testotlp.Record) bool {
		m, _ := testotlp.BySeq(rs)
		return len(m) >= len(trailLines(t, auditDir, "a2a"))
	}

	url, stop := siemGateway(t, g.dir, logs)
	for range 3 {
		chat(url, "tok-planner_1")
	}
	col.WaitFor(t, 15*time.Second, allArrived)
	stop()
	beforeRestart := int64(len(trailLines(t, auditDir, "a2a")))

	url, stop = siemGateway(t, g.dir, logs)
	chat(url, "tok-planner_1")
	chat(url, "tok-nobody") // an auth.failure entry
	chat(url, "tok-planner_1")
	rs := col.WaitFor(t, 15*time.Second, allArrived)
	stop()

	lines := trailLines(t, auditDir, "a2a")
	bySeq, dups := testotlp.BySeq(rs)
	if len(lines) != 11 || beforeRestart != 6 {
		t.Fatalf("the trail has %d entries, %d before the restart", len(lines), beforeRestart)
	}
	kinds := map[string]bool{}
	for _, l := range lines {
		r, ok := bySeq[l.Entry.Seq]
		if !ok {
			t.Fatalf("seq %d (%s) never reached the collector", l.Entry.Seq, l.Entry.Kind)
		}
		if r.Body != string(l.Raw) || r.Attributes["gateway.audit.hash"] != l.Entry.Hash || r.Attributes["gateway.audit.prev_hash"] != l.Entry.PrevHash {
			t.Fatalf("seq %d arrived otherwise than the trail has it:\n got %s %v\nwant %s", l.Entry.Seq, r.Body, r.Attributes, l.Raw)
		}
		kinds[l.Entry.Kind] = true
	}
	if !kinds[audit.KindLLMRequest] || !kinds[audit.KindLLMResponse] || !kinds[audit.KindAuthFailure] {
		t.Fatalf("kinds sent: %v", kinds)
	}
	if dups > batch {
		t.Fatalf("%d entries arrived twice; at most one batch (%d) may, at the restart", dups, batch)
	}
	seen := map[int64]int{}
	for _, r := range rs {
		seq := r.Attributes["gateway.audit.seq"].(int64)
		if seen[seq]++; seen[seq] > 1 && seq > beforeRestart {
			t.Fatalf("seq %d, written after the restart, arrived twice", seq)
		}
		if got := r.Header.Get("Authorization"); got != "Bearer "+siemKey {
			t.Fatalf("seq %d came with Authorization %q", seq, got)
		}
	}
	if strings.Contains(logs.String(), siemKey) {
		t.Fatal("the SIEM key is in the gateway's log")
	}
}
