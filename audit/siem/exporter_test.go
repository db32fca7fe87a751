package siem

import (
	"bytes"
	"context"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/egress"
	"github.com/sacpgw/gateway/internal/testkit"
	"github.com/sacpgw/gateway/internal/testotlp"
)

const apiKey = "siem-key-3f9a1c"

// loopbackOK lets the exporter reach the test's collector, as
// messaging.allowed_networks does for a collector on a private address.
var loopbackOK = egress.Policy{Allowed: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}

// trail is an open chain and its directory.
type trail struct {
	dir string
	log *audit.Log
}

func openTrail(t *testing.T, dir string) *trail {
	t.Helper()
	l, err := audit.Open(audit.Config{Dir: dir, Chain: "gw-1", SegmentMaxBytes: 2048, CheckpointInterval: -1, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Close() })
	return &trail{dir: dir, log: l}
}

// write appends n entries of varied kinds.
func (tr *trail) write(t *testing.T, n int) {
	t.Helper()
	for i := range n {
		r := audit.Record{Kind: audit.KindLLMResponse, AgentID: "planner_1", SessionID: "sess-1", RequestID: "req-" + string(rune('a'+i%26)),
			Object: audit.Members("model", "mock-1", "route", "/v1/chat/completions", "status", 200, "upstream", "mock",
				"tokens", map[string]any{"prompt": 11, "completion": 7, "total": 18}, "note", "ünïcode")}
		switch i % 4 {
		case 1:
			r = audit.Record{Kind: audit.KindAuthFailure, Object: audit.Members("remote", "192.0.2.7", "route", "/v1/models", "reason", "bad key")}
		case 2:
			r.Object.Int("status", 502)
			r.Object.Str("error_code", "upstream_error")
		case 3:
			r = audit.Record{Kind: "escalation.decision", RequestID: "esc-1", Object: audit.Members("reviewer", "security-lead", "decision", "APPROVED")}
		}
		if _, err := tr.log.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
}

// lines is every line of the chain, in order.
func (tr *trail) lines(t *testing.T) [][]byte {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(tr.dir, "gw-1-*.jsonl"))
	sort.Strings(segs)
	var out [][]byte
	for _, s := range segs {
		data, err := os.ReadFile(s)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range bytes.SplitAfter(data, []byte("\n")) {
			if len(l) > 0 {
				out = append(out, bytes.TrimSuffix(l, []byte("\n")))
			}
		}
	}
	return out
}

// running is an exporter running until stop.
type running struct {
	exp    *Exporter
	cancel context.CancelFunc
	done   chan struct{}
}

func (r *running) stop() { r.cancel(); <-r.done }

func start(t *testing.T, tr *trail, cfg Config, policy egress.Policy, log *slog.Logger) *running {
	t.Helper()
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	exp, err := New(cfg, Source{Dir: tr.dir, Chain: "gw-1", Durable: tr.log.Durable}, Options{Egress: policy, Log: log, Service: "gateway", Version: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{exp: exp, cancel: cancel, done: make(chan struct{})}
	go func() { exp.Run(ctx); close(r.done) }()
	var once sync.Once
	t.Cleanup(func() { once.Do(func() { cancel(); <-r.done }) })
	return r
}

func config(endpoint, protocol string) Config {
	return Config{Endpoint: endpoint, Protocol: protocol, Interval: 10 * time.Millisecond, Timeout: 2 * time.Second, BatchSize: 5,
		Headers: Headers{"Authorization": "Bearer " + apiKey}}
}

// every waits for one record per entry of the trail.
func every(tr *trail, t *testing.T) func([]testotlp.Record) bool {
	return func(rs []testotlp.Record) bool {
		m, _ := testotlp.BySeq(rs)
		return len(m) >= len(tr.lines(t))
	}
}

// checkRecords: each entry arrived once per seq, its body byte for byte
// the trail's line, its time the entry's, its chain attributes the
// entry's, and the export carried the key.
func checkRecords(t *testing.T, tr *trail, rs []testotlp.Record) {
	t.Helper()
	bySeq, _ := testotlp.BySeq(rs)
	lines := tr.lines(t)
	if len(bySeq) != len(lines) {
		t.Fatalf("%d distinct entries received, the trail has %d", len(bySeq), len(lines))
	}
	for i, line := range lines {
		seq := int64(i + 1)
		r, ok := bySeq[seq]
		if !ok {
			t.Fatalf("seq %d never arrived", seq)
		}
		if r.Body != string(line) {
			t.Fatalf("seq %d: body differs from the trail:\n got %s\nwant %s", seq, r.Body, line)
		}
		var e audit.Entry
		lines, err := audit.NewFollower(tr.dir, "gw-1", seq-1, prevOf(t, tr, seq)).Next(seq, 1, 1<<20)
		if err != nil || len(lines) != 1 {
			t.Fatalf("seq %d: %v", seq, err)
		}
		e = lines[0].Entry
		a := r.Attributes
		if a[AttrHash] != e.Hash || a[AttrPrevHash] != e.PrevHash || a[AttrChain] != "gw-1" || a[AttrKind] != e.Kind || !r.Time.Equal(e.TS) {
			t.Fatalf("seq %d: attributes %v, time %v; entry %+v", seq, a, r.Time, e)
		}
		if r.EventName != "gateway.audit."+e.Kind || r.Resource["service.instance.id"] != "gw-1" || r.Resource["service.name"] != "gateway" {
			t.Fatalf("seq %d: event %q resource %v", seq, r.EventName, r.Resource)
		}
		if got := r.Header.Get("Authorization"); got != "Bearer "+apiKey {
			t.Fatalf("seq %d: the export carried Authorization %q", seq, got)
		}
	}
}

func prevOf(t *testing.T, tr *trail, seq int64) string {
	if seq == 1 {
		return ""
	}
	ls, err := audit.NewFollower(tr.dir, "gw-1", 0, "").Next(seq-1, int(seq-1), 1<<30)
	if err != nil || int64(len(ls)) != seq-1 {
		t.Fatalf("read up to seq %d: %v", seq-1, err)
	}
	return ls[len(ls)-1].Entry.Hash
}

// Every entry reaches the collector exactly as the trail holds it, over
// OTLP/HTTP and over OTLP/gRPC, with the attributes a SIEM reads.
func TestEveryEntryArrivesAsTheTrailHasIt(t *testing.T) {
	for _, protocol := range []string{"http", "grpc"} {
		t.Run(protocol, func(t *testing.T) {
			col := testotlp.New(t)
			endpoint := col.URL
			if protocol == "grpc" {
				endpoint = col.GRPC
			}
			tr := openTrail(t, t.TempDir())
			tr.write(t, 12)
			r := start(t, tr, config(endpoint, protocol), loopbackOK, nil)
			tr.write(t, 9) // while it runs
			rs := col.WaitFor(t, 10*time.Second, every(tr, t))
			checkRecords(t, tr, rs)
			if _, dups := testotlp.BySeq(rs); dups != 0 {
				t.Fatalf("%d entries arrived twice without a restart", dups)
			}
			bySeq, _ := testotlp.BySeq(rs)
			resp, auth, bad, esc := bySeq[1].Attributes, bySeq[2].Attributes, bySeq[3], bySeq[4].Attributes
			if resp["gen_ai.request.model"] != "mock-1" || resp["gen_ai.usage.input_tokens"] != int64(11) || resp["gen_ai.usage.output_tokens"] != int64(7) ||
				resp["http.response.status_code"] != int64(200) || resp["gen_ai.agent.id"] != "planner_1" || resp["session.id"] != "sess-1" ||
				resp["http.route"] != "/v1/chat/completions" || resp["gateway.request_id"] != "req-a" || bySeq[1].SeverityText != "INFO" {
				t.Fatalf("llm.response attributes: %v", resp)
			}
			if auth["client.address"] != "192.0.2.7" || bySeq[2].SeverityText != "WARN" {
				t.Fatalf("auth.failure attributes: %v %s", auth, bySeq[2].SeverityText)
			}
			if bad.Attributes["error.type"] != "upstream_error" || bad.SeverityText != "ERROR" || bad.SeverityNumber != 17 {
				t.Fatalf("a failed answer: %v %s", bad.Attributes, bad.SeverityText)
			}
			if esc["user.id"] != "security-lead" {
				t.Fatalf("a reviewer's decision: %v", esc)
			}
			if s := r.exp.Stats(); s.Exported != 21 || s.Lag != 0 || s.Acked != 21 {
				t.Fatalf("stats %+v", s)
			}
		})
	}
}

// A restart resumes after the last acknowledged entry: nothing is lost,
// and after a clean stop nothing is sent twice. A cursor the chain does
// not hold (copied from another trail) sends the chain again from its
// start rather than skipping anything, and so does one past its end.
func TestRestartResumesFromTheAcknowledgedEntry(t *testing.T) {
	col := testotlp.New(t)
	dir := t.TempDir()
	tr := openTrail(t, dir)
	tr.write(t, 7)
	r := start(t, tr, config(col.URL, "http"), loopbackOK, nil)
	col.WaitFor(t, 10*time.Second, every(tr, t))
	r.stop()
	tr.write(t, 6) // while no exporter runs
	r = start(t, tr, config(col.URL, "http"), loopbackOK, nil)
	rs := col.WaitFor(t, 10*time.Second, every(tr, t))
	checkRecords(t, tr, rs)
	if _, dups := testotlp.BySeq(rs); dups != 0 {
		t.Fatalf("%d entries sent twice across a clean restart", dups)
	}
	r.stop()
	if err := os.WriteFile(filepath.Join(dir, CursorName("gw-1")), []byte(`{"chain":"gw-1","seq":5,"hash":"`+strings.Repeat("ab", 32)+`"}`), 0o640); err != nil {
		t.Fatal(err)
	}
	r = start(t, tr, config(col.URL, "http"), loopbackOK, nil)
	rs = col.WaitFor(t, 10*time.Second, func(rs []testotlp.Record) bool { return len(rs) >= 2*13 })
	if _, dups := testotlp.BySeq(rs); dups != 13 {
		t.Fatalf("a foreign cursor: %d entries resent, want the whole chain (13)", dups)
	}
	r.stop()
	if err := os.WriteFile(filepath.Join(dir, CursorName("gw-1")), []byte(`{"chain":"gw-1","seq":99,"hash":"`+strings.Repeat("ab", 32)+`"}`), 0o640); err != nil {
		t.Fatal(err)
	}
	start(t, tr, config(col.URL, "http"), loopbackOK, nil)
	rs = col.WaitFor(t, 10*time.Second, func(rs []testotlp.Record) bool { return len(rs) >= 3*13 })
	if _, dups := testotlp.BySeq(rs); dups != 2*13 {
		t.Fatalf("a cursor past the chain's end: %d entries resent in all, want the whole chain twice (26)", dups)
	}
}

// A collector that is down gets the backlog when it comes back, in
// order; meanwhile the lag and the errors show, the key never appears in
// the gateway's log (even when the collector echoes it), and appends are
// not held up.
func TestCollectorDownThenUpGetsTheBacklog(t *testing.T) {
	col := testotlp.New(t)
	col.Refuse(401) // a wrong key first: the collector's answer echoes it
	logs := &testkit.LogBuffer{}
	tr := openTrail(t, t.TempDir())
	r := start(t, tr, config(col.URL, "http"), loopbackOK, slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})))
	began := time.Now()
	tr.write(t, 23)
	if d := time.Since(began); d > 2*time.Second {
		t.Fatalf("appends took %v with the collector down", d)
	}
	waitErrors := func(n uint64) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for r.exp.Stats().Errors < n && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
	}
	waitErrors(1)
	col.Refuse(503)
	waitErrors(r.exp.Stats().Errors + 2)
	if s := r.exp.Stats(); s.Errors < 3 || s.Lag != 23 || s.Exported != 0 {
		t.Fatalf("while down: %+v", s)
	}
	col.Refuse(0)
	rs := col.WaitFor(t, 40*time.Second, every(tr, t))
	checkRecords(t, tr, rs)
	var seqs []int64
	for _, rec := range rs {
		seqs = append(seqs, rec.Attributes[AttrSeq].(int64))
	}
	if !sort.SliceIsSorted(seqs, func(i, j int) bool { return seqs[i] < seqs[j] }) {
		t.Fatalf("the backlog arrived out of order: %v", seqs)
	}
	if s := r.exp.Stats(); s.Lag != 0 || s.Exported != 23 {
		t.Fatalf("after the backlog: %+v", s)
	}
	r.stop()
	if strings.Contains(logs.String(), apiKey) {
		t.Fatalf("the API key is in the log:\n%s", logs.String())
	}
	if !strings.Contains(logs.String(), "401") || !strings.Contains(logs.String(), "503") {
		t.Fatalf("the failure is not logged:\n%s", logs.String())
	}
}

// The collector is dialed through the outbound guard: on loopback, not
// allowed by policy, nothing reaches it, and the failures are counted.
func TestCollectorOutsidePolicyIsNotReached(t *testing.T) {
	col := testotlp.New(t)
	tr := openTrail(t, t.TempDir())
	tr.write(t, 3)
	r := start(t, tr, config(col.URL, "http"), egress.Policy{}, nil)
	deadline := time.Now().Add(5 * time.Second)
	for r.exp.Stats().Errors == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if s := r.exp.Stats(); s.Errors == 0 || col.Exports() != 0 || s.Lag != 3 {
		t.Fatalf("stats %+v, %d exports reached the collector", s, col.Exports())
	}
}
