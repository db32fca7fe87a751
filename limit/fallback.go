package limit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/sacpgw/gateway/internal/apierror"
)

// What Fallback does when its primary (Redis) fails.
const (
	// OnFailureLocal falls back to the in-memory limiter of this replica.
	OnFailureLocal = "local"
	// OnFailureClosed refuses: the caller gets ErrUnavailable (503).
	OnFailureClosed = "closed"
)

// DefaultRetryInterval is how long Fallback keeps away from a failed
// primary before it tries it again.
const DefaultRetryInterval = time.Second

// ErrUnavailable wraps the primary's error when Fallback refuses to decide
// (on_failure closed, or no local fallback). The proxy maps it to 503.
var ErrUnavailable = fmt.Errorf("limit state unavailable: %w", apierror.ErrStateUnavailable)

// Readier is implemented by limiters that depend on a service (Redis), for
// /readyz.
type Readier interface {
	Ready(ctx context.Context) error
}

// Fallback is a Limiter and a Budget that asks Primary (Redis) and, when it
// fails, either falls back to Local (OnFailure local) or returns an error
// wrapping ErrUnavailable (OnFailure closed).
//
// After a failure the primary is left alone: requests go straight to the
// fallback (or fail fast) instead of each waiting for a dead Redis, and a
// background probe tries the primary every RetryInterval; when it answers,
// the primary is used again. No request pays for the probe. The Redis
// client reconnects by itself, so a restarted Redis needs no intervention.
//
// A Fallback must not be copied after first use.
type Fallback struct {
	// Primary is the shared limiter. Required to use Fallback as a Limiter.
	Primary Limiter
	// Local is the replica's own limiter. Nil: failures are errors.
	Local Limiter
	// PrimaryBudget is the shared token budget. Required to use Fallback
	// as a Budget.
	PrimaryBudget Budget
	// LocalBudget is the replica's own budget. Nil: failures are errors.
	LocalBudget Budget
	// OnFailure is OnFailureLocal or OnFailureClosed. Empty means local
	// (the config default); any other value means closed.
	OnFailure string
	// RetryInterval is how long the primary is skipped after it failed
	// before a background probe tries it again. Zero means
	// DefaultRetryInterval; negative means probe at every decision.
	RetryInterval time.Duration
	// ProbeTimeout bounds the background probe. Zero: 1s.
	ProbeTimeout time.Duration
	// Log receives one line when the primary fails and one when it
	// recovers, not one per request. Nil: slog.Default().
	Log *slog.Logger

	fallbacks atomic.Uint64
	errs      atomic.Uint64
	// retryAt is when the primary may be tried again (UnixNano); 0 when
	// it is healthy.
	retryAt atomic.Int64
	// lastErr is the primary's last failure, reported while it is skipped.
	lastErr atomic.Pointer[error]
}

var (
	_ Limiter = (*Fallback)(nil)
	_ Budget  = (*Fallback)(nil)
	_ Readier = (*Fallback)(nil)
)

// Fallbacks counts the decisions taken locally because the primary failed
// or was being skipped.
func (f *Fallback) Fallbacks() uint64 { return f.fallbacks.Load() }

// Errors counts the primary's failures (in both modes).
func (f *Fallback) Errors() uint64 { return f.errs.Load() }

// Ready reports whether the primary limiter and budget answer (those that
// implement Readier). It fails while Redis is down, whatever OnFailure is.
func (f *Fallback) Ready(ctx context.Context) error {
	for _, p := range []any{f.Primary, f.PrimaryBudget} {
		if r, ok := p.(Readier); ok {
			if err := r.Ready(ctx); err != nil {
				return err
			}
		}
	}
	return nil
}

// Allow implements Limiter.
func (f *Fallback) Allow(ctx context.Context, key string, rule Rule, cost int) (Result, error) {
	var local func() (Result, error)
	if f.Local != nil {
		local = func() (Result, error) { return f.Local.Allow(ctx, key, rule, cost) }
	}
	return try(f, ctx, func() (Result, error) { return f.Primary.Allow(ctx, key, rule, cost) }, local)
}

// Reserve implements Budget.
func (f *Fallback) Reserve(ctx context.Context, key string, rule Rule, n int) (Result, error) {
	var local func() (Result, error)
	if f.LocalBudget != nil {
		local = func() (Result, error) { return f.LocalBudget.Reserve(ctx, key, rule, n) }
	}
	return try(f, ctx, func() (Result, error) { return f.PrimaryBudget.Reserve(ctx, key, rule, n) }, local)
}

// Settle implements Budget. A settlement the primary cannot take is applied
// locally in local mode (so this replica at least accounts for the usage).
func (f *Fallback) Settle(ctx context.Context, key string, rule Rule, reserved, actual int) error {
	wrap := func(fn func(context.Context, string, Rule, int, int) error) func() (struct{}, error) {
		return func() (struct{}, error) { return struct{}{}, fn(ctx, key, rule, reserved, actual) }
	}
	var local func() (struct{}, error)
	if f.LocalBudget != nil {
		local = wrap(f.LocalBudget.Settle)
	}
	_, err := try(f, ctx, wrap(f.PrimaryBudget.Settle), local)
	return err
}

func (f *Fallback) useLocal() bool {
	return f.OnFailure == "" || f.OnFailure == OnFailureLocal
}

func (f *Fallback) log() *slog.Logger {
	if f.Log != nil {
		return f.Log
	}
	return slog.Default()
}

// try runs primary unless it is being skipped, and on failure runs local
// (nil: none) or returns the error.
//
// While the primary is skipped, no request tries it again: once per
// interval a background probe (a ping within ProbeTimeout) does, and brings
// the primary back when it answers. A slow or hung Redis thus costs one
// request its deadline, not one request per interval.
func try[T any](f *Fallback, ctx context.Context, primary, local func() (T, error)) (T, error) {
	var zero T
	var err error
	if at := f.retryAt.Load(); at != 0 {
		if now := time.Now().UnixNano(); now >= at && f.retryAt.CompareAndSwap(at, now+int64(f.interval())) {
			go f.probe()
		}
		err = errors.New("skipped after a recent failure")
		if last := f.lastErr.Load(); last != nil {
			err = fmt.Errorf("skipped after a recent failure: %w", *last)
		}
	} else {
		var v T
		v, err = primary()
		if err == nil {
			return v, nil
		}
		if ctx.Err() != nil {
			// The caller gave up; that says nothing about Redis.
			return zero, err
		}
		f.errs.Add(1)
		f.lastErr.Store(&err)
		if f.retryAt.Swap(time.Now().UnixNano()+int64(f.interval())) == 0 {
			mode := OnFailureClosed
			if f.useLocal() && local != nil {
				mode = OnFailureLocal
			}
			f.log().Warn("limit state: redis failed", "error", err.Error(), "on_failure", mode)
		}
	}
	if !f.useLocal() || local == nil {
		return zero, fmt.Errorf("%w: %w", ErrUnavailable, err)
	}
	f.fallbacks.Add(1)
	return local()
}

// probe asks the primary whether it answers again, off any request's path.
func (f *Fallback) probe() {
	timeout := f.ProbeTimeout
	if timeout <= 0 {
		timeout = time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	if err := f.Ready(ctx); err != nil {
		f.errs.Add(1)
		f.lastErr.Store(&err)
		return
	}
	if f.retryAt.Swap(0) != 0 {
		f.log().Info("limit state: redis available again")
	}
}

func (f *Fallback) interval() time.Duration {
	switch {
	case f.RetryInterval == 0:
		return DefaultRetryInterval
	case f.RetryInterval < 0:
		return 0
	}
	return f.RetryInterval
}
