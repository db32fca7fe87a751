package approval

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestMemoryStore(t *testing.T) {
	ctx := context.Background()
	m := NewMemoryStore()
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	done := true
	rec := &Record{ID: "req-1", AgentID: "a", State: StateValidating, CreatedAt: t0, UpdatedAt: t0,
		Request: AgentRequest{AgentID: "a", RequestType: TypeReport, RequestID: "r", Completed: &done, ChangesMade: &ChangesMade{Files: []string{"x"}}}}
	if err := m.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	if err := m.Create(ctx, rec); !errors.Is(err, ErrExists) {
		t.Fatalf("second create: %v", err)
	}
	got, err := m.Get(ctx, "req-1")
	if err != nil || got.Request.ChangesMade.Files[0] != "x" || !*got.Request.Completed {
		t.Fatalf("get: %+v %v", got, err)
	}
	// Callers never share memory with the store.
	got.State = StateApproved
	if again, _ := m.Get(ctx, "req-1"); again.State != StateValidating {
		t.Fatal("a caller's change reached the store")
	}
	if _, err := m.Get(ctx, "nope"); !errors.Is(err, ErrNotFound) {
		t.Fatalf("get unknown: %v", err)
	}
	if _, err := m.Update(ctx, "nope", func(*Record) error { return nil }); !errors.Is(err, ErrNotFound) {
		t.Fatalf("update unknown: %v", err)
	}
	// An fn error stores nothing.
	_, err = m.Update(ctx, "req-1", func(r *Record) error { r.State = StateApproved; return errBoom })
	if !errors.Is(err, errBoom) {
		t.Fatal(err)
	}
	if again, _ := m.Get(ctx, "req-1"); again.State != StateValidating {
		t.Fatal("a failed update was stored")
	}

	// Escalated is kept in step with the state, oldest first.
	for i, id := range []string{"req-3", "req-2"} {
		r := &Record{ID: id, State: StateEscalated, CreatedAt: t0.Add(time.Duration(2-i) * time.Minute)}
		if err := m.Create(ctx, r); err != nil {
			t.Fatal(err)
		}
	}
	esc, err := m.Escalated(ctx)
	if err != nil || len(esc) != 2 || esc[0].ID != "req-2" || esc[1].ID != "req-3" {
		t.Fatalf("escalated %v %v", esc, err)
	}
	if _, err := m.Update(ctx, "req-2", func(r *Record) error { r.move(StateRejected, t0, "x", ""); return nil }); err != nil {
		t.Fatal(err)
	}
	if esc, _ := m.Escalated(ctx); len(esc) != 1 || esc[0].ID != "req-3" {
		t.Fatalf("escalated after reject: %v", esc)
	}

	// Prune drops old terminal records only.
	n, err := m.Prune(ctx, t0.Add(time.Second))
	if err != nil || n != 1 {
		t.Fatalf("prune: %d %v", n, err)
	}
	if _, err := m.Get(ctx, "req-2"); !errors.Is(err, ErrNotFound) {
		t.Fatal("pruned record still there")
	}
	if _, err := m.Get(ctx, "req-3"); err != nil {
		t.Fatal("an escalated record was pruned")
	}
}

// Concurrent updates of one record are serialised: no increment is lost.
func TestMemoryStoreConcurrentUpdates(t *testing.T) {
	ctx := context.Background()
	m := NewMemoryStore()
	if err := m.Create(ctx, &Record{ID: "req-1"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() {
			_, err := m.Update(ctx, "req-1", func(r *Record) error {
				r.History = append(r.History, Transition{By: fmt.Sprint(i)})
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if r, _ := m.Get(ctx, "req-1"); len(r.History) != 50 {
		t.Fatalf("%d updates kept, want 50", len(r.History))
	}
}

// Two reviewers deciding at once: exactly one decision applies.
func TestConcurrentDecisions(t *testing.T) {
	h := newHarness(t)
	id := escalate(t, h, "x")
	var wg sync.WaitGroup
	results := make(chan int, 8)
	for i := range 8 {
		wg.Go(func() {
			tok := tokReviewer
			if i%2 == 1 {
				tok = tokAlice
			}
			res := h.do("POST", "/admin/escalations/"+id+"/decision", tok, map[string]any{"decision": "approve"})
			results <- res.status
		})
	}
	wg.Wait()
	close(results)
	ok := 0
	for s := range results {
		switch s {
		case 200:
			ok++
		case 409:
		default:
			t.Errorf("status %d", s)
		}
	}
	if ok != 1 {
		t.Fatalf("%d decisions applied, want 1", ok)
	}
	_, st := h.status(tokClaude, id)
	if n := len(st.History); st.State != StateApproved || n != 4 {
		t.Fatalf("state %s history %d", st.State, n)
	}
}
