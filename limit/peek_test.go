package limit

import (
	"context"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/testredis"
)

// A peek reports what the next decision would find, and spends nothing:
// peeking any number of times leaves the bucket as it was.
func TestMemoryPeekRate(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	m := NewMemory()
	m.now = c.now
	ctx := context.Background()
	rule := Rule{N: 10, Period: time.Minute}
	if res, _ := m.PeekRate(ctx, "a", rule); res.Remaining != 10 || res.Limit != 10 || len(m.byID) != 0 {
		t.Fatalf("unused key: %+v, %d buckets created", res, len(m.byID))
	}
	for range 4 {
		_, _ = m.Allow(ctx, "a", rule, 1)
	}
	for range 3 {
		if res, _ := m.PeekRate(ctx, "a", rule); res.Remaining != 6 || !res.Allowed || res.Reset != 24*time.Second {
			t.Fatalf("after 4 requests: %+v", res)
		}
	}
	c.add(12 * time.Second) // two requests refilled
	if res, _ := m.PeekRate(ctx, "a", rule); res.Remaining != 8 {
		t.Fatalf("after a refill: %+v", res)
	}
	if res, _ := m.Allow(ctx, "a", rule, 1); res.Remaining != 7 {
		t.Fatalf("the peeks spent from the bucket: %+v", res)
	}
	// A changed rule (reload): the next Allow starts a full bucket.
	if res, _ := m.PeekRate(ctx, "a", Rule{N: 5, Period: time.Minute}); res.Remaining != 5 {
		t.Fatalf("other rule: %+v", res)
	}
	if res, _ := m.PeekRate(ctx, "a", Rule{}); !res.Allowed || res.Limit != 0 {
		t.Fatalf("zero rule: %+v", res)
	}
}

func TestMemoryPeekBudget(t *testing.T) {
	c := &clock{t: time.Unix(1e9, 0)}
	b := NewMemoryBudget()
	b.now = c.now
	ctx := context.Background()
	rule := Rule{N: 1000, Period: time.Hour}
	if res, _ := b.PeekBudget(ctx, "tok:a", rule); res.Remaining != 1000 || len(b.buckets) != 0 {
		t.Fatalf("unused key: %+v", res)
	}
	_, _ = b.Reserve(ctx, "tok:a", rule, 300)
	_ = b.Settle(ctx, "tok:a", rule, 300, 250)
	for range 2 {
		if res, _ := b.PeekBudget(ctx, "tok:a", rule); res.Remaining != 750 || res.Limit != 1000 || res.Reset != 15*time.Minute {
			t.Fatalf("after spending 250: %+v", res)
		}
	}
	c.add(6 * time.Minute) // 100 tokens back
	if res, _ := b.PeekBudget(ctx, "tok:a", rule); res.Remaining != 850 {
		t.Fatalf("after a refill: %+v", res)
	}
	if got := b.buckets["tok:a"].tokens; got != 750 {
		t.Fatalf("the peek stored its refill: %v", got)
	}
	// In debt (usage above the reservation): nothing remains, not less.
	_ = b.Settle(ctx, "tok:a", rule, 0, 5000)
	if res, _ := b.PeekBudget(ctx, "tok:a", rule); res.Remaining != 0 || res.Allowed {
		t.Fatalf("in debt: %+v", res)
	}
}

// The Redis peeks read what the Redis limiter and budget decided, on the
// server's clock, and create no key for an agent that sent nothing.
func TestRedisPeek(t *testing.T) {
	srv := testredis.Start(t)
	client := newClient(t, srv)
	ctx := context.Background()
	rl, rb := NewRedis(client), NewRedisBudget(client)
	rule := Rule{N: 100, Period: time.Hour}
	if res, err := rl.PeekRate(ctx, "req:idle", rule); err != nil || res.Remaining != 100 {
		t.Fatalf("unused rate key: %+v %v", res, err)
	}
	if res, err := rb.PeekBudget(ctx, "tok:idle", rule); err != nil || res.Remaining != 100 {
		t.Fatalf("unused budget key: %+v %v", res, err)
	}
	if n, _ := client.DBSize(ctx).Result(); n != 0 {
		t.Fatalf("peeks created %d keys", n)
	}
	for range 7 {
		_, _ = rl.Allow(ctx, "req:a", rule, 1)
	}
	_, _ = rb.Reserve(ctx, "tok:a", rule, 40)
	for range 2 {
		res, err := rl.PeekRate(ctx, "req:a", rule)
		if err != nil || res.Remaining != 93 || res.Limit != 100 || res.Reset <= 0 {
			t.Fatalf("rate after 7 requests: %+v %v", res, err)
		}
		res, err = rb.PeekBudget(ctx, "tok:a", rule)
		// The bucket refills by the microsecond: 40 spent a moment ago.
		if err != nil || res.Remaining != 60 || res.Limit != 100 || res.Reset <= 0 || res.Reset > 24*time.Minute {
			t.Fatalf("budget after 40 reserved: %+v %v", res, err)
		}
	}
	if res, _ := rl.Allow(ctx, "req:a", rule, 1); res.Remaining != 92 {
		t.Fatalf("the peeks spent requests: %+v", res)
	}
	if res, _ := rb.Reserve(ctx, "tok:a", rule, 10); res.Remaining != 50 {
		t.Fatalf("the peeks spent tokens: %+v", res)
	}
	// Another rule (a reload) is a full bucket, as the script would start.
	if res, _ := rb.PeekBudget(ctx, "tok:a", Rule{N: 500, Period: time.Hour}); res.Remaining != 500 {
		t.Fatalf("other rule: %+v", res)
	}
}

// A Fallback reports the limiter that decides now: the primary, or the
// local one while the primary is skipped after a failure.
func TestFallbackPeek(t *testing.T) {
	ctx := context.Background()
	rule := Rule{N: 10, Period: time.Hour}
	primary, local := NewMemory(), NewMemory()
	pb, lb := NewMemoryBudget(), NewMemoryBudget()
	f := &Fallback{Primary: primary, Local: local, PrimaryBudget: pb, LocalBudget: lb, Log: quietLog()}
	_, _ = primary.Allow(ctx, "req:a", rule, 3)
	_, _ = local.Allow(ctx, "req:a", rule, 1)
	_, _ = pb.Reserve(ctx, "tok:a", rule, 2)
	if res, _ := f.PeekRate(ctx, "req:a", rule); res.Remaining != 7 {
		t.Fatalf("healthy primary: %+v", res)
	}
	if res, _ := f.PeekBudget(ctx, "tok:a", rule); res.Remaining != 8 {
		t.Fatalf("healthy primary budget: %+v", res)
	}
	f.retryAt.Store(time.Now().Add(time.Hour).UnixNano())
	if res, _ := f.PeekRate(ctx, "req:a", rule); res.Remaining != 9 {
		t.Fatalf("skipped primary: %+v", res)
	}
	if res, _ := f.PeekBudget(ctx, "tok:a", rule); res.Remaining != 10 {
		t.Fatalf("skipped primary budget: %+v", res)
	}
	// A primary that cannot be peeked says so.
	g := &Fallback{Primary: &flaky{}, PrimaryBudget: &flaky{}}
	if _, err := g.PeekRate(ctx, "req:a", rule); err == nil {
		t.Fatal("no error from a primary without PeekRate")
	}
	if _, err := g.PeekBudget(ctx, "tok:a", rule); err == nil {
		t.Fatal("no error from a primary budget without PeekBudget")
	}
}
