package limit

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/testredis"
)

var errDown = errors.New("redis down")

// flaky is a primary that fails while down is set and counts its calls.
type flaky struct {
	down   atomic.Bool
	calls  atomic.Int64
	probes atomic.Int64
}

func (f *flaky) Allow(context.Context, string, Rule, int) (Result, error) {
	f.calls.Add(1)
	if f.down.Load() {
		return Result{}, errDown
	}
	return Result{Allowed: true, Limit: 1, Remaining: 42}, nil
}

func (f *flaky) Reserve(ctx context.Context, key string, rule Rule, n int) (Result, error) {
	return f.Allow(ctx, key, rule, n)
}

func (f *flaky) Settle(context.Context, string, Rule, int, int) error {
	f.calls.Add(1)
	if f.down.Load() {
		return errDown
	}
	return nil
}

// Ready is the background probe's ping: it is not a decision, so it is
// counted apart.
func (f *flaky) Ready(context.Context) error {
	f.probes.Add(1)
	if f.down.Load() {
		return errDown
	}
	return nil
}

func quietLog() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestFallbackModes(t *testing.T) {
	rule := Rule{N: 2, Period: time.Hour}
	cases := []struct {
		name       string
		onFailure  string
		noLocal    bool
		down       bool
		wantErr    bool
		wantRemote bool // the primary's answer (Remaining 42)
		wantFalls  uint64
	}{
		{"healthy local", OnFailureLocal, false, false, false, true, 0},
		{"healthy closed", OnFailureClosed, false, false, false, true, 0},
		{"down local", OnFailureLocal, false, true, false, false, 1},
		{"down default is local", "", false, true, false, false, 1},
		{"down closed", OnFailureClosed, false, true, true, false, 0},
		{"down unknown mode is closed", "open", false, true, true, false, 0},
		{"down local without a local limiter", OnFailureLocal, true, true, true, false, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &flaky{}
			p.down.Store(tc.down)
			f := &Fallback{Primary: p, PrimaryBudget: p, OnFailure: tc.onFailure, Log: quietLog()}
			if !tc.noLocal {
				f.Local, f.LocalBudget = NewMemory(), NewMemoryBudget()
			}
			check := func(op string, res Result, err error) {
				t.Helper()
				if tc.wantErr {
					if !errors.Is(err, ErrUnavailable) || !errors.Is(err, errDown) {
						t.Fatalf("%s: err %v, want ErrUnavailable wrapping the cause", op, err)
					}
					return
				}
				if err != nil {
					t.Fatalf("%s: %v", op, err)
				}
				if !res.Allowed || (res.Remaining == 42) != tc.wantRemote {
					t.Fatalf("%s: %+v, want the primary's answer: %v", op, res, tc.wantRemote)
				}
			}
			res, err := f.Allow(t.Context(), "a", rule, 1)
			check("allow", res, err)
			// The primary is skipped now if it failed: fallbacks count every
			// decision taken without it.
			res, err = f.Reserve(t.Context(), "a", rule, 1)
			check("reserve", res, err)
			err = f.Settle(t.Context(), "a", rule, 1, 0)
			if (err != nil) != tc.wantErr {
				t.Fatalf("settle: %v", err)
			}
			if got := f.Fallbacks(); got != 3*tc.wantFalls {
				t.Fatalf("fallbacks %d, want %d", got, 3*tc.wantFalls)
			}
			if tc.down && p.calls.Load() != 1 {
				t.Fatalf("a failed primary was called %d times within the retry interval, want 1", p.calls.Load())
			}
			if tc.down && f.Errors() != 1 {
				t.Fatalf("errors %d, want 1", f.Errors())
			}
		})
	}
}

// After RetryInterval a background probe tries the primary again; no
// request pays for it. Once the probe finds it answering, the primary
// decides every request again.
func TestFallbackRecovers(t *testing.T) {
	p := &flaky{}
	p.down.Store(true)
	f := &Fallback{Primary: p, Local: NewMemory(), RetryInterval: 50 * time.Millisecond, Log: quietLog()}
	rule := Rule{N: 1000, Period: time.Hour}
	for range 10 {
		if _, err := f.Allow(t.Context(), "a", rule, 1); err != nil {
			t.Fatal(err)
		}
	}
	if p.calls.Load() != 1 || f.Fallbacks() != 10 {
		t.Fatalf("calls %d fallbacks %d, want 1 and 10", p.calls.Load(), f.Fallbacks())
	}
	// Still down after the interval: the probe fails, requests stay local.
	time.Sleep(60 * time.Millisecond)
	if _, err := f.Allow(t.Context(), "a", rule, 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return p.probes.Load() == 1 })
	if p.calls.Load() != 1 {
		t.Fatalf("a request tried the failed primary: %d calls", p.calls.Load())
	}
	p.down.Store(false)
	time.Sleep(60 * time.Millisecond)
	// This decision starts the probe; it is served locally meanwhile.
	if _, err := f.Allow(t.Context(), "a", rule, 1); err != nil {
		t.Fatal(err)
	}
	waitFor(t, func() bool { return p.probes.Load() == 2 })
	waitFor(t, func() bool { return f.retryAt.Load() == 0 })
	for range 10 {
		res, err := f.Allow(t.Context(), "a", rule, 1)
		if err != nil || res.Remaining != 42 {
			t.Fatalf("after recovery: %+v %v", res, err)
		}
	}
	if p.calls.Load() != 11 || f.Fallbacks() != 12 {
		t.Fatalf("calls %d fallbacks %d, want 11 and 12", p.calls.Load(), f.Fallbacks())
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); !cond(); time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached")
		}
	}
}

// A cancelled request is not a Redis failure.
func TestFallbackCancelledContext(t *testing.T) {
	srv := testredis.Start(t)
	f := &Fallback{Primary: NewRedis(newClient(t, srv)), Local: NewMemory(), Log: quietLog()}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := f.Allow(ctx, "a", Rule{N: 1, Period: time.Hour}, 1); !errors.Is(err, context.Canceled) {
		t.Fatalf("err %v, want context.Canceled", err)
	}
	if f.Fallbacks() != 0 || f.Errors() != 0 {
		t.Fatalf("fallbacks %d errors %d after a cancelled request", f.Fallbacks(), f.Errors())
	}
	if _, err := f.Allow(t.Context(), "a", Rule{N: 1, Period: time.Hour}, 1); err != nil {
		t.Fatal(err)
	}
}

// Stopping the real redis-server mid-load: local mode keeps answering from
// memory and counts it, closed mode fails with ErrUnavailable; after a
// restart both use Redis again by themselves.
func TestFallbackRedisStopAndRestart(t *testing.T) {
	for _, mode := range []string{OnFailureLocal, OnFailureClosed} {
		t.Run(mode, func(t *testing.T) {
			srv := testredis.Start(t)
			c := newClient(t, srv)
			f := &Fallback{
				Primary: NewRedis(c), Local: NewMemory(),
				PrimaryBudget: NewRedisBudget(c), LocalBudget: NewMemoryBudget(),
				OnFailure: mode, RetryInterval: 100 * time.Millisecond, Log: quietLog(),
			}
			ctx := t.Context()
			rule := Rule{N: 1_000_000, Period: time.Hour}
			if err := f.Ready(ctx); err != nil {
				t.Fatalf("ready: %v", err)
			}

			var ok, failed atomic.Int64
			stop := make(chan struct{})
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					for {
						select {
						case <-stop:
							return
						default:
						}
						_, err1 := f.Allow(ctx, "a", rule, 1)
						_, err2 := f.Reserve(ctx, "a", rule, 1)
						for _, err := range []error{err1, err2} {
							switch {
							case err == nil:
								ok.Add(1)
							case errors.Is(err, ErrUnavailable):
								failed.Add(1)
							default:
								t.Errorf("unexpected error: %v", err)
							}
						}
						time.Sleep(time.Millisecond)
					}
				})
			}
			time.Sleep(100 * time.Millisecond)
			if failed.Load() != 0 || f.Fallbacks() != 0 {
				t.Fatalf("before the stop: %d failed, %d fallbacks", failed.Load(), f.Fallbacks())
			}
			srv.Stop()
			okAtStop := ok.Load()
			time.Sleep(500 * time.Millisecond)
			if err := f.Ready(ctx); err == nil {
				t.Error("ready while redis is stopped")
			}
			switch mode {
			case OnFailureLocal:
				if ok.Load() <= okAtStop || failed.Load() != 0 || f.Fallbacks() == 0 {
					t.Errorf("redis stopped, local: ok %d→%d, failed %d, fallbacks %d; want serving from memory, counted",
						okAtStop, ok.Load(), failed.Load(), f.Fallbacks())
				}
			case OnFailureClosed:
				if failed.Load() == 0 || f.Fallbacks() != 0 {
					t.Errorf("redis stopped, closed: failed %d, fallbacks %d; want errors and no fallback", failed.Load(), f.Fallbacks())
				}
			}

			srv.Restart()
			restarted := time.Now()
			// Within a few retry intervals the client has reconnected and
			// the primary answers again, with no intervention.
			deadline := time.Now().Add(5 * time.Second)
			for {
				fb, fl := f.Fallbacks(), failed.Load()
				time.Sleep(300 * time.Millisecond)
				if f.Fallbacks() == fb && failed.Load() == fl {
					t.Logf("primary used again within %v of the restart", time.Since(restarted).Round(10*time.Millisecond))
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("still failing over 5s after the restart: fallbacks %d, failed %d", f.Fallbacks(), failed.Load())
				}
			}
			close(stop)
			wg.Wait()
			if err := f.Ready(ctx); err != nil {
				t.Fatalf("ready after restart: %v", err)
			}
			// The state really is in Redis again.
			if n, err := c.Exists(ctx, "rate:"+DefaultRateKeyPrefix+"a", DefaultBudgetKeyPrefix+"a").Result(); err != nil || n != 2 {
				t.Fatalf("keys in redis after restart: %d %v", n, err)
			}
		})
	}
}
