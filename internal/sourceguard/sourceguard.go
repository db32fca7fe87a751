// Package sourceguard bounds what a client that does not authenticate can
// cost the gateway: it limits the failed authentications of each source
// address (past the limit the source gets 429 before any work), and it sits
// in front of the audit trail so that a flood of failures writes a bounded
// number of entries: the first failure of a source in a window at once, the
// repeats as one counted entry per source and window.
package sourceguard

import (
	"context"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/sacpgw/gateway/audit"
)

// Appender is the audit trail the guard writes to.
type Appender = audit.Appender

// Other is the source that stands for every address once MaxSources are
// tracked: they share one summary and are never refused as a group.
const Other = "other"

// Options configure a Guard.
type Options struct {
	// Rate and Burst bound the failed authentications of one source.
	Rate  rate.Limit
	Burst int
	// Window is the audit summary window. Default 60s.
	Window time.Duration
	// MaxSources bounds the addresses tracked (memory, and entries per
	// window). Default 10000.
	MaxSources int
	// Now is the clock. Nil: time.Now.
	Now func() time.Time
}

// Guard limits and summarizes failed authentications per source. It is an
// Appender: auth.failure records are summarized, every other record passes
// through to the trail unchanged. Its methods are safe for concurrent use.
type Guard struct {
	next audit.Writer
	o    Options

	mu      sync.Mutex
	sources map[string]*source
}

type source struct {
	lim *rate.Limiter
	// windowStart is when the source's current window began (its first
	// failure in it was written at once).
	windowStart time.Time
	// count repeats of the window are not written yet; first and last are
	// their times, and sample the last one's summary.
	count       int
	first, last time.Time
	sample      map[string]any
}

// New returns a guard writing to next.
func New(next Appender, o Options) *Guard {
	if o.Window <= 0 {
		o.Window = time.Minute
	}
	if o.MaxSources <= 0 {
		o.MaxSources = 10000
	}
	if o.Burst <= 0 {
		o.Burst = max(1, int(o.Rate))
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Guard{next: audit.WriterOf(next), o: o, sources: map[string]*source{}}
}

// Allow reports whether src may be served: false once the source spent its
// budget of failed authentications, with how long until it may retry.
// Sources the guard does not track individually are always allowed, so a
// flood from many addresses never shuts out an agent at another one.
func (g *Guard) Allow(src string) (bool, time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.sources[src]
	if s == nil {
		return true, 0
	}
	now := g.o.Now()
	tokens := s.lim.TokensAt(now)
	if tokens >= 1 {
		return true, 0
	}
	wait := time.Duration((1 - tokens) / float64(g.o.Rate) * float64(time.Second))
	return false, max(wait, time.Second)
}

var _ audit.Writer = (*Guard)(nil)

// Submit queues r on the trail without waiting for it; an auth.failure
// record, which the guard may fold into a summary, is decided here by
// Append.
func (g *Guard) Submit(ctx context.Context, r audit.Record) (*audit.Pending, error) {
	if r.Kind != audit.KindAuthFailure {
		return g.next.Submit(ctx, r)
	}
	e, err := g.Append(ctx, r)
	return audit.Completed(e, err), nil
}

// TrySubmit is Submit that never waits for room in the trail's queue; an
// auth.failure record is decided by Append in the background.
func (g *Guard) TrySubmit(r audit.Record) (*audit.Pending, error) {
	if r.Kind != audit.KindAuthFailure {
		return g.next.TrySubmit(r)
	}
	go func() { _, _ = g.Append(context.Background(), r) }()
	return audit.Completed(audit.Entry{}, nil), nil
}

// Begin passes an exchange's start on to the trail (its commit delay).
func (g *Guard) Begin() (end func()) { return g.next.Begin() }

// Append implements Appender. An auth.failure record (its summary's
// "remote" names the source) spends one of the source's failures; the first
// of a window is written, the repeats are counted for Flush.
func (g *Guard) Append(ctx context.Context, r audit.Record) (audit.Entry, error) {
	if r.Kind != audit.KindAuthFailure {
		return g.next.Append(ctx, r)
	}
	src, _ := r.Summary["remote"].(string)
	if src == "" {
		src = "unknown"
	}
	now := g.o.Now()
	g.mu.Lock()
	s := g.sources[src]
	if s == nil {
		if len(g.sources) >= g.o.MaxSources {
			src = Other
			s = g.sources[Other]
		}
		if s == nil {
			s = &source{lim: rate.NewLimiter(g.o.Rate, g.o.Burst)}
			g.sources[src] = s
		}
	}
	if src != Other {
		s.lim.AllowN(now, 1)
	}
	var pending *audit.Record
	if !s.windowStart.IsZero() && now.Sub(s.windowStart) < g.o.Window {
		if s.count == 0 {
			s.first = now
		}
		s.count++
		s.last, s.sample = now, r.Summary
		g.mu.Unlock()
		return audit.Entry{}, nil
	}
	// A new window: what the last one counted goes first, then this failure.
	pending = s.summary(src)
	s.windowStart = now
	g.mu.Unlock()
	if pending != nil {
		if _, err := g.next.Append(ctx, *pending); err != nil {
			return audit.Entry{}, err
		}
	}
	if src == Other {
		r.Summary["remote"] = Other
	}
	return g.next.Append(ctx, r)
}

// summary takes the source's counted repeats as one record (nil if none).
// The caller holds g.mu.
func (s *source) summary(src string) *audit.Record {
	if s.count == 0 {
		return nil
	}
	sum := map[string]any{}
	for _, k := range []string{"route", "method", "reason"} {
		if v, ok := s.sample[k]; ok {
			sum[k] = v
		}
	}
	sum["remote"] = src
	sum["count"] = s.count
	sum["first_ts"] = s.first.UTC().Format(time.RFC3339Nano)
	sum["last_ts"] = s.last.UTC().Format(time.RFC3339Nano)
	s.count, s.sample = 0, nil
	return &audit.Record{Kind: audit.KindAuthFailure, Summary: sum}
}

// Flush writes the counted repeats of every window that has ended (all of
// them when final) and forgets sources with nothing left to remember.
func (g *Guard) Flush(ctx context.Context, final bool) error {
	now := g.o.Now()
	var out []audit.Record
	g.mu.Lock()
	for src, s := range g.sources {
		ended := now.Sub(s.windowStart) >= g.o.Window
		if ended || final {
			if r := s.summary(src); r != nil {
				out = append(out, *r)
			}
		}
		if ended && s.count == 0 && s.lim.TokensAt(now) >= float64(g.o.Burst) {
			delete(g.sources, src)
		}
	}
	g.mu.Unlock()
	for _, r := range out {
		if _, err := g.next.Append(ctx, r); err != nil {
			return err
		}
	}
	return nil
}

// Run flushes ended windows until ctx is done, then everything counted.
func (g *Guard) Run(ctx context.Context) {
	t := time.NewTicker(max(g.o.Window/4, 100*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = g.Flush(fctx, true)
			cancel()
			return
		case <-t.C:
			_ = g.Flush(ctx, false)
		}
	}
}

// Sources is how many addresses are tracked (metrics, tests).
func (g *Guard) Sources() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.sources)
}
