package limit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"
)

// Peeking is how the operator page (/review/ops) shows each agent's use of
// its limits: it reads a key's bucket as the next Allow or Reserve would
// find it, and neither spends from it nor creates state for a key that has
// none (an agent that sent nothing shows a full bucket, as it would be).

// RatePeeker reports a Limiter's state for key without spending from it.
type RatePeeker interface {
	PeekRate(ctx context.Context, key string, rule Rule) (Result, error)
}

// BudgetPeeker reports a Budget's state for key without reserving from it.
// Remaining never goes below zero, even when settles left the bucket in
// debt.
type BudgetPeeker interface {
	PeekBudget(ctx context.Context, key string, rule Rule) (Result, error)
}

var (
	_ RatePeeker   = (*Memory)(nil)
	_ RatePeeker   = (*Redis)(nil)
	_ RatePeeker   = (*Fallback)(nil)
	_ BudgetPeeker = (*MemoryBudget)(nil)
	_ BudgetPeeker = (*RedisBudget)(nil)
	_ BudgetPeeker = (*Fallback)(nil)
)

// unlimited is what a zero rule reports, as Allow and Reserve do.
var unlimited = Result{Allowed: true, Remaining: math.MaxInt32}

// full is the state of a key with no bucket yet (or a bucket of another
// rule, which the next decision replaces with a full one).
func full(rule Rule) Result {
	return Result{Allowed: true, Limit: rule.N, Remaining: rule.N}
}

// PeekRate implements RatePeeker.
func (m *Memory) PeekRate(_ context.Context, key string, rule Rule) (Result, error) {
	if rule.IsZero() {
		return unlimited, nil
	}
	m.mu.Lock()
	e := m.byID[key]
	m.mu.Unlock()
	if e == nil || e.rule != rule {
		return full(rule), nil
	}
	// TokensAt computes the refill without storing it.
	tokens := e.lim.TokensAt(m.now())
	res := Result{Allowed: tokens >= 1, Limit: rule.N, Remaining: max(0, int(math.Floor(tokens)))}
	res.Reset = secondsToDuration((float64(rule.N) - tokens) / rule.perSecond())
	return res, nil
}

// PeekBudget implements BudgetPeeker.
func (m *MemoryBudget) PeekBudget(_ context.Context, key string, rule Rule) (Result, error) {
	if rule.IsZero() {
		return unlimited, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.buckets[key]
	if b == nil || b.rule != rule {
		return full(rule), nil
	}
	// A copy refilled to now: bucketLocked would store the refill, which
	// is harmless but is not a read.
	c := *b
	if el := m.now().Sub(c.last).Seconds(); el > 0 {
		c.tokens = math.Min(float64(rule.N), c.tokens+el*rule.perSecond())
	}
	return c.result(c.tokens >= 1, 1), nil
}

// PeekRate implements RatePeeker: GCRA with a cost of 0 only reads (its
// script stores the same theoretical arrival time it found).
func (r *Redis) PeekRate(ctx context.Context, key string, rule Rule) (Result, error) {
	if rule.IsZero() {
		return unlimited, nil
	}
	rr, err := r.rl.AllowN(ctx, r.prefix+key, redis_rate.Limit{Rate: rule.N, Burst: rule.N, Period: rule.Period}, 0)
	if err != nil {
		return Result{}, fmt.Errorf("redis rate limit peek: %w", err)
	}
	return Result{Allowed: rr.Remaining >= 1, Limit: rule.N, Remaining: max(0, rr.Remaining), Reset: max(0, rr.ResetAfter)}, nil
}

// PeekBudget implements BudgetPeeker. It reads the bucket's hash and the
// server clock and refills in Go as budgetLua would, so a peek writes
// nothing (running the script with a settle of 0 would create the key).
func (b *RedisBudget) PeekBudget(ctx context.Context, key string, rule Rule) (Result, error) {
	if rule.IsZero() {
		return unlimited, nil
	}
	var now *redis.TimeCmd
	var h *redis.SliceCmd
	_, err := b.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		now = p.Time(ctx)
		h = p.HMGet(ctx, b.prefix+key, "tokens", "ts", "cap", "period")
		return nil
	})
	if err != nil {
		return Result{}, fmt.Errorf("redis budget peek: %w", err)
	}
	period := max(rule.Period.Microseconds(), 1)
	vals := h.Val()
	tokens, okT := hashFloat(vals, 0)
	ts, okS := hashFloat(vals, 1)
	capN, okC := hashFloat(vals, 2)
	per, okP := hashFloat(vals, 3)
	if !okT || !okS || !okC || !okP || capN != float64(rule.N) || per != float64(period) {
		return full(rule), nil
	}
	rate := float64(rule.N) / float64(period) // tokens per microsecond, as in budgetLua
	if us := float64(now.Val().UnixMicro()); us > ts {
		tokens = math.Min(float64(rule.N), tokens+(us-ts)*rate)
	}
	res := Result{Allowed: tokens >= 1, Limit: rule.N, Remaining: int(max(0, math.Floor(tokens)))}
	res.Reset = time.Duration(math.Ceil((float64(rule.N)-tokens)/rate)) * time.Microsecond
	return res, nil
}

// hashFloat reads field i of an HMGET answer as a number.
func hashFloat(vals []any, i int) (float64, bool) {
	if i >= len(vals) {
		return 0, false
	}
	s, ok := vals[i].(string)
	if !ok {
		return 0, false
	}
	f, err := strconv.ParseFloat(s, 64)
	return f, err == nil
}

// errNoPeek is returned by a Fallback whose limiter cannot be peeked.
var errNoPeek = errors.New("limiter cannot report its state")

// PeekRate implements RatePeeker: it reads the limiter that decides now,
// the local one while the primary is being skipped after a failure (in
// local mode), else the primary. A failed peek is returned, not counted:
// it does not move the Fallback to its local limiter.
func (f *Fallback) PeekRate(ctx context.Context, key string, rule Rule) (Result, error) {
	p, err := deciding[RatePeeker](f, f.Primary, f.Local)
	if err != nil {
		return Result{}, err
	}
	return p.PeekRate(ctx, key, rule)
}

// PeekBudget implements BudgetPeeker, choosing the budget as PeekRate
// chooses the limiter.
func (f *Fallback) PeekBudget(ctx context.Context, key string, rule Rule) (Result, error) {
	p, err := deciding[BudgetPeeker](f, f.PrimaryBudget, f.LocalBudget)
	if err != nil {
		return Result{}, err
	}
	return p.PeekBudget(ctx, key, rule)
}

// deciding returns, as a P, the one of primary and local (nil: none) that
// decides now: local while the primary is being skipped after a failure
// in local mode, else primary; errNoPeek when that one is no P.
func deciding[P any](f *Fallback, primary, local any) (P, error) {
	chosen := primary
	if f.retryAt.Load() != 0 && f.useLocal() && local != nil {
		chosen = local
	}
	p, ok := chosen.(P)
	if !ok {
		return p, errNoPeek
	}
	return p, nil
}
