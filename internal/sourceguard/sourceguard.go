// Package sourceguard bounds what a client that does not authenticate can
// cost the gateway: it limits the failed authentications of each source
// address (past the limit the source gets 429 before any work), and it sits
// in front of the audit trail so that a flood of failures writes a bounded
// number of entries: the first failure of a source in a window at once, the
// repeats as one counted entry per source and window. Other kinds of
// record that an agent can send in floods (Options.Folds: an MCP
// session's notifications) are summarized the same way, per the key their
// Fold names.
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
	// Folds are the kinds summarized besides auth.failure.
	Folds []Fold
}

// Fold is a kind of record summarized like failed authentications: the
// first record of a key in a window is written at once, its repeats as
// one counted entry (count, first_ts, last_ts, and the Keep members and
// the agent and session of the last repeat). No rate limit applies: the
// caller limits what it accepts.
type Fold struct {
	Kind string
	// Key names whose repeats a record is (for example an agent's
	// session and the record's outcome).
	Key  func(audit.Record) string
	Keep []string
}

// group is what one summary counts: a kind and a key (for auth.failure,
// the source address).
type group struct{ kind, key string }

// Guard limits and summarizes failed authentications per source. It is an
// Appender: auth.failure records are summarized, every other record passes
// through to the trail unchanged. Its methods are safe for concurrent use.
type Guard struct {
	next audit.Writer
	o    Options

	folds map[string]Fold

	mu      sync.Mutex
	sources map[group]*source
}

type source struct {
	// lim limits a source address's failures (nil for a Fold's key).
	lim *rate.Limiter
	// windowStart is when the source's current window began (its first
	// failure in it was written at once).
	windowStart time.Time
	// count repeats of the window are not written yet; first and last are
	// their times, and sample the last one's summary.
	count       int
	first, last time.Time
	sample      audit.Record
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
	folds := make(map[string]Fold, len(o.Folds))
	for _, f := range o.Folds {
		folds[f.Kind] = f
	}
	return &Guard{next: audit.WriterOf(next), o: o, folds: folds, sources: map[group]*source{}}
}

// folded reports whether the guard summarizes records of kind.
func (g *Guard) folded(kind string) bool {
	_, ok := g.folds[kind]
	return kind == audit.KindAuthFailure || ok
}

// Allow reports whether src may be served: false once the source spent its
// budget of failed authentications, with how long until it may retry.
// Sources the guard does not track individually are always allowed, so a
// flood from many addresses never shuts out an agent at another one.
func (g *Guard) Allow(src string) (bool, time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	s := g.sources[group{audit.KindAuthFailure, src}]
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
// record (or one of a Fold), which the guard may fold into a summary, is
// decided here by Append.
func (g *Guard) Submit(ctx context.Context, r audit.Record) (*audit.Pending, error) {
	if !g.folded(r.Kind) {
		return g.next.Submit(ctx, r)
	}
	e, err := g.Append(ctx, r)
	return audit.Completed(e, err), nil
}

// TrySubmit is Submit that never waits for room in the trail's queue; an
// auth.failure record (or one of a Fold) is decided by Append in the
// background.
func (g *Guard) TrySubmit(r audit.Record) (*audit.Pending, error) {
	if !g.folded(r.Kind) {
		return g.next.TrySubmit(r)
	}
	go func() { _, _ = g.Append(context.Background(), r) }()
	return audit.Completed(audit.Entry{}, nil), nil
}

// Begin passes an exchange's start on to the trail (its commit delay).
func (g *Guard) Begin() (end func()) { return g.next.Begin() }

// Append implements Appender. An auth.failure record (its summary's
// "remote" names the source) spends one of the source's failures; the first
// of a window is written, the repeats are counted for Flush. A Fold's
// records are counted the same way, per their key.
func (g *Guard) Append(ctx context.Context, r audit.Record) (audit.Entry, error) {
	if !g.folded(r.Kind) {
		return g.next.Append(ctx, r)
	}
	key := g.keyOf(r)
	now := g.o.Now()
	g.mu.Lock()
	grp := group{r.Kind, key}
	s := g.sources[grp]
	if s == nil {
		if len(g.sources) >= g.o.MaxSources {
			grp.key = Other
			s = g.sources[grp]
		}
		if s == nil {
			s = &source{}
			if r.Kind == audit.KindAuthFailure {
				s.lim = rate.NewLimiter(g.o.Rate, g.o.Burst)
			}
			g.sources[grp] = s
		}
	}
	if s.lim != nil && grp.key != Other {
		s.lim.AllowN(now, 1)
	}
	if !s.windowStart.IsZero() && now.Sub(s.windowStart) < g.o.Window {
		if s.count == 0 {
			s.first = now
		}
		s.count++
		s.last, s.sample = now, r
		g.mu.Unlock()
		return audit.Entry{}, nil
	}
	// A new window: what the last one counted goes first, then this record.
	pending := g.summary(grp, s)
	s.windowStart = now
	g.mu.Unlock()
	if pending != nil {
		if _, err := g.next.Append(ctx, *pending); err != nil {
			return audit.Entry{}, err
		}
	}
	if grp.key == Other && r.Kind == audit.KindAuthFailure {
		if r.Object == nil {
			r.Object = &audit.Object{}
		}
		r.Object.Str("remote", Other)
	}
	return g.next.Append(ctx, r)
}

// keyOf names whose repeats r is.
func (g *Guard) keyOf(r audit.Record) string {
	if f, ok := g.folds[r.Kind]; ok {
		return f.Key(r)
	}
	src := r.Object.Text("remote")
	if src == "" {
		src = "unknown"
	}
	return src
}

// summary takes the group's counted repeats as one record (nil if none).
// The caller holds g.mu.
func (g *Guard) summary(grp group, s *source) *audit.Record {
	if s.count == 0 {
		return nil
	}
	keep := []string{"route", "method", "reason"}
	if f, ok := g.folds[grp.kind]; ok {
		keep = f.Keep
	}
	sum := &audit.Object{}
	for _, k := range keep {
		if v, ok := s.sample.Object.Raw(k); ok {
			sum.RawMember(k, v)
		}
	}
	rec := &audit.Record{Kind: grp.kind, Object: sum}
	if grp.kind == audit.KindAuthFailure {
		sum.Str("remote", grp.key)
	} else if grp.key != Other {
		rec.AgentID, rec.SessionID = s.sample.AgentID, s.sample.SessionID
	}
	sum.Int("count", int64(s.count))
	sum.Str("first_ts", s.first.UTC().Format(time.RFC3339Nano))
	sum.Str("last_ts", s.last.UTC().Format(time.RFC3339Nano))
	s.count, s.sample = 0, audit.Record{}
	return rec
}

// Flush writes the counted repeats of every window that has ended (all of
// them when final) and forgets sources with nothing left to remember.
func (g *Guard) Flush(ctx context.Context, final bool) error {
	now := g.o.Now()
	var out []audit.Record
	g.mu.Lock()
	for grp, s := range g.sources {
		ended := now.Sub(s.windowStart) >= g.o.Window
		if ended || final {
			if r := g.summary(grp, s); r != nil {
				out = append(out, *r)
			}
		}
		if ended && s.count == 0 && (s.lim == nil || s.lim.TokensAt(now) >= float64(g.o.Burst)) {
			delete(g.sources, grp)
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
	n := 0
	for grp := range g.sources {
		if grp.kind == audit.KindAuthFailure {
			n++
		}
	}
	return n
}
