package limit

import (
	"context"
	"math"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sacpgw/gateway/internal/testredis"
)

// newClient is one replica's connection to srv.
func newClient(t *testing.T, srv *testredis.Server) redis.UniversalClient {
	t.Helper()
	c, err := NewRedisClient(srv.URL(), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Two replicas (two clients, two limiters) hammering one key together admit
// exactly the configured number of requests.
func TestRedisExactUnderConcurrencyTwoReplicas(t *testing.T) {
	srv := testredis.Start(t)
	cases := []struct {
		name       string
		rule       Rule
		perReplica int
		cost       int
		want       int
	}{
		{"50 per hour", Rule{N: 50, Period: time.Hour}, 100, 1, 50},
		{"1 per hour", Rule{N: 1, Period: time.Hour}, 50, 1, 1},
		{"cost 3 of 100 per hour", Rule{N: 100, Period: time.Hour}, 100, 3, 33},
		{"1000 per day, more than asked", Rule{N: 1000, Period: 24 * time.Hour}, 100, 1, 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			replicas := []*Redis{NewRedis(newClient(t, srv)), NewRedis(newClient(t, srv))}
			key := "agent:" + t.Name()
			var allowed, denied atomic.Int64
			var wg sync.WaitGroup
			for _, r := range replicas {
				for range tc.perReplica {
					wg.Go(func() {
						res, err := r.Allow(t.Context(), key, tc.rule, tc.cost)
						switch {
						case err != nil:
							t.Error(err)
						case res.Allowed:
							allowed.Add(1)
						default:
							denied.Add(1)
							if res.RetryAfter <= 0 {
								t.Errorf("denied with RetryAfter %v", res.RetryAfter)
							}
						}
					})
				}
			}
			wg.Wait()
			if got := int(allowed.Load()); got != tc.want {
				t.Fatalf("allowed %d, want exactly %d (denied %d)", got, tc.want, denied.Load())
			}
		})
	}
}

// Results match the memory limiter's for a simple sequence.
func TestRedisResults(t *testing.T) {
	srv := testredis.Start(t)
	r := NewRedis(newClient(t, srv))
	rule := Rule{N: 3, Period: time.Minute}
	type step struct {
		cost          int
		allowed       bool
		remaining     int
		retryAtLeast  time.Duration
		retryAtMost   time.Duration
		resetPositive bool
	}
	cases := []struct {
		name  string
		rule  Rule
		steps []step
	}{
		{"drain then deny", rule, []step{
			{1, true, 2, 0, 0, true},
			{2, true, 0, 0, 0, true},
			{1, false, 0, 19 * time.Second, 20 * time.Second, true},
		}},
		{"cost above N is refused for a period", rule, []step{
			{4, false, 3, time.Minute, time.Minute, false},
			{3, true, 0, 0, 0, true},
		}},
		{"zero rule is unlimited", Rule{}, []step{
			{1000, true, math.MaxInt32, 0, 0, false},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for i, s := range tc.steps {
				res, err := r.Allow(t.Context(), t.Name(), tc.rule, s.cost)
				if err != nil {
					t.Fatal(err)
				}
				if res.Allowed != s.allowed || res.Remaining != s.remaining ||
					res.RetryAfter < s.retryAtLeast || res.RetryAfter > s.retryAtMost ||
					(res.Reset > 0) != s.resetPositive || res.Limit != tc.rule.N {
					t.Fatalf("step %d: %+v, want %+v", i, res, s)
				}
			}
		})
	}
}

// Reservations from two replicas never take more than the budget holds.
func TestRedisBudgetNoOverrunTwoReplicas(t *testing.T) {
	srv := testredis.Start(t)
	cases := []struct {
		name       string
		rule       Rule
		perReplica int
		n          int
		want       int
	}{
		{"500 tokens per hour, 7 each", Rule{N: 500, Period: time.Hour}, 100, 7, 71},
		{"exact fit", Rule{N: 1000, Period: time.Hour}, 100, 10, 100},
		{"larger than the budget", Rule{N: 100, Period: time.Hour}, 20, 101, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			replicas := []*RedisBudget{NewRedisBudget(newClient(t, srv)), NewRedisBudget(newClient(t, srv))}
			key := "agent:" + t.Name()
			var allowed atomic.Int64
			var wg sync.WaitGroup
			for _, b := range replicas {
				for range tc.perReplica {
					wg.Go(func() {
						res, err := b.Reserve(t.Context(), key, tc.rule, tc.n)
						if err != nil {
							t.Error(err)
							return
						}
						if res.Allowed {
							allowed.Add(1)
						} else if res.RetryAfter <= 0 {
							t.Errorf("refused with RetryAfter %v", res.RetryAfter)
						}
					})
				}
			}
			wg.Wait()
			if got := int(allowed.Load()); got != tc.want {
				t.Fatalf("%d reservations of %d granted, want exactly %d", got, tc.n, tc.want)
			}
		})
	}
}

// Settle refunds unused tokens (up to the capacity) and debits overuse,
// which may leave the budget in debt.
func TestRedisBudgetSettle(t *testing.T) {
	srv := testredis.Start(t)
	b := NewRedisBudget(newClient(t, srv))
	rule := Rule{N: 1000, Period: 24 * time.Hour}
	type op struct {
		reserve          int // when > 0: Reserve this many
		reserved, actual int // otherwise Settle
		wantAllowed      bool
		remaining        int // checked after the op with a Reserve(0)
	}
	cases := []struct {
		name string
		ops  []op
	}{
		{"refund", []op{
			{reserve: 600, wantAllowed: true, remaining: 400},
			{reserved: 600, actual: 100, remaining: 900},
		}},
		{"refund is clamped at capacity", []op{
			{reserve: 10, wantAllowed: true, remaining: 990},
			{reserved: 500, actual: 0, remaining: 1000},
		}},
		{"a negative actual refunds the reservation, no more", []op{
			{reserve: 600, wantAllowed: true, remaining: 400},
			{reserve: 100, wantAllowed: true, remaining: 300},
			{reserved: 100, actual: -100000, remaining: 400},
		}},
		{"debt blocks later requests", []op{
			{reserve: 900, wantAllowed: true, remaining: 100},
			{reserved: 900, actual: 1500, remaining: 0},
			{reserve: 1, wantAllowed: false, remaining: 0},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := t.Context()
			key := t.Name()
			for i, o := range tc.ops {
				if o.reserve > 0 {
					res, err := b.Reserve(ctx, key, rule, o.reserve)
					if err != nil || res.Allowed != o.wantAllowed {
						t.Fatalf("op %d: reserve %d: %+v %v", i, o.reserve, res, err)
					}
				} else if err := b.Settle(ctx, key, rule, o.reserved, o.actual); err != nil {
					t.Fatalf("op %d: settle: %v", i, err)
				}
				res, err := b.Reserve(ctx, key, rule, 0)
				if err != nil || res.Remaining != o.remaining {
					t.Fatalf("op %d: remaining %d, want %d (%v)", i, res.Remaining, o.remaining, err)
				}
			}
		})
	}
}

// The bucket refills on the server clock, keys expire once they would be
// full again, and a changed rule starts a full bucket.
func TestRedisBudgetRefillExpiryAndRuleChange(t *testing.T) {
	srv := testredis.Start(t)
	c := newClient(t, srv)
	b := NewRedisBudget(c)
	ctx := t.Context()
	rule := Rule{N: 10, Period: time.Second}
	if res, err := b.Reserve(ctx, "k", rule, 10); err != nil || !res.Allowed || res.Reset <= 0 || res.Reset > time.Second {
		t.Fatalf("reserve all: %+v %v", res, err)
	}
	if res, err := b.Reserve(ctx, "k", rule, 5); err != nil || res.Allowed || res.RetryAfter <= 0 || res.RetryAfter > 600*time.Millisecond {
		t.Fatalf("reserve on empty: %+v %v", res, err)
	}
	ttl, err := c.PTTL(ctx, DefaultBudgetKeyPrefix+"k").Result()
	if err != nil || ttl <= 0 || ttl > 2100*time.Millisecond {
		t.Fatalf("key TTL %v %v, want about the refill time plus 1s", ttl, err)
	}
	time.Sleep(600 * time.Millisecond)
	if res, err := b.Reserve(ctx, "k", rule, 5); err != nil || !res.Allowed {
		t.Fatalf("reserve after refill: %+v %v", res, err)
	}
	// A new rule (a config reload) keeps what was spent: about 9 of 10
	// were, so 20 per hour leaves about 11, not a fresh 20.
	if res, err := b.Reserve(ctx, "k", Rule{N: 20, Period: time.Hour}, 15); err != nil || res.Allowed {
		t.Fatalf("reserve 15 under a raised rule: %+v %v, want refused (what was spent counts)", res, err)
	}
	if res, err := b.Reserve(ctx, "k", Rule{N: 20, Period: time.Hour}, 10); err != nil || !res.Allowed {
		t.Fatalf("reserve 10 under a raised rule: %+v %v", res, err)
	}
}

// A replica restart (new clients, new limiter values) keeps the limits.
func TestRedisReplicaRestartKeepsLimits(t *testing.T) {
	srv := testredis.Start(t)
	rule := Rule{N: 5, Period: time.Hour}
	brule := Rule{N: 100, Period: time.Hour}
	run := func(allow, reserve int) (allowed int, reserved bool) {
		c, err := NewRedisClient(srv.URL(), 0)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		l, b := NewRedis(c), NewRedisBudget(c)
		for range allow {
			res, err := l.Allow(t.Context(), "a1", rule, 1)
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed {
				allowed++
			}
		}
		res, err := b.Reserve(t.Context(), "a1", brule, reserve)
		if err != nil {
			t.Fatal(err)
		}
		return allowed, res.Allowed
	}
	if n, ok := run(3, 80); n != 3 || !ok {
		t.Fatalf("first life: %d allowed, reserve %v", n, ok)
	}
	if n, ok := run(5, 80); n != 2 || ok {
		t.Fatalf("after restart: %d allowed (want 2), reserve of 80 more granted=%v (want false)", n, ok)
	}
}

func TestRedisKeyPrefix(t *testing.T) {
	srv := testredis.Start(t)
	c := newClient(t, srv)
	ctx := t.Context()
	a, b := NewRedis(c, WithKeyPrefix("env-a:")), NewRedis(c, WithKeyPrefix("env-b:"))
	rule := Rule{N: 1, Period: time.Hour}
	for i, l := range []*Redis{a, b} {
		if res, err := l.Allow(ctx, "x", rule, 1); err != nil || !res.Allowed {
			t.Fatalf("limiter %d: %+v %v", i, res, err)
		}
	}
	if n, err := c.Exists(ctx, "rate:env-a:x", "rate:env-b:x").Result(); err != nil || n != 2 {
		t.Fatalf("keys: %d %v", n, err)
	}
	if err := a.Ready(ctx); err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if err := a.Ready(short); err == nil {
		t.Fatal("Ready with redis stopped")
	}
}
