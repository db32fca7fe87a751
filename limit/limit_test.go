package limit

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type clock struct{ t time.Time }

func (c *clock) now() time.Time      { return c.t }
func (c *clock) add(d time.Duration) { c.t = c.t.Add(d) }

func TestMemoryAllowsBurstThenRefills(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	m := NewMemory()
	m.now = c.now
	rule := Rule{N: 3, Period: time.Minute}
	ctx := context.Background()
	for i := range 3 {
		res, _ := m.Allow(ctx, "a", rule, 1)
		if !res.Allowed || res.Remaining != 2-i || res.Limit != 3 {
			t.Fatalf("request %d: %+v", i, res)
		}
	}
	res, _ := m.Allow(ctx, "a", rule, 1)
	if res.Allowed || res.RetryAfter != 20*time.Second || res.Remaining != 0 || res.Reset != time.Minute {
		t.Fatalf("4th request: %+v", res)
	}
	if other, _ := m.Allow(ctx, "b", rule, 1); !other.Allowed {
		t.Fatal("keys share a bucket")
	}
	c.add(20 * time.Second)
	if res, _ := m.Allow(ctx, "a", rule, 1); !res.Allowed {
		t.Fatalf("after refill: %+v", res)
	}
	if res, _ := m.Allow(ctx, "a", Rule{}, 1); !res.Allowed {
		t.Fatal("zero rule must not limit")
	}
}

func TestMemoryConcurrentAdmitsExactlyN(t *testing.T) {
	m := NewMemory()
	rule := Rule{N: 50, Period: time.Hour}
	var ok atomic.Int32
	var wg sync.WaitGroup
	for range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if res, _ := m.Allow(context.Background(), "k", rule, 1); res.Allowed {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 50 {
		t.Fatalf("admitted %d of 200 concurrent requests, want exactly 50", ok.Load())
	}
}

func TestBudgetReserveSettle(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	b := NewMemoryBudget()
	b.now = c.now
	ctx := context.Background()
	rule := Rule{N: 1000, Period: time.Hour}
	cases := []struct {
		note            string
		reserve, actual int
		allowed         bool
		remaining       int
	}{
		{"estimate reserved", 300, 300, true, 700},
		{"actual below estimate refunds", 300, 100, true, 600},
		{"actual above estimate debits", 100, 500, true, 100},
		{"a negative actual refunds the reservation, no more", 50, -10000, true, 100},
		{"over the remainder", 200, 0, false, 100},
		{"larger than the whole budget", 2000, 0, false, 100},
	}
	for _, tc := range cases {
		res, _ := b.Reserve(ctx, "k", rule, tc.reserve)
		if res.Allowed != tc.allowed {
			t.Fatalf("%s: %+v", tc.note, res)
		}
		if res.Allowed {
			_ = b.Settle(ctx, "k", rule, tc.reserve, tc.actual)
		}
		after, _ := b.Reserve(ctx, "k", rule, 0)
		if after.Remaining != tc.remaining {
			t.Fatalf("%s: remaining %d, want %d", tc.note, after.Remaining, tc.remaining)
		}
		if !res.Allowed && res.RetryAfter <= 0 {
			t.Fatalf("%s: denied without Retry-After", tc.note)
		}
	}
	c.add(time.Hour)
	if res, _ := b.Reserve(ctx, "k", rule, 1000); !res.Allowed {
		t.Fatalf("budget not refilled after a period: %+v", res)
	}
}

func TestBudgetConcurrentReservationsNeverOverrun(t *testing.T) {
	b := NewMemoryBudget()
	rule := Rule{N: 1000, Period: time.Hour}
	var granted atomic.Int32
	var wg sync.WaitGroup
	for range 100 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if res, _ := b.Reserve(context.Background(), "k", rule, 30); res.Allowed {
				granted.Add(30)
			}
		}()
	}
	wg.Wait()
	if g := granted.Load(); g > 1000 || g < 990 {
		t.Fatalf("granted %d tokens of a 1000 budget", g)
	}
}

// A changed rule (a config reload) keeps what was spent: a lowered limit
// grants only what is left under it, a raised one adds the difference; it
// never starts a fresh bucket.
func TestMemoryRuleChangeKeepsWhatWasSpent(t *testing.T) {
	for _, tc := range []struct {
		name        string
		used        int
		from, to    int
		wantAllowed int
	}{
		{"lowered below what was used: nothing more", 90, 100, 50, 0},
		{"lowered above what was used: the rest of the new limit", 20, 100, 50, 30},
		{"raised: the old remainder plus the difference", 90, 100, 200, 110},
		{"unchanged: the remainder", 90, 100, 100, 10},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &clock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
			m := NewMemory()
			m.now = c.now
			ctx := context.Background()
			from, to := Rule{N: tc.from, Period: time.Hour}, Rule{N: tc.to, Period: time.Hour}
			for range tc.used {
				if r, _ := m.Allow(ctx, "k", from, 1); !r.Allowed {
					t.Fatal("refused before the change")
				}
			}
			allowed := 0
			for range tc.to + 10 {
				if r, _ := m.Allow(ctx, "k", to, 1); r.Allowed {
					allowed++
				}
			}
			if allowed != tc.wantAllowed {
				t.Errorf("after the change %d allowed, want %d", allowed, tc.wantAllowed)
			}
		})
	}
}

func TestBudgetRuleChangeKeepsWhatWasSpent(t *testing.T) {
	for _, tc := range []struct {
		name           string
		used, from, to int
		// want: whether a reservation of 10 passes after the change.
		want bool
	}{
		{"lowered below what was used", 900, 1000, 500, false},
		{"lowered, room left", 200, 1000, 500, true},
		{"raised", 995, 1000, 2000, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &clock{t: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)}
			b := NewMemoryBudget()
			b.now = c.now
			ctx := context.Background()
			from, to := Rule{N: tc.from, Period: time.Hour}, Rule{N: tc.to, Period: time.Hour}
			if r, _ := b.Reserve(ctx, "k", from, tc.used); !r.Allowed {
				t.Fatal("refused before the change")
			}
			if r, _ := b.Reserve(ctx, "k", to, 10); r.Allowed != tc.want {
				t.Errorf("a reservation of 10 after the change: allowed %v, want %v (remaining %d)", r.Allowed, tc.want, r.Remaining)
			}
		})
	}
}
