package messaging

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sacpgw/gateway/internal/globalctx"
	"github.com/sacpgw/gateway/internal/testredis"
)

// TestSeed003ContextLocking: seed 003 §3.2 rule 3 at the store. Updates of
// one thread are atomic in memory and in Redis (shared by replicas):
// concurrent writers each append their history entry, none is lost; an
// update whose fn fails changes nothing; a thread without a context reads
// as none; the Redis copy expires with the thread's retention.
func TestSeed003ContextLocking(t *testing.T) {
	srv := testredis.Start(t)
	client := redis.NewClient(&redis.Options{Addr: srv.Addr()})
	t.Cleanup(func() { _ = client.Close() })
	stores := map[string]ContextStore{"memory": NewMemoryContexts(), "redis": NewRedisContexts(client, "", time.Hour)}
	for name, st := range stores {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			if tc, err := st.Get(ctx, "correlation:none"); tc != nil || err != nil {
				t.Fatalf("Get of a thread without a context: %v %v", tc, err)
			}
			const writers = 16
			var wg sync.WaitGroup
			for i := range writers {
				wg.Go(func() {
					_, err := st.Update(ctx, "correlation:corr-uuid-5678", func(tc *ThreadContext) error {
						tc.History = append(tc.History, globalctx.HistoryEntry{Agent: "vendor_agent", Action: string(rune('a' + i))})
						return nil
					})
					if err != nil {
						t.Error(err)
					}
				})
			}
			wg.Wait()
			refused := errors.New("locked")
			if _, err := st.Update(ctx, "correlation:corr-uuid-5678", func(tc *ThreadContext) error {
				tc.CurrentAgent = "intruder"
				return refused
			}); !errors.Is(err, refused) {
				t.Errorf("a failing update: %v", err)
			}
			tc, err := st.Get(ctx, "correlation:corr-uuid-5678")
			if err != nil || tc == nil || len(tc.History) != writers || tc.CurrentAgent != "" {
				t.Fatalf("after %d concurrent updates and a refused one: %+v %v", writers, tc, err)
			}
		})
	}
	if ttl := client.TTL(context.Background(), "{gw:mbox}:rc:correlation:corr-uuid-5678").Val(); ttl <= 0 || ttl > time.Hour {
		t.Errorf("redis context TTL %s, want the retention (1h)", ttl)
	}
}

// TestSeed003HandoffLockReleased: a handoff refused after it locked its
// thread (no escalation could be opened for its WAITING_FOR_HUMAN) leaves
// the context unlocked: the next handoff of the same agent goes through.
func TestSeed003HandoffLockReleased(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.esc.setFail(true)
	handoff := func(id, extra string) int {
		return h.send("orch", `{"message_type":"request","message_id":"`+id+`","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_handoff","action":"handoff"`+extra+`}`).Code
	}
	if code := handoff("h1", `,"status":"WAITING_FOR_HUMAN"`); code != http.StatusServiceUnavailable {
		t.Fatalf("handoff without an escalation: %d, want 503", code)
	}
	h.esc.setFail(false)
	if code := handoff("h2", ""); code != http.StatusOK {
		t.Fatalf("the next handoff: %d, want 200 (the lock released)", code)
	}
	tc, err := h.svc.contexts.Get(context.Background(), "workflow:wf_handoff")
	if err != nil || tc == nil || tc.Handoff == nil || tc.Handoff.State != HandoffComplete || tc.CurrentAgent != "planner" {
		t.Fatalf("context after the handoff: %+v %v", tc, err)
	}
}

// TestHandoffLockOutlivesNoReplica: a pending handoff whose replica died
// before it settled stops locking the thread once no REQUEST could still
// be waiting for its answer.
func TestHandoffLockOutlivesNoReplica(t *testing.T) {
	t0 := time.Date(2026, 1, 5, 10, 0, 0, 0, time.UTC)
	tc := ThreadContext{Handoff: &Handoff{From: "a", To: "b", State: HandoffPending, RequestedAt: t0}}
	if !tc.locked(t0.Add(59 * time.Minute)) {
		t.Error("a handoff within the longest REQUEST does not lock")
	}
	if tc.locked(t0.Add(2 * time.Hour)) {
		t.Error("a handoff pending for two hours still locks")
	}
	tc.Handoff.State = HandoffComplete
	if tc.locked(t0) {
		t.Error("a complete handoff locks")
	}
}
