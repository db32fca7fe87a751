// Package ledger keeps the gateway's usage per day for the last days: per
// agent and per team, the requests served, the tokens they used and what
// they cost. The limits stage adds to it; the usage page reads it.
//
// Adding never waits on the state backend: a Recorder sums in memory and
// flushes every few seconds (and on Close), so a slow Redis costs a
// request nothing and a day's counters take one write per subject and
// flush, whatever the traffic. The store is the state backend's: a Redis
// hash per day shared by every replica, or a file of state.dir for one
// replica; either survives a restart.
package ledger

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"
)

// Days is how many days of usage the store keeps and the page shows.
const Days = 30

// Counts are one subject's usage on one day.
type Counts struct {
	Requests int64 `json:"requests"`
	Tokens   int64 `json:"tokens"`
	// MicroUSD is the priced spend, in micro-dollars.
	MicroUSD int64 `json:"micro_usd"`
}

func (c *Counts) add(d Counts) {
	c.Requests += d.Requests
	c.Tokens += d.Tokens
	c.MicroUSD += d.MicroUSD
}

// book is counts by day, then subject.
type book map[string]map[string]Counts

// merge adds counts to day's.
func (b book) merge(day string, counts map[string]Counts) {
	m := b[day]
	if m == nil {
		m = make(map[string]Counts, len(counts))
		b[day] = m
	}
	for s, c := range counts {
		v := m[s]
		v.add(c)
		m[s] = v
	}
}

// IsZero reports whether nothing was counted.
func (c Counts) IsZero() bool { return c == Counts{} }

// Subjects: a subject is "agent:<id>" or "team:<name>" (agent ids and
// team names hold no ':').
const (
	AgentPrefix = "agent:"
	TeamPrefix  = "team:"
)

// Day is a UTC date as the store keys it, "2006-01-02".
func Day(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// Store holds the counts by day and subject.
type Store interface {
	// Add adds each subject's counts to day's.
	Add(ctx context.Context, day string, counts map[string]Counts) error
	// Read returns the counts of days, by day then subject (a day with
	// nothing counted may be absent).
	Read(ctx context.Context, days []string) (map[string]map[string]Counts, error)
}

// Recorder sums usage in memory and flushes it to a Store.
type Recorder struct {
	store Store
	log   *slog.Logger
	now   func() time.Time

	mu      sync.Mutex
	pending book
	// flushMu makes flushes one at a time, so a failed one's counts are
	// put back before the next takes them.
	flushMu sync.Mutex
}

// NewRecorder returns a recorder over store.
func NewRecorder(store Store, log *slog.Logger) *Recorder {
	return &Recorder{store: store, log: log, now: time.Now, pending: book{}}
}

// Add counts one request of agent (of team, "" for none). It never blocks
// on the store.
func (r *Recorder) Add(agent, team string, c Counts) {
	if r == nil {
		return
	}
	counts := map[string]Counts{AgentPrefix + agent: c}
	if team != "" {
		counts[TeamPrefix+team] = c
	}
	day := Day(r.now())
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending.merge(day, counts)
}

// maxPendingDays bounds what a store that keeps failing leaves in memory:
// older days are dropped (and logged) rather than grown without bound.
const maxPendingDays = 3

// Flush writes what was added since the last flush. What the store could
// not take is kept for the next flush.
func (r *Recorder) Flush(ctx context.Context) error {
	r.flushMu.Lock()
	defer r.flushMu.Unlock()
	r.mu.Lock()
	batch := r.pending
	r.pending = book{}
	r.mu.Unlock()
	var errs []error
	for day, counts := range batch {
		if err := r.store.Add(ctx, day, counts); err != nil {
			errs = append(errs, fmt.Errorf("usage of %s: %w", day, err))
			r.putBack(day, counts)
		}
	}
	return errors.Join(errs...)
}

// putBack returns a day's counts a flush could not write.
func (r *Recorder) putBack(day string, counts map[string]Counts) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pending.merge(day, counts)
	oldest := Day(r.now().AddDate(0, 0, -maxPendingDays))
	for d := range r.pending {
		if d < oldest {
			r.log.Warn("usage: dropped a day the store could not take", "day", d)
			delete(r.pending, d)
		}
	}
}

// FlushEvery is how often Run flushes.
const FlushEvery = 5 * time.Second

// Run flushes every interval until ctx ends, then once more.
func (r *Recorder) Run(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			r.flushLogged(fctx)
			cancel()
			return
		case <-t.C:
			fctx, cancel := context.WithTimeout(ctx, 5*time.Second)
			r.flushLogged(fctx)
			cancel()
		}
	}
}

func (r *Recorder) flushLogged(ctx context.Context) {
	if err := r.Flush(ctx); err != nil {
		r.log.Warn("usage: flush failed; kept for the next one", "error", err.Error())
	}
}

// Series is one subject's counts on each of the last days, oldest first.
type Series struct {
	Subject string
	Days    []DayCounts
	Total   Counts
}

// DayCounts is one day of a Series.
type DayCounts struct {
	Day string
	Counts
}

// LastDays returns the dates of the n days up to now's, oldest first.
func LastDays(now time.Time, n int) []string {
	out := make([]string, n)
	for i := range n {
		out[i] = Day(now.AddDate(0, 0, i-n+1))
	}
	return out
}

// Read returns the series of every subject counted in the last Days days
// (what this replica has not flushed yet included), by subject.
func (r *Recorder) Read(ctx context.Context) (map[string]*Series, error) {
	days := LastDays(r.now(), Days)
	stored, err := r.store.Read(ctx, days)
	if err != nil {
		return nil, fmt.Errorf("usage: %w", err)
	}
	if stored == nil {
		stored = book{}
	}
	r.mu.Lock()
	for day, counts := range r.pending {
		book(stored).merge(day, counts)
	}
	r.mu.Unlock()
	out := map[string]*Series{}
	for i, day := range days {
		for s, c := range stored[day] {
			se := out[s]
			if se == nil {
				se = &Series{Subject: s, Days: make([]DayCounts, len(days))}
				for j, d := range days {
					se.Days[j].Day = d
				}
				out[s] = se
			}
			se.Days[i].Counts.add(c)
			se.Total.add(c)
		}
	}
	return out, nil
}
