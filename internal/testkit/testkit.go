// Package testkit holds the test doubles that several packages' tests
// share: an audit trail in memory, a log sink safe for concurrent
// writers, a settable clock, and signed OPA policy bundles with a server
// for them (bundle.go). Production code never imports it.
package testkit

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/sacpgw/gateway/audit"
)

// Trail is an audit trail in memory: it keeps what it is given and, set
// to fail, refuses every entry as an unavailable disk would.
type Trail struct {
	mu      sync.Mutex
	records []audit.Record
	fail    bool
}

// Append implements the front doors' Appender.
func (t *Trail) Append(_ context.Context, r audit.Record) (audit.Entry, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.fail {
		return audit.Entry{}, fmt.Errorf("%w: disk full", audit.ErrUnavailable)
	}
	t.records = append(t.records, r)
	return audit.Entry{Seq: int64(len(t.records)), Kind: r.Kind}, nil
}

// SummaryOf returns r's summary as the map a reader of the trail would
// decode, whole numbers as int, for tests to assert on.
func SummaryOf(r audit.Record) map[string]any {
	if r.Object == nil {
		return nil
	}
	m, _ := wholeNumbers(r.Object.Map()).(map[string]any)
	return m
}

// wholeNumbers turns the float64s of decoded JSON that are whole into
// ints, as the map-built summaries hold them.
func wholeNumbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = wholeNumbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = wholeNumbers(e)
		}
	case float64:
		if x == float64(int(x)) {
			return int(x)
		}
	}
	return v
}

// SetFail makes every later Append fail (or succeed again).
func (t *Trail) SetFail(v bool) {
	t.mu.Lock()
	t.fail = v
	t.mu.Unlock()
}

// Records returns a copy of what was appended, in order.
func (t *Trail) Records() []audit.Record {
	t.mu.Lock()
	defer t.mu.Unlock()
	return append([]audit.Record(nil), t.records...)
}

// Kinds lists the kinds appended, in order.
func (t *Trail) Kinds() []string {
	var out []string
	for _, r := range t.Records() {
		out = append(out, r.Kind)
	}
	return out
}

// ByKind returns the records of one kind, in order.
func (t *Trail) ByKind(kind string) []audit.Record {
	var out []audit.Record
	for _, r := range t.Records() {
		if r.Kind == kind {
			out = append(out, r)
		}
	}
	return out
}

// Last returns the summary of the last record of kind, or nil.
func (t *Trail) Last(kind string) map[string]any {
	rs := t.ByKind(kind)
	if len(rs) == 0 {
		return nil
	}
	return SummaryOf(rs[len(rs)-1])
}

// LogBuffer is a log sink safe for a server's goroutines.
type LogBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *LogBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *LogBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// Clock is a settable time source for the components that take one (a
// breaker's cooldown, an expiry): tests move time instead of sleeping.
type Clock struct {
	mu sync.Mutex
	t  time.Time
}

// NewClock returns a Clock at t.
func NewClock(t time.Time) *Clock { return &Clock{t: t} }

// Now is the clock's time.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// Advance moves the clock on by d.
func (c *Clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}
