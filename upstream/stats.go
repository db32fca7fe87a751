package upstream

import (
	"sync"
	"sync/atomic"
)

// Stats counts failovers and circuit breaker openings by upstream name.
// A Set counts into its own Stats unless New is given one (WithStats): the
// app keeps one Stats across config reloads, which build new Sets, so that
// its metrics stay monotonic counters.
type Stats struct {
	mu sync.Mutex
	by map[string]*counters
}

type counters struct {
	failovers, opens atomic.Int64
}

// Counts are one upstream's counters.
type Counts struct {
	// Failovers: requests that moved on to another upstream after this
	// one failed (connect error, timeout, 429, 5xx).
	Failovers int64
	// BreakerOpens: times this upstream's circuit breaker opened (a failed
	// half-open probe opens it again, and counts).
	BreakerOpens int64
}

// NewStats returns empty counters.
func NewStats() *Stats { return &Stats{by: map[string]*counters{}} }

// of returns the counters of the upstream name, made on first use; the
// names are the configured upstreams', so the map stays small.
func (s *Stats) of(name string) *counters {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.by[name]
	if !ok {
		c = &counters{}
		s.by[name] = c
	}
	return c
}

// Failovers is the number of failovers from every upstream.
func (s *Stats) Failovers() int64 {
	var n int64
	s.each(func(_ string, c *counters) { n += c.failovers.Load() })
	return n
}

// BreakerOpens is the number of breaker openings of every upstream.
func (s *Stats) BreakerOpens() int64 {
	var n int64
	s.each(func(_ string, c *counters) { n += c.opens.Load() })
	return n
}

// ByUpstream returns each upstream's counts, by name.
func (s *Stats) ByUpstream() map[string]Counts {
	out := map[string]Counts{}
	s.each(func(name string, c *counters) {
		out[name] = Counts{Failovers: c.failovers.Load(), BreakerOpens: c.opens.Load()}
	})
	return out
}

func (s *Stats) each(f func(string, *counters)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, c := range s.by {
		f(name, c)
	}
}
