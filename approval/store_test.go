package approval

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"
)

func TestMemoryStore(t *testing.T) {
	t.Run("create get update", func(t *testing.T) { storeBasics(t, NewMemoryStore()) })
	t.Run("concurrent updates", func(t *testing.T) {
		m := NewMemoryStore()
		storeConcurrentUpdates(t, m, m)
	})
	t.Run("escalation graph", func(t *testing.T) { storeGraph(t, NewMemoryStore()) })
	t.Run("escalated index and prune", func(t *testing.T) {
		m := NewMemoryStore()
		storeEscalated(t, m)
		// Prune drops old terminal records only: req-2 was rejected at t0.
		t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
		n, err := m.Prune(t.Context(), t0.Add(time.Second))
		if err != nil || n != 1 {
			t.Fatalf("prune: %d %v", n, err)
		}
		if _, err := m.Get(t.Context(), "req-2"); !errors.Is(err, ErrNotFound) {
			t.Fatal("pruned record still there")
		}
		if _, err := m.Get(t.Context(), "req-3"); err != nil {
			t.Fatal("an escalated record was pruned")
		}
	})
}

func storeBasics(t *testing.T, m Store) {
	ctx := t.Context()
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
	if err != nil || got.Request.ChangesMade.Files[0] != "x" || !*got.Request.Completed || !got.CreatedAt.Equal(t0) {
		t.Fatalf("get: %+v %v", got, err)
	}
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
	_, err = m.Update(ctx, "req-1", func(r *Record) error { r.State = StateApproved; return errBoom })
	if !errors.Is(err, errBoom) {
		t.Fatal(err)
	}
	if again, _ := m.Get(ctx, "req-1"); again.State != StateValidating {
		t.Fatal("a failed update was stored")
	}
	upd, err := m.Update(ctx, "req-1", func(r *Record) error {
		r.ID = "moved"
		r.move(StateApproved, t0.Add(time.Minute), "x", "")
		return nil
	})
	if err != nil || upd.ID != "req-1" || upd.State != StateApproved {
		t.Fatalf("update: %+v %v", upd, err)
	}
	if again, err := m.Get(ctx, "req-1"); err != nil || again.State != StateApproved || len(again.History) != 1 {
		t.Fatalf("after update: %+v %v", again, err)
	}
	if _, err := m.Get(ctx, "moved"); !errors.Is(err, ErrNotFound) {
		t.Fatal("fn moved the record")
	}
}

func storeEscalated(t *testing.T, m Store) {
	ctx := t.Context()
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	if esc, err := m.Escalated(ctx); err != nil || len(esc) != 0 {
		t.Fatalf("escalated on empty: %v %v", esc, err)
	}
	cases := []struct {
		id    string
		state State
		at    time.Duration
	}{
		{"req-3", StateEscalated, 2 * time.Minute},
		{"req-2", StateEscalated, time.Minute},
		{"req-4", StateApproved, 0},
		{"req-1", StateEscalated, 2 * time.Minute}, // same time: by id
		{"req-0", StateEscalated, time.Minute + time.Microsecond},
	}
	for _, c := range cases {
		if err := m.Create(ctx, &Record{ID: c.id, State: c.state, CreatedAt: t0.Add(c.at)}); err != nil {
			t.Fatal(err)
		}
	}
	ids := func() string {
		t.Helper()
		esc, err := m.Escalated(ctx)
		if err != nil {
			t.Fatal(err)
		}
		s := ""
		for _, r := range esc {
			if r.State != StateEscalated {
				t.Fatalf("%s listed in state %s", r.ID, r.State)
			}
			s += r.ID + " "
		}
		return s
	}
	if got, want := ids(), "req-2 req-0 req-1 req-3 "; got != want {
		t.Fatalf("escalated %q, want %q", got, want)
	}
	if _, err := m.Update(ctx, "req-2", func(r *Record) error { r.move(StateRejected, t0, "x", ""); return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := m.Update(ctx, "req-4", func(r *Record) error { r.move(StateEscalated, t0, "x", ""); return nil }); err != nil {
		t.Fatal(err)
	}
	if got, want := ids(), "req-4 req-0 req-1 req-3 "; got != want {
		t.Fatalf("escalated after changes %q, want %q", got, want)
	}
}

// storeGraph: an escalation's drawing survives the store (JSON) round
// trip byte for byte, through Create, Get and an Update that decides it.
func storeGraph(t *testing.T, m Store) {
	ctx := t.Context()
	t0 := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	graph := gatewayGraph(t)
	rec := &Record{ID: "req-wf", AgentID: "email-validator", State: StateEscalated, CreatedAt: t0, UpdatedAt: t0,
		Request:    AgentRequest{AgentID: "email-validator", RequestType: TypeWorkflow, Content: `{"run_id":"run-1"}`},
		Escalation: &Escalation{Kind: "workflow", Reason: "a person must answer", At: t0, Graph: graph}}
	if err := m.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	got, err := m.Get(ctx, "req-wf")
	if err != nil || got.Escalation == nil || got.Escalation.Graph != graph {
		t.Fatalf("after Get: %v, graph kept %v", err, got != nil && got.Escalation != nil && got.Escalation.Graph == graph)
	}
	upd, err := m.Update(ctx, "req-wf", func(r *Record) error {
		r.Escalation.Review = &Review{Decision: reviewDecisionApprove, Reviewer: "reviewer:alice", Comment: "use a@b.example", At: t0}
		r.move(StateApproved, t0, "reviewer:alice", "")
		return nil
	})
	if err != nil || upd.Escalation.Graph != graph {
		t.Fatalf("after Update: %v", err)
	}
	if again, err := m.Get(ctx, "req-wf"); err != nil || again.Escalation.Graph != graph || again.Escalation.Review == nil {
		t.Fatalf("after Update and Get: %v", err)
	}
	if err := m.Create(ctx, &Record{ID: "req-plain", Escalation: &Escalation{Kind: "policy"}}); err != nil {
		t.Fatal(err)
	}
	if got, err := m.Get(ctx, "req-plain"); err != nil || got.Escalation.Graph != "" {
		t.Fatalf("a record without a graph: %v", err)
	}
}

// storeConcurrentUpdates appends 50 history entries through a and b at
// once; none may be lost.
func storeConcurrentUpdates(t *testing.T, a, b Store) {
	ctx := t.Context()
	if err := a.Create(ctx, &Record{ID: "req-1"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 50 {
		s := a
		if i%2 == 1 {
			s = b
		}
		wg.Go(func() {
			_, err := s.Update(ctx, "req-1", func(r *Record) error {
				r.History = append(r.History, Transition{By: fmt.Sprint(i)})
				return nil
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	r, err := b.Get(ctx, "req-1")
	if err != nil || len(r.History) != 50 {
		t.Fatalf("%d updates kept, want 50 (%v)", len(r.History), err)
	}
	seen := map[string]bool{}
	for _, h := range r.History {
		if seen[h.By] {
			t.Fatalf("update %s applied twice", h.By)
		}
		seen[h.By] = true
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
