package sourceguard

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/testkit"
)

type trail struct {
	mu  sync.Mutex
	got []audit.Record
}

func (t *trail) Append(_ context.Context, r audit.Record) (audit.Entry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.got = append(t.got, r)
	return audit.Entry{}, nil
}

type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func failure(src string) audit.Record {
	return audit.Record{Kind: audit.KindAuthFailure, Object: audit.Members("remote", src, "route", "/v1/chat/completions", "reason", "Incorrect API key provided.")}
}

func TestFloodIsSummarizedPerSourceAndWindow(t *testing.T) {
	tr, c := &trail{}, &clock{t: time.Unix(1000, 0)}
	g := New(tr, Options{Rate: 10, Burst: 20, Window: time.Minute, Now: c.now})
	ctx := context.Background()
	for i := range 1000 {
		c.t = c.t.Add(time.Millisecond)
		if _, err := g.Append(ctx, failure("10.0.0.1")); err != nil {
			t.Fatal(err)
		}
		if i == 0 && len(tr.got) != 1 {
			t.Fatal("the first failure of a window is not written at once")
		}
	}
	if _, err := g.Append(ctx, audit.Record{Kind: audit.KindLLMRequest}); err != nil || len(tr.got) != 2 {
		t.Fatalf("other kinds must pass: %d entries", len(tr.got))
	}
	c.t = c.t.Add(time.Minute)
	if err := g.Flush(ctx, false); err != nil {
		t.Fatal(err)
	}
	if len(tr.got) != 3 {
		t.Fatalf("1000 failures wrote %d entries, want 3 (first, other kind, summary)", len(tr.got))
	}
	s := testkit.SummaryOf(tr.got[2])
	if s["count"] != 999 || s["remote"] != "10.0.0.1" || s["first_ts"] == nil || s["last_ts"] == nil || s["route"] != "/v1/chat/completions" {
		t.Fatalf("summary = %v", s)
	}
}

func TestSourcePastItsBudgetIsRefusedOthersAreNot(t *testing.T) {
	tr, c := &trail{}, &clock{t: time.Unix(1000, 0)}
	g := New(tr, Options{Rate: 1, Burst: 5, Now: c.now})
	for range 5 {
		_, _ = g.Append(context.Background(), failure("10.0.0.1"))
	}
	if ok, wait := g.Allow("10.0.0.1"); ok || wait < time.Second {
		t.Fatalf("flooding source allowed (%v, %s)", ok, wait)
	}
	if ok, _ := g.Allow("10.0.0.2"); !ok {
		t.Fatal("another source refused")
	}
	c.t = c.t.Add(2 * time.Second)
	if ok, _ := g.Allow("10.0.0.1"); !ok {
		t.Fatal("the source stays refused after its budget refilled")
	}
}

func TestSourcesAreBounded(t *testing.T) {
	tr, c := &trail{}, &clock{t: time.Unix(1000, 0)}
	g := New(tr, Options{Rate: 1, Burst: 1, MaxSources: 100, Window: time.Minute, Now: c.now})
	for i := range 5000 {
		_, _ = g.Append(context.Background(), failure("10.1."+itoa(i/250)+"."+itoa(i%250)))
	}
	if n := g.Sources(); n > 101 {
		t.Fatalf("%d sources tracked, want at most 101", n)
	}
	if len(tr.got) > 101 {
		t.Fatalf("%d entries written for one window, want at most 101", len(tr.got))
	}
	if ok, _ := g.Allow("10.9.9.9"); !ok {
		t.Fatal("an untracked source must not be refused as part of the crowd")
	}
	c.t = c.t.Add(time.Hour)
	_ = g.Flush(context.Background(), false)
	_ = g.Flush(context.Background(), false)
	if n := g.Sources(); n != 0 {
		t.Fatalf("%d idle sources kept", n)
	}
}

func itoa(i int) string {
	return string(rune('0'+i/100%10)) + string(rune('0'+i/10%10)) + string(rune('0'+i%10))
}

// TestFoldIsSummarizedPerKey: a Fold's records are summarized per their
// key as failed authentications are per source (the first of a window at
// once, the repeats as one counted entry keeping the agent, the session
// and the Keep members), and no rate limit refuses anyone for them.
func TestFoldIsSummarizedPerKey(t *testing.T) {
	tr, c := &trail{}, &clock{t: time.Unix(1000, 0)}
	fold := Fold{Kind: "mcp.message", Key: func(r audit.Record) string { return r.AgentID + "/" + r.SessionID }, Keep: []string{"server", "method"}}
	g := New(tr, Options{Rate: 1, Burst: 1, Window: time.Minute, Now: c.now, Folds: []Fold{fold}})
	ctx := context.Background()
	for i := range 1000 {
		c.t = c.t.Add(time.Millisecond)
		sess := []string{"s1", "s2"}[i%2]
		r := audit.Record{Kind: "mcp.message", AgentID: "a1", SessionID: sess, Object: audit.Members("server", "files", "method", "notifications/progress", "secret", "x")}
		if _, err := g.Append(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	if len(tr.got) != 2 || g.Sources() != 0 {
		t.Fatalf("1000 records of two keys wrote %d entries at once (want 2), %d sources tracked", len(tr.got), g.Sources())
	}
	if ok, _ := g.Allow("a1/s1"); !ok {
		t.Error("a fold's key was rate limited as a source")
	}
	if err := g.Flush(ctx, true); err != nil {
		t.Fatal(err)
	}
	if len(tr.got) != 4 {
		t.Fatalf("%d entries after the flush, want 4", len(tr.got))
	}
	for _, r := range tr.got[2:] {
		s := testkit.SummaryOf(r)
		if r.Kind != "mcp.message" || r.AgentID != "a1" || s["count"] != 499 || s["server"] != "files" || s["method"] != "notifications/progress" || s["secret"] != nil {
			t.Errorf("summary %+v", r)
		}
	}
}
