package mcp

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/gowebpki/jcs"

	"github.com/sacpgw/gateway/internal/escalation"
)

// TestReadEvents: the WHATWG framing (CR, LF, CRLF, a BOM, comments,
// several data lines), the event type, and the bound.
func TestReadEvents(t *testing.T) {
	cases := []struct{ note, in, want string }{
		{"LF", "data: a\n\n", "|a"},
		{"CRLF", "data: a\r\n\r\n", "|a"},
		{"CR", "data: a\r\rdata: b\r\r", "|a;|b"},
		{"BOM and comment", "\xef\xbb\xbf: hi\ndata: a\n\n", "|a"},
		{"lines joined", "data: a\ndata: b\n\n", "|a\nb"},
		{"type and id", "event: x\nid: 7\ndata:a\n\n", "x|a"},
		{"unterminated is dropped", "data: a\n\ndata: b", "|a"},
		{"an id alone", "id: 1\n\n", "|"},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			var got []string
			err := readEvents(strings.NewReader(tc.in), 1024, func(ev event) (bool, error) {
				got = append(got, ev.name+"|"+string(ev.data))
				return false, nil
			})
			if err != nil || strings.Join(got, ";") != tc.want {
				t.Errorf("events %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	err := readEvents(strings.NewReader("data: "+strings.Repeat("x", 100)+"\n\n"), 50, func(event) (bool, error) { return false, nil })
	if !errors.Is(err, errEventTooLarge) {
		t.Errorf("an event over the bound: %v", err)
	}
}

// TestSessionsAreTheirAgents: an agent's sessions are capped (the least
// recently used goes) and expire unused.
func TestSessionsAreTheirAgents(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(0, 0)
	m := NewMemorySessions()
	m.now = func() time.Time { return now }
	first := Session{ID: "s0", Agent: "a"}
	_ = m.Put(ctx, first)
	for i := 1; i < sessionsPerAgent; i++ {
		now = now.Add(time.Second)
		_ = m.Put(ctx, Session{ID: "s" + string(rune('0'+i%10)) + strings.Repeat("x", i), Agent: "a"})
	}
	_ = m.Put(ctx, Session{ID: "other", Agent: "b"})
	if _, ok, _ := m.Get(ctx, "s0"); !ok {
		t.Fatal("the first session is gone before the cap")
	}
	now = now.Add(time.Second)
	_ = m.Put(ctx, Session{ID: "new", Agent: "a"})
	if _, ok, _ := m.Get(ctx, "s1x"); ok {
		t.Error("the least recently used session outlived the cap")
	}
	if _, ok, _ := m.Get(ctx, "s0"); !ok {
		t.Error("a session used recently was dropped")
	}
	if _, ok, _ := m.Get(ctx, "other"); !ok {
		t.Error("another agent's session was dropped")
	}
	now = now.Add(sessionIdle + time.Second)
	if _, ok, _ := m.Get(ctx, "new"); ok {
		t.Error("an idle session did not expire")
	}
}

// TestGrantsOnce: a grant passes one call, before it expires.
func TestGrantsOnce(t *testing.T) {
	ctx := context.Background()
	now := time.Unix(0, 0)
	g := NewMemoryGrants()
	g.now = func() time.Time { return now }
	k := grantKey("a", "files", "delete_file", strings.Repeat("0", 64), "")
	_ = g.Grant(ctx, k, "esc-1", time.Hour)
	if id, ok, _ := g.Take(ctx, k); !ok || id != "esc-1" {
		t.Fatalf("take: %q %v", id, ok)
	}
	if _, ok, _ := g.Take(ctx, k); ok {
		t.Error("a grant passed twice")
	}
	_ = g.Grant(ctx, k, "esc-2", time.Hour)
	now = now.Add(time.Hour)
	if _, ok, _ := g.Take(ctx, k); ok {
		t.Error("an expired grant passed")
	}
	for _, other := range []string{grantKey("b", "files", "delete_file", strings.Repeat("0", 64), ""), grantKey("a", "files", "delete_file", strings.Repeat("1", 64), ""),
		grantKey("a", "files", "delete_file", strings.Repeat("0", 64), strings.Repeat("2", 64))} {
		if other == k {
			t.Error("another agent, argument or _meta has the same key")
		}
	}
}

// TestReviewContent: the content is RFC 8785 canonical, reads back, and
// its decision grants exactly its call.
func TestReviewContent(t *testing.T) {
	args := jsontext.Value(`{"a":"x","z":1}`)
	r := review{Method: "tools/call", Server: "files", Tool: "delete_file", Description: "Deletes.",
		Annotations: jsontext.Value(`{"destructiveHint": true}`), Arguments: args, ArgumentsSHA256: sha256Hex(args)}
	c, err := r.content()
	if err != nil {
		t.Fatal(err)
	}
	canon, _ := jcs.Transform([]byte(c))
	if string(canon) != c || !strings.HasPrefix(c, `{"annotations":{"destructiveHint":true},"arguments":{"a":"x","z":1}`) {
		t.Errorf("content %s", c)
	}
	isReview := func(content string) bool { _, err := readReview(content); return err == nil }
	if !isReview(c) || isReview(`{"sender":"a"}`) || isReview(strings.Replace(c, `"method":"tools/call"`, `"method":"x"`, 1)) {
		t.Error("readReview")
	}
	d := &Door{grants: NewMemoryGrants(), log: discard()}
	d.conf.Store(&conf{escalationTTL: time.Hour})
	ctx := context.Background()
	if err := d.Resolve(ctx, escalation.Decided{ID: "e1", AgentID: "coder", Approved: false, Content: c}); err != nil {
		t.Fatal(err)
	}
	key := grantKey("coder", "files", "delete_file", r.ArgumentsSHA256, "")
	if _, ok, _ := d.grants.Take(ctx, key); ok {
		t.Error("a rejection granted the call")
	}
	if err := d.Resolve(ctx, escalation.Decided{ID: "e2", AgentID: "coder", Approved: true, Content: c}); err != nil {
		t.Fatal(err)
	}
	if id, ok, _ := d.grants.Take(ctx, key); !ok || id != "e2" {
		t.Errorf("the approval granted %q %v", id, ok)
	}
}

// TestCatalog: the list is read once for concurrent lookups, again when
// the server says it changed or a name is missing (not more often than
// catalogRetry), and a failed read fails the lookup.
func TestCatalog(t *testing.T) {
	ctx := context.Background()
	var reads atomic.Int32
	var fail atomic.Bool
	tools := map[string]toolInfo{"a": {Name: "a"}}
	read := func(context.Context) (map[string]toolInfo, error) {
		reads.Add(1)
		time.Sleep(5 * time.Millisecond)
		if fail.Load() {
			return nil, errors.New("down")
		}
		return tools, nil
	}
	c := &catalog{}
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			if _, err := c.lookup(ctx, "a", read); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if n := reads.Load(); n != 1 {
		t.Errorf("%d reads for concurrent lookups", n)
	}
	if _, err := c.lookup(ctx, "b", read); !errors.Is(err, errUnknownTool) || reads.Load() != 1 {
		t.Errorf("a missing name within catalogRetry: %v, %d reads", err, reads.Load())
	}
	c.invalidate()
	fail.Store(true)
	if _, err := c.lookup(ctx, "a", read); err == nil || reads.Load() != 2 {
		t.Errorf("after list_changed with the server down: %v, %d reads", err, reads.Load())
	}
	if _, err := c.lookup(ctx, "a", read); err == nil || reads.Load() != 2 {
		t.Errorf("a failed read is retried at once: %v, %d reads", err, reads.Load())
	}
}

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }
