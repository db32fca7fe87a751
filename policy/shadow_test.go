package policy

import (
	"context"
	"sync"
	"testing"
	"time"
)

func TestShadowDisagreements(t *testing.T) {
	shadow := t.TempDir()
	// The candidate denies every chat and has no approval decision (so it
	// fails closed: "rejected").
	write(t, shadow, "chat.rego", "package gateway.chat\n\ndeny contains \"candidate says no\"\n")
	var mu sync.Mutex
	var events []ShadowEvent
	e := newEngine(t, Options{Dir: defaultDir, ShadowDir: shadow, Debounce: 20 * time.Millisecond,
		OnShadowDisagreement: func(ev ShadowEvent) {
			mu.Lock()
			events = append(events, ev)
			mu.Unlock()
		}})
	if e.ShadowRevision() == "" || e.ShadowRevision() == e.Revision() {
		t.Fatalf("shadow revision %q", e.ShadowRevision())
	}
	ctx := context.Background()

	// Live allows; shadow denies: a disagreement, without effect on the answer.
	d, err := e.ChatDeny(ctx, map[string]any{"request": map[string]any{"messages": []any{}}})
	if err != nil || d.Deny {
		t.Fatalf("live decision changed by the shadow: %+v %v", d, err)
	}
	eventually(t, "disagreement", func() bool { return e.Stats().ShadowDisagreements == 1 })
	mu.Lock()
	ev := events[0]
	mu.Unlock()
	want := ShadowEvent{Point: PointChat, Live: "allow", Shadow: "deny [candidate says no]",
		LiveDecisionID: d.DecisionID, LiveRevision: e.Revision(), ShadowRevision: e.ShadowRevision()}
	got := ev
	got.ShadowDecisionID = ""
	if got != want || !idPattern.MatchString(ev.ShadowDecisionID) || ev.ShadowDecisionID == d.DecisionID {
		t.Fatalf("event %+v\nwant  %+v", ev, want)
	}

	// Both reject an unauthorized approval: agreement, not counted.
	a, _ := e.Approval(ctx, map[string]any{"request": map[string]any{}})
	if a.Status != "rejected" || a.FailClosed {
		t.Fatalf("live approval %+v", a)
	}
	eventually(t, "shadow evaluation", func() bool { return e.Stats().ShadowEvaluations == 2 })
	if s := e.Stats(); s.ShadowDisagreements != 1 {
		t.Fatalf("stats %+v", s)
	}

	// The approved example request (the approval protocol's operation 1): the
	// shadow (undefined) rejects.
	a, _ = e.Approval(ctx, approvalInput(t, "claude-3", seedRequest()))
	if a.Status != "approved" {
		t.Fatalf("live approval %+v", a)
	}
	eventually(t, "second disagreement", func() bool { return e.Stats().ShadowDisagreements == 2 })
	mu.Lock()
	ev = events[1]
	mu.Unlock()
	if ev.Point != PointApproval || ev.Live != "approved" || ev.Shadow != "rejected [policy.undefined]" {
		t.Errorf("event %+v", ev)
	}

	// The shadow directory is hot-reloaded too: now it agrees on chat.
	write(t, shadow, "chat.rego", "package gateway.chat\n\ndeny contains \"no\" if input.never\n")
	eventually(t, "shadow reload", func() bool { return e.Stats().ShadowReloads == 1 })
	before := e.Stats()
	_, _ = e.ChatDeny(ctx, map[string]any{"request": map[string]any{"messages": []any{}}})
	eventually(t, "shadow evaluation", func() bool { return e.Stats().ShadowEvaluations == before.ShadowEvaluations+1 })
	if s := e.Stats(); s.ShadowDisagreements != before.ShadowDisagreements || s.Reloads != 0 {
		t.Errorf("stats %+v", s)
	}
}

// A full shadow queue drops, counts, and never blocks the live decision.
func TestShadowQueueFull(t *testing.T) {
	e := newEngine(t, Options{Dir: defaultDir, ShadowDir: "testdata/slow", ShadowQueue: 1, NoWatch: true})
	in := map[string]any{"request": map[string]any{"messages": []any{}}}
	start := time.Now()
	for range 20 {
		if d, _ := e.ChatDeny(context.Background(), in); d.Deny {
			t.Fatalf("%+v", d)
		}
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("20 live decisions took %v behind a slow shadow", el)
	}
	if s := e.Stats(); s.ShadowDropped == 0 {
		t.Errorf("stats %+v", s)
	}
}
