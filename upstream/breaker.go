package upstream

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Result is how one request to an upstream went, for its circuit breaker.
type Result int

const (
	// Answered: the upstream sent response headers with a status other
	// than 429 or 5xx. A 4xx is the provider's answer to this request,
	// not a sign that it is down.
	Answered Result = iota + 1
	// Failed: a connect or transport error, a timeout before the response
	// headers, a 429 or a 5xx (after the upstream's own retries).
	Failed
	// Abandoned: the caller gave up (the client left); it says nothing
	// about the upstream.
	Abandoned
)

// breaker is one upstream's circuit breaker, per process: replicas do
// not share breaker state, so each replica learns on its own that an
// upstream is down.
//
// Closed, it counts consecutive failures; threshold of them open it. Open,
// it refuses requests until cooldown has passed; then it lets one request
// through as a probe (half-open): the probe's answer closes it, its failure
// opens it for another cooldown. Every change of state starts a new
// generation, and a result from an older generation (a request sent
// before the breaker opened, finishing late) is ignored: it says nothing
// about the upstream as it is now.
type breaker struct {
	name      string
	threshold int
	cooldown  time.Duration
	now       func() time.Time
	counts    *counters
	log       *slog.Logger

	mu       sync.Mutex
	gen      uint64
	failures int       // consecutive, while closed
	until    time.Time // zero: closed; else open until then (half-open after)
	probing  bool      // a probe of the half-open breaker is in flight
}

// Permit is a breaker's leave for one request; the caller reports the
// outcome with Done, exactly once.
type Permit struct {
	b     *breaker
	gen   uint64
	probe bool // a probe (or a forced attempt): its result decides the state
	held  bool // holds the half-open breaker's one probe slot
}

func (b *breaker) admit() (Permit, bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.until.IsZero() {
		return Permit{b: b, gen: b.gen}, true
	}
	if b.probing || b.now().Before(b.until) {
		return Permit{}, false
	}
	b.probing = true
	return Permit{b: b, gen: b.gen, probe: true, held: true}, true
}

// force admits a request whatever the state, for a request whose every
// candidate is open: refusing it would make the breakers an outage of
// their own (with one upstream, every request during each cooldown), where
// asking one still answers if it is back. Its result counts as a probe's.
func (b *breaker) force() Permit {
	b.mu.Lock()
	defer b.mu.Unlock()
	return Permit{b: b, gen: b.gen, probe: !b.until.IsZero()}
}

// reopens is when an open breaker lets a probe through; zero when closed.
func (b *breaker) reopens() time.Time {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.until
}

func (b *breaker) open() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return !b.until.IsZero()
}

// Done reports the outcome of the request the permit admitted. The zero
// Permit does nothing.
func (p Permit) Done(r Result) {
	b := p.b
	if b == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if p.gen != b.gen {
		return
	}
	switch r {
	case Answered:
		b.failures = 0
		if !b.until.IsZero() {
			b.gen++
			b.until, b.probing = time.Time{}, false
			b.logf(slog.LevelInfo, "upstream breaker closed")
		}
	case Failed:
		switch {
		case b.until.IsZero():
			b.failures++
			if b.failures >= b.threshold {
				b.trip(false)
			}
		case p.probe:
			b.trip(b.now().Before(b.until))
		}
	case Abandoned:
		if p.held {
			// Someone else may probe: this one learnt nothing.
			b.probing = false
		}
	}
}

// trip opens the breaker for a cooldown from now. extend: it was open and
// still cooling down (a forced attempt failed), which is no new opening.
func (b *breaker) trip(extend bool) {
	b.gen++
	b.until, b.probing = b.now().Add(b.cooldown), false
	if extend {
		return
	}
	b.counts.opens.Add(1)
	if b.failures > 0 {
		b.logf(slog.LevelWarn, "upstream breaker open", "failures", b.failures, "cooldown", b.cooldown.String())
	} else {
		b.logf(slog.LevelWarn, "upstream breaker reopened: the probe failed", "cooldown", b.cooldown.String())
	}
	b.failures = 0
}

func (b *breaker) logf(level slog.Level, msg string, args ...any) {
	if b.log != nil {
		b.log.Log(context.Background(), level, msg, append([]any{"upstream", b.name}, args...)...)
	}
}
