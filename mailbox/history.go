package mailbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"
)

// Entry is one message in the history.
type Entry struct {
	MessageID     string          `json:"message_id"`
	Type          string          `json:"message_type"`
	Format        string          `json:"format"`
	Sender        string          `json:"sender"`
	Recipients    []string        `json:"recipients"` // every agent it was or will be handed to
	Broadcast     bool            `json:"broadcast,omitempty"`
	Action        string          `json:"action,omitempty"`
	WorkflowID    string          `json:"workflow_id,omitempty"`
	CorrelationID string          `json:"correlation_id,omitempty"`
	InReplyTo     string          `json:"in_reply_to,omitempty"`
	Origin        string          `json:"origin"`                // "agent", "gateway" (an ERROR it generated) or "human" (a reviewer's answer)
	Group         string          `json:"group,omitempty"`       // a group send's recipient type: one entry per delivery
	DeliveryID    string          `json:"delivery_id,omitempty"` // the queued delivery the entry records, when it records one
	At            time.Time       `json:"at"`
	PayloadSHA256 string          `json:"payload_sha256"`
	Envelope      json.RawMessage `json:"envelope"` // the envelope as relayed
}

// History thread kinds: the index an Entry is listed under.
const (
	KeyWorkflow    = "workflow"
	KeyCorrelation = "correlation"
)

// History is the append-only record of relayed messages, by thread, and
// the state of the threads that wait for a person.
type History interface {
	// Append adds the entries of one message under (KeyWorkflow,
	// WorkflowID) and (KeyCorrelation, CorrelationID), each when
	// non-empty; the entries must share those ids (a group send records
	// one entry per delivery). Append-only: nothing is ever changed or
	// removed except by retention and Retract.
	//
	// In the same atomic step it refuses the whole append with
	// ErrDuplicate when one of the threads already holds a message of an
	// entry's sender with the entry's message_id (entries of one append
	// may share theirs), and with ErrFull when a thread would hold more
	// than MaxPerThread. A refused append adds nothing anywhere. Two
	// replicas appending the same message at once: exactly one succeeds.
	Append(ctx context.Context, es ...Entry) error
	// List returns the thread's entries oldest first (at most limit, the
	// oldest ones; limit ≤0: all). An unknown thread is empty.
	List(ctx context.Context, kind, id string, limit int) ([]Entry, error)
	// Seen reports whether the thread already holds a message of sender
	// with messageID. It is an early check only (a better refusal before
	// any work is done): Append decides.
	Seen(ctx context.Context, kind, id, sender, messageID string) (bool, error)
	// Retract removes entries the caller appended moments ago from their
	// threads, and forgets them for Seen and Append's repeat check: the
	// message was refused after all (the audit trail or the queue could
	// not take it), so its sender may send it again and the thread does
	// not list what never went out. The one exception to append-only; the
	// entries must be the values given to Append. An entry that is not
	// there (expired, never appended) is no error.
	Retract(ctx context.Context, es ...Entry) error

	// Suspend marks the thread s.Kind/s.ID as waiting for a person,
	// unless it is already: it returns the thread's suspension (s, or the
	// one already there) and whether s was stored. The mark expires with
	// the thread's retention.
	Suspend(ctx context.Context, s Suspension) (Suspension, bool, error)
	// Suspended returns the thread's suspension, if it has one.
	Suspended(ctx context.Context, kind, id string) (Suspension, bool, error)
	// Resume lifts the thread's suspension if it is the one of
	// escalationID, and reports whether it did: a decision on an older
	// escalation cannot lift a newer suspension.
	Resume(ctx context.Context, kind, id, escalationID string) (bool, error)
}

// Suspension is a thread waiting for a person: one of its messages said
// WAITING_FOR_HUMAN and an escalation was opened. Every replica reads it
// from the history's backend.
type Suspension struct {
	Kind         string    `json:"kind"` // KeyWorkflow or KeyCorrelation
	ID           string    `json:"id"`
	EscalationID string    `json:"escalation_id"`
	MessageID    string    `json:"message_id"` // the message that suspended it
	Sender       string    `json:"sender"`     // its sender, who waits for the answer
	At           time.Time `json:"at"`
}

// check refuses a suspension the history could not find again.
func (s Suspension) check() error {
	if err := checkKind(s.Kind); err != nil {
		return err
	}
	if s.ID == "" || s.EscalationID == "" {
		return errors.New("mailbox: suspension needs a thread id and an escalation id")
	}
	return nil
}

// Defaults of HistoryOptions.
const (
	DefaultRetention    = 7 * 24 * time.Hour
	DefaultMaxPerThread = 10000
)

// HistoryOptions configures a history. Zero values take the defaults.
type HistoryOptions struct {
	Retention    time.Duration // how long a thread is kept after its last append; default 7 days
	MaxPerThread int           // entries per thread; default 10000
	Prefix       string        // redis only, default DefaultRedisPrefix
	// Timeout bounds each Redis call when the caller's context has no
	// sooner deadline (redis only); default DefaultRedisTimeout.
	Timeout time.Duration
}

func (o HistoryOptions) withDefaults() HistoryOptions {
	o.Retention = orDefault(o.Retention, DefaultRetention)
	o.MaxPerThread = orDefault(o.MaxPerThread, DefaultMaxPerThread)
	o.Timeout = orDefault(o.Timeout, DefaultRedisTimeout)
	if o.Prefix == "" {
		o.Prefix = DefaultRedisPrefix
	}
	return o
}

// errUnknownKind is returned by List for a kind other than KeyWorkflow and
// KeyCorrelation.
var errUnknownKind = errors.New("mailbox: unknown history thread kind")

func checkKind(kind string) error {
	if kind != KeyWorkflow && kind != KeyCorrelation {
		return fmt.Errorf("%w %q", errUnknownKind, kind)
	}
	return nil
}

// threadID is one thread an Entry belongs to.
type threadID struct{ kind, id string }

// threads lists the threads e is appended to.
func (e *Entry) threads() []threadID {
	t := make([]threadID, 0, 2)
	if e.WorkflowID != "" {
		t = append(t, threadID{KeyWorkflow, e.WorkflowID})
	}
	if e.CorrelationID != "" {
		t = append(t, threadID{KeyCorrelation, e.CorrelationID})
	}
	return t
}

// normalize checks e and makes the history's own copy of it. The envelope
// must be JSON: a listing that cannot be marshalled would break the whole
// thread's GET.
func normalize(e Entry, now time.Time) (Entry, error) {
	if len(e.Envelope) == 0 {
		e.Envelope = nil
	} else if !json.Valid(e.Envelope) {
		return Entry{}, fmt.Errorf("mailbox: history entry %s: envelope is not JSON", e.MessageID)
	}
	if e.At.IsZero() {
		e.At = now
	}
	e.At = e.At.Round(0) // no monotonic reading: it would not survive Redis
	return cloneEntry(e), nil
}

// cloneEntry copies e's slices, so neither the appender nor a lister can
// change a stored entry.
func cloneEntry(e Entry) Entry {
	e.Recipients = slices.Clone(e.Recipients)
	e.Envelope = bytes.Clone(e.Envelope)
	return e
}

// batch is the entries of one Append or Retract, checked: the history's
// own copies, the threads they share, and their distinct seen keys. nil
// entries when there is nothing to do.
func batch(es []Entry, now time.Time) ([]Entry, []threadID, []string, error) {
	if len(es) == 0 {
		return nil, nil, nil, nil
	}
	out := make([]Entry, 0, len(es))
	keys := make([]string, 0, 1)
	for i, e := range es {
		// One message: the threads are the same for every delivery, so the
		// whole append is one step on one set of threads.
		if i > 0 && (e.WorkflowID != es[0].WorkflowID || e.CorrelationID != es[0].CorrelationID) {
			return nil, nil, nil, fmt.Errorf("mailbox: history entries %s and %s of one append are in different threads", es[0].MessageID, e.MessageID)
		}
		n, err := normalize(e, now)
		if err != nil {
			return nil, nil, nil, err
		}
		out = append(out, n)
		if k := seenKey(n.Sender, n.MessageID); !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return out, out[0].threads(), keys, nil
}

// duplicateError is ErrDuplicate for one thread.
func duplicateError(t threadID, seen string) error {
	sender, id, _ := strings.Cut(seen, "\x00")
	return fmt.Errorf("%w: %s thread %q already holds message %q of %s", ErrDuplicate, t.kind, t.id, id, sender)
}

// MemoryHistory is a History in process memory. Threads expire Retention
// after their last append; expired threads are dropped lazily (when touched,
// and by a sweep at most once per sweepEvery).
type MemoryHistory struct {
	opt HistoryOptions
	now func() time.Time // injectable for tests

	mu        sync.Mutex
	threads   map[threadID]*memThread
	suspended map[threadID]memSuspension
	nextSweep time.Time
}

// memThread is one thread. Its entries are never modified once stored, so
// an entry in both a workflow and a correlation thread is stored once.
type memThread struct {
	entries []*Entry
	// ids holds seenKey of every entry.
	ids     map[string]struct{}
	expires time.Time
}

// memSuspension is a suspension and when it expires.
type memSuspension struct {
	s       Suspension
	expires time.Time
}

// seenKey identifies a message in a thread: ids are the sender's to
// choose, so two senders may pick the same one.
func seenKey(sender, messageID string) string { return sender + "\x00" + messageID }

var _ History = (*MemoryHistory)(nil)

// sweepEvery bounds how often Append scans every thread for expiry.
const sweepEvery = time.Minute

// NewMemoryHistory returns an empty history, safe for concurrent use.
func NewMemoryHistory(o HistoryOptions) *MemoryHistory {
	return &MemoryHistory{opt: o.withDefaults(), now: time.Now, threads: make(map[threadID]*memThread),
		suspended: make(map[threadID]memSuspension)}
}

// liveLocked returns the thread t unless it has expired (then it is dropped).
func (h *MemoryHistory) liveLocked(t threadID, now time.Time) *memThread {
	th := h.threads[t]
	if th != nil && !now.Before(th.expires) {
		delete(h.threads, t)
		return nil
	}
	return th
}

// sweepLocked drops expired threads and suspensions, at most once per
// sweepEvery.
func (h *MemoryHistory) sweepLocked(now time.Time) {
	if now.Before(h.nextSweep) {
		return
	}
	for t, th := range h.threads {
		if !now.Before(th.expires) {
			delete(h.threads, t)
		}
	}
	for t, s := range h.suspended {
		if !now.Before(s.expires) {
			delete(h.suspended, t)
		}
	}
	h.nextSweep = now.Add(min(sweepEvery, h.opt.Retention))
}

// Append implements History. The repeat check, the capacity check and the
// append happen under one lock: that is what makes them atomic.
func (h *MemoryHistory) Append(ctx context.Context, es ...Entry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := h.now()
	es, ts, keys, err := batch(es, now)
	if err != nil || len(ts) == 0 {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sweepLocked(now)
	for _, t := range ts {
		th := h.liveLocked(t, now)
		if th == nil {
			continue
		}
		for _, k := range keys {
			if _, dup := th.ids[k]; dup {
				return duplicateError(t, k)
			}
		}
		if len(th.entries)+len(es) > h.opt.MaxPerThread {
			return fmt.Errorf("%w: %s thread %q holds %d entries", ErrFull, t.kind, t.id, len(th.entries))
		}
	}
	stored := make([]*Entry, len(es))
	for i := range es {
		stored[i] = &es[i]
	}
	for _, t := range ts {
		th := h.threads[t]
		if th == nil {
			th = &memThread{ids: map[string]struct{}{}}
			h.threads[t] = th
		}
		th.entries = append(th.entries, stored...)
		for _, k := range keys {
			th.ids[k] = struct{}{}
		}
		th.expires = now.Add(h.opt.Retention)
	}
	return nil
}

// Retract implements History.
func (h *MemoryHistory) Retract(ctx context.Context, es ...Entry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	es, ts, keys, err := batch(es, h.now())
	if err != nil || len(ts) == 0 {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, t := range ts {
		th := h.threads[t]
		if th == nil {
			continue
		}
		// The last ones of that sender and id: the ones just appended.
		for _, e := range es {
			key := seenKey(e.Sender, e.MessageID)
			for i := len(th.entries) - 1; i >= 0; i-- {
				if seenKey(th.entries[i].Sender, th.entries[i].MessageID) == key {
					th.entries = slices.Delete(th.entries, i, i+1)
					break
				}
			}
		}
		for _, k := range keys {
			delete(th.ids, k)
		}
	}
	return nil
}

// List implements History.
func (h *MemoryHistory) List(ctx context.Context, kind, id string, limit int) ([]Entry, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := checkKind(kind); err != nil {
		return nil, err
	}
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	th := h.liveLocked(threadID{kind, id}, now)
	if th == nil {
		return []Entry{}, nil
	}
	n := len(th.entries)
	if limit > 0 && limit < n {
		n = limit
	}
	out := make([]Entry, n)
	for i := range out {
		out[i] = cloneEntry(*th.entries[i])
	}
	return out, nil
}

// Seen implements History.
func (h *MemoryHistory) Seen(ctx context.Context, kind, id, sender, messageID string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := checkKind(kind); err != nil {
		return false, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	th := h.liveLocked(threadID{kind, id}, h.now())
	if th == nil {
		return false, nil
	}
	_, ok := th.ids[seenKey(sender, messageID)]
	return ok, nil
}

// suspensionLocked returns the thread's live suspension.
func (h *MemoryHistory) suspensionLocked(t threadID, now time.Time) (Suspension, bool) {
	s, ok := h.suspended[t]
	if ok && !now.Before(s.expires) {
		delete(h.suspended, t)
		return Suspension{}, false
	}
	return s.s, ok
}

// Suspend implements History.
func (h *MemoryHistory) Suspend(ctx context.Context, s Suspension) (Suspension, bool, error) {
	if err := ctx.Err(); err != nil {
		return Suspension{}, false, err
	}
	if err := s.check(); err != nil {
		return Suspension{}, false, err
	}
	now := h.now()
	if s.At.IsZero() {
		s.At = now
	}
	s.At = s.At.Round(0)
	t := threadID{s.Kind, s.ID}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sweepLocked(now)
	if cur, ok := h.suspensionLocked(t, now); ok {
		return cur, false, nil
	}
	h.suspended[t] = memSuspension{s: s, expires: now.Add(h.opt.Retention)}
	return s, true, nil
}

// Suspended implements History.
func (h *MemoryHistory) Suspended(ctx context.Context, kind, id string) (Suspension, bool, error) {
	if err := ctx.Err(); err != nil {
		return Suspension{}, false, err
	}
	if err := checkKind(kind); err != nil {
		return Suspension{}, false, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.suspensionLocked(threadID{kind, id}, h.now())
	return s, ok, nil
}

// Resume implements History.
func (h *MemoryHistory) Resume(ctx context.Context, kind, id, escalationID string) (bool, error) {
	if err := ctx.Err(); err != nil {
		return false, err
	}
	if err := checkKind(kind); err != nil {
		return false, err
	}
	t := threadID{kind, id}
	h.mu.Lock()
	defer h.mu.Unlock()
	s, ok := h.suspensionLocked(t, h.now())
	if !ok || s.EscalationID != escalationID {
		return false, nil
	}
	delete(h.suspended, t)
	return true, nil
}
