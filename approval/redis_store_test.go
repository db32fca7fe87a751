package approval

import (
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sacpgw/gateway/internal/testredis"
)

// The store behaviours of store_test.go, run against Redis.
func TestStoreConformance(t *testing.T) {
	srv := testredis.Start(t)
	stores := []struct {
		name string
		new  func(t *testing.T) Store
	}{
		{"redis", func(t *testing.T) Store {
			return NewRedisStore(srv.Client(t), WithRedisKeyPrefix("{"+t.Name()+"}:"))
		}},
	}
	for _, st := range stores {
		t.Run(st.name, func(t *testing.T) {
			t.Run("create get update", func(t *testing.T) { storeBasics(t, st.new(t)) })
			t.Run("escalated index", func(t *testing.T) { storeEscalated(t, st.new(t)) })
			t.Run("escalation graph", func(t *testing.T) { storeGraph(t, st.new(t)) })
			t.Run("approved index", func(t *testing.T) { storeApproved(t, st.new(t)) })
			t.Run("sessions", func(t *testing.T) { storeSessions(t, st.new(t)) })
			t.Run("concurrent updates", func(t *testing.T) {
				s := st.new(t)
				storeConcurrentUpdates(t, s, s)
			})
		})
	}
}

// Two replicas (two clients) updating one record lose nothing.
func TestRedisStoreConcurrentUpdatesTwoReplicas(t *testing.T) {
	srv := testredis.Start(t)
	storeConcurrentUpdates(t, NewRedisStore(srv.Client(t)), NewRedisStore(srv.Client(t)))
}

// Terminal records expire after the retention; others do not.
func TestRedisStoreRetention(t *testing.T) {
	srv := testredis.Start(t)
	c := srv.Client(t)
	s := NewRedisStore(c, WithRedisRetention(time.Hour))
	ctx := t.Context()
	cases := []struct {
		state   State
		wantTTL bool
	}{
		{StatePending, false},
		{StateEscalated, false},
		{StateApproved, false},
		{StateRejected, true},
		{StateCompleted, true},
		{StateExpired, true},
	}
	for _, tc := range cases {
		t.Run(string(tc.state), func(t *testing.T) {
			id := "create-" + string(tc.state)
			if err := s.Create(ctx, &Record{ID: id, State: tc.state}); err != nil {
				t.Fatal(err)
			}
			checkTTL(t, c, s.recordKey(id), tc.wantTTL)
			id = "update-" + string(tc.state)
			if err := s.Create(ctx, &Record{ID: id, State: StateRejected}); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Update(ctx, id, func(r *Record) error { r.State = tc.state; return nil }); err != nil {
				t.Fatal(err)
			}
			checkTTL(t, c, s.recordKey(id), tc.wantTTL)
		})
	}
}

func checkTTL(t *testing.T, c *redis.Client, key string, want bool) {
	t.Helper()
	ttl, err := c.PTTL(t.Context(), key).Result()
	if err != nil {
		t.Fatal(err)
	}
	if got := ttl > 0 && ttl <= time.Hour; got != want || (!want && ttl != -1) {
		t.Fatalf("%s: TTL %v, want expiry %v", key, ttl, want)
	}
}

// A replica restart (new clients) finds the states and the escalations.
func TestRedisStoreReplicaRestart(t *testing.T) {
	srv := testredis.Start(t)
	ctx := t.Context()
	first := NewRedisStore(srv.Client(t))
	if err := first.Create(ctx, &Record{ID: "req-1", State: StateEscalated, History: []Transition{{State: StateEscalated, By: "policy"}}}); err != nil {
		t.Fatal(err)
	}
	opt, _ := redis.ParseURL(srv.URL())
	c := redis.NewClient(opt)
	second := NewRedisStore(c)
	defer c.Close()
	r, err := second.Get(ctx, "req-1")
	if err != nil || r.State != StateEscalated || len(r.History) != 1 {
		t.Fatalf("after restart: %+v %v", r, err)
	}
	if esc, err := second.Escalated(ctx); err != nil || len(esc) != 1 || esc[0].ID != "req-1" {
		t.Fatalf("escalated after restart: %v %v", esc, err)
	}
}

// Only one of many replicas obtains a lease until it expires.
func TestRedisStoreLease(t *testing.T) {
	srv := testredis.Start(t)
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := 0
	for range 10 {
		s := NewRedisStore(srv.Client(t))
		wg.Go(func() {
			ok, err := s.Lease(t.Context(), "expiry", 300*time.Millisecond)
			if err != nil {
				t.Error(err)
			}
			if ok {
				mu.Lock()
				got++
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if got != 1 {
		t.Fatalf("%d replicas hold the lease, want 1", got)
	}
	time.Sleep(400 * time.Millisecond)
	if ok, err := NewRedisStore(srv.Client(t)).Lease(t.Context(), "expiry", time.Second); err != nil || !ok {
		t.Fatalf("lease after expiry: %v %v", ok, err)
	}
}

// A record deleted behind the store's back leaves the escalated listing.
func TestRedisStoreEscalatedSkipsMissing(t *testing.T) {
	srv := testredis.Start(t)
	c := srv.Client(t)
	s := NewRedisStore(c)
	ctx := t.Context()
	for _, id := range []string{"a", "b"} {
		if err := s.Create(ctx, &Record{ID: id, State: StateEscalated}); err != nil {
			t.Fatal(err)
		}
	}
	c.Del(ctx, s.recordKey("a"))
	if esc, err := s.Escalated(ctx); err != nil || len(esc) != 1 || esc[0].ID != "b" {
		t.Fatalf("escalated: %v %v", esc, err)
	}
	if n, _ := c.ZCard(ctx, s.escalatedKey()).Result(); n != 1 {
		t.Fatalf("index still holds %d ids", n)
	}
}

// Two gateway replicas sharing Redis: a request escalated on one is seen by
// the other, and reviewers deciding on both at once apply exactly one
// decision.
func TestRedisStoreTwoServices(t *testing.T) {
	srv := testredis.Start(t)
	a := newHarness(t, func(d *Deps) { d.Store = NewRedisStore(srv.Client(t)) })
	b := newHarness(t, func(d *Deps) { d.Store = NewRedisStore(srv.Client(t)) })
	id := escalate(t, a, "x")
	if _, st := b.status(tokClaude, id); st.State != StateEscalated {
		t.Fatalf("replica b sees state %q", st.State)
	}
	var wg sync.WaitGroup
	results := make(chan int, 8)
	for i := range 8 {
		h, tok := a, tokReviewer
		if i%2 == 1 {
			h, tok = b, tokAlice
		}
		wg.Go(func() {
			results <- h.do("POST", "/admin/escalations/"+id+"/decision", tok, map[string]any{"decision": "approve"}).status
		})
	}
	wg.Wait()
	close(results)
	ok := 0
	for s := range results {
		switch s {
		case http.StatusOK:
			ok++
		case http.StatusConflict:
		default:
			t.Errorf("status %d", s)
		}
	}
	if ok != 1 {
		t.Fatalf("%d decisions applied, want 1", ok)
	}
	for _, h := range []*harness{a, b} {
		if _, st := h.status(tokClaude, id); st.State != StateApproved || len(st.History) != 4 {
			t.Fatalf("state %s history %d", st.State, len(st.History))
		}
	}
}
