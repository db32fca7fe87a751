// Package limit enforces per-agent request rates and budgets (tokens, and
// dollars counted in micro-dollars: a budget counts units, whatever they
// are, under keys of its caller's choosing).
//
// The in-memory implementations here serve a single replica; a Redis
// implementation of the same interfaces shares limits between replicas.
package limit

import (
	"context"
	"math"
	"sync"
	"time"

	"golang.org/x/time/rate"
)

// Rule is N events per Period. The zero Rule means no limit.
type Rule struct {
	N      int
	Period time.Duration
}

// IsZero reports whether the rule imposes no limit.
func (r Rule) IsZero() bool { return r.N <= 0 || r.Period <= 0 }

func (r Rule) perSecond() float64 { return float64(r.N) / r.Period.Seconds() }

// Result describes a limiter's verdict and its state afterwards.
type Result struct {
	Allowed bool
	// Limit is the rule's N.
	Limit int
	// Remaining is how many events are available now.
	Remaining int
	// RetryAfter is how long until the denied request would be allowed.
	RetryAfter time.Duration
	// Reset is how long until the limiter is full again.
	Reset time.Duration
}

// Limiter admits requests against a rate.
type Limiter interface {
	Allow(ctx context.Context, key string, rule Rule, cost int) (Result, error)
}

// Budget reserves units (tokens, micro-dollars) before a call and settles
// the actual usage after it, so concurrent requests cannot overrun a budget
// by more than their estimates.
type Budget interface {
	Reserve(ctx context.Context, key string, rule Rule, n int) (Result, error)
	Settle(ctx context.Context, key string, rule Rule, reserved, actual int) error
}

// Memory is a Limiter backed by golang.org/x/time/rate, one token bucket per
// key (burst = N, refilled at N/Period).
type Memory struct {
	mu   sync.Mutex
	byID map[string]*memEntry
	now  func() time.Time
}

type memEntry struct {
	rule Rule
	lim  *rate.Limiter
}

var _ Limiter = (*Memory)(nil)

// NewMemory returns an empty in-memory limiter.
func NewMemory() *Memory { return &Memory{byID: map[string]*memEntry{}, now: time.Now} }

func (m *Memory) limiter(key string, rule Rule, now time.Time) *rate.Limiter {
	m.mu.Lock()
	defer m.mu.Unlock()
	e := m.byID[key]
	if e == nil || e.rule != rule {
		lim := rate.NewLimiter(rate.Limit(rule.perSecond()), rule.N)
		if e != nil {
			// A changed rule (a config reload) keeps what was spent: a
			// lowered limit must not grant a fresh bucket.
			spend(lim, now, float64(e.rule.N)-e.lim.TokensAt(now), rule.N)
		}
		e = &memEntry{rule: rule, lim: lim}
		m.byID[key] = e
	}
	return e.lim
}

// spend takes used tokens from a new limiter of burst n, into debt (at
// most one whole burst of it) when used is over n.
func spend(lim *rate.Limiter, now time.Time, used float64, n int) {
	left := min(int(math.Ceil(used)), 2*n)
	for left > 0 {
		step := min(left, n)
		lim.ReserveN(now, step)
		left -= step
	}
}

// Allow implements Limiter.
func (m *Memory) Allow(_ context.Context, key string, rule Rule, cost int) (Result, error) {
	if rule.IsZero() {
		return Result{Allowed: true, Limit: 0, Remaining: math.MaxInt32}, nil
	}
	now := m.now()
	lim := m.limiter(key, rule, now)
	res := Result{Limit: rule.N}
	r := lim.ReserveN(now, cost)
	if !r.OK() {
		res.RetryAfter = rule.Period
	} else if d := r.DelayFrom(now); d > 0 {
		r.CancelAt(now)
		res.RetryAfter = d
	} else {
		res.Allowed = true
	}
	tokens := lim.TokensAt(now)
	res.Remaining = max(0, int(math.Floor(tokens)))
	res.Reset = secondsToDuration((float64(rule.N) - tokens) / rule.perSecond())
	return res, nil
}

// MemoryBudget is a Budget with one bucket per key that, unlike
// x/time/rate, supports refunds: a reservation larger than the actual usage
// gives the difference back.
type MemoryBudget struct {
	mu      sync.Mutex
	buckets map[string]*bucket
	now     func() time.Time
}

type bucket struct {
	rule   Rule
	tokens float64
	last   time.Time
}

var _ Budget = (*MemoryBudget)(nil)

// NewMemoryBudget returns an empty in-memory token budget.
func NewMemoryBudget() *MemoryBudget {
	return &MemoryBudget{buckets: map[string]*bucket{}, now: time.Now}
}

// bucketLocked returns key's bucket refilled up to now; m.mu must be held.
func (m *MemoryBudget) bucketLocked(key string, rule Rule, now time.Time) *bucket {
	b := m.buckets[key]
	switch {
	case b == nil:
		b = &bucket{rule: rule, tokens: float64(rule.N), last: now}
		m.buckets[key] = b
	case b.rule != rule:
		// A changed rule (a config reload) keeps what was spent (up to
		// one whole budget of debt): a lowered budget must not grant a
		// fresh one.
		old := math.Min(float64(b.rule.N), b.tokens+math.Max(0, now.Sub(b.last).Seconds())*b.rule.perSecond())
		used := float64(b.rule.N) - old
		b = &bucket{rule: rule, tokens: math.Max(-float64(rule.N), float64(rule.N)-used), last: now}
		m.buckets[key] = b
	}
	if el := now.Sub(b.last).Seconds(); el > 0 {
		b.tokens = math.Min(float64(rule.N), b.tokens+el*rule.perSecond())
		b.last = now
	}
	return b
}

func (b *bucket) result(allowed bool, need float64) Result {
	ps := b.rule.perSecond()
	res := Result{Allowed: allowed, Limit: b.rule.N, Remaining: max(0, int(math.Floor(b.tokens)))}
	res.Reset = secondsToDuration((float64(b.rule.N) - b.tokens) / ps)
	if !allowed {
		res.RetryAfter = secondsToDuration((need - b.tokens) / ps)
	}
	return res
}

// Reserve implements Budget. A request larger than the whole budget can
// never pass, so it is refused with RetryAfter set to the full period.
func (m *MemoryBudget) Reserve(_ context.Context, key string, rule Rule, n int) (Result, error) {
	if rule.IsZero() {
		return Result{Allowed: true, Remaining: math.MaxInt32}, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.bucketLocked(key, rule, m.now())
	need := float64(n)
	if need > float64(rule.N) {
		res := b.result(false, need)
		res.RetryAfter = rule.Period
		return res, nil
	}
	if b.tokens < need {
		return b.result(false, need), nil
	}
	b.tokens -= need
	return b.result(true, need), nil
}

// Settle implements Budget: it debits actual-reserved (which may leave the
// bucket in debt, delaying later requests) or refunds the difference
// (at most the reservation: a negative actual counts as nothing).
func (m *MemoryBudget) Settle(_ context.Context, key string, rule Rule, reserved, actual int) error {
	actual = max(actual, 0) // nothing spent refunds more than it reserved
	if rule.IsZero() || reserved == actual {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	b := m.bucketLocked(key, rule, m.now())
	b.tokens = math.Min(float64(rule.N), b.tokens+float64(reserved-actual))
	return nil
}

func secondsToDuration(s float64) time.Duration {
	if s <= 0 {
		return 0
	}
	return time.Duration(math.Ceil(s * float64(time.Second)))
}
