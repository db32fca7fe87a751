package mailbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
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
	Origin        string          `json:"origin"` // "agent", "gateway" (an ERROR it generated) or "human" (a reviewer's answer)
	At            time.Time       `json:"at"`
	PayloadSHA256 string          `json:"payload_sha256"`
	Envelope      json.RawMessage `json:"envelope"` // the envelope as relayed
}

// History thread kinds: the index an Entry is listed under.
const (
	KeyWorkflow    = "workflow"
	KeyCorrelation = "correlation"
)

// History is the append-only record of relayed messages, by thread.
type History interface {
	// Append adds e under (KeyWorkflow, e.WorkflowID) and (KeyCorrelation,
	// e.CorrelationID), each when non-empty. Append-only: nothing is ever
	// changed or removed except by retention. ErrFull when a thread holds
	// MaxPerThread; then e is added to neither thread.
	Append(ctx context.Context, e Entry) error
	// List returns the thread's entries oldest first (at most limit, the
	// oldest ones; limit ≤0: all). An unknown thread is empty.
	List(ctx context.Context, kind, id string, limit int) ([]Entry, error)
	// Seen reports whether the thread already holds a message of sender
	// with messageID: POST /v1/messages refuses such a repeat. It is a
	// check before the append, not a lock: two identical messages racing
	// may both pass (recipients dedupe by message_id anyway).
	Seen(ctx context.Context, kind, id, sender, messageID string) (bool, error)
	// Retract removes e, which the caller appended moments ago, from its
	// threads, and forgets it for Seen: the message was refused after all
	// (the audit trail or the queue could not take it), so its sender may
	// send it again and the thread does not list what never went out. The
	// one exception to append-only; e must be the value given to Append.
	// An entry that is not there (expired, never appended) is no error.
	// (Seen is a check before the append, so two identical messages racing
	// may both be in a thread; retracting one forgets both for Seen.)
	Retract(ctx context.Context, e Entry) error
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
}

func (o HistoryOptions) withDefaults() HistoryOptions {
	if o.Retention <= 0 {
		o.Retention = DefaultRetention
	}
	if o.MaxPerThread <= 0 {
		o.MaxPerThread = DefaultMaxPerThread
	}
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

// MemoryHistory is a History in process memory. Threads expire Retention
// after their last append; expired threads are dropped lazily (when touched,
// and by a sweep at most once per sweepEvery).
type MemoryHistory struct {
	opt HistoryOptions
	now func() time.Time // injectable for tests

	mu        sync.Mutex
	threads   map[threadID]*memThread
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

// seenKey identifies a message in a thread: ids are the sender's to
// choose, so two senders may pick the same one.
func seenKey(sender, messageID string) string { return sender + "\x00" + messageID }

var _ History = (*MemoryHistory)(nil)

// sweepEvery bounds how often Append scans every thread for expiry.
const sweepEvery = time.Minute

// NewMemoryHistory returns an empty history, safe for concurrent use.
func NewMemoryHistory(o HistoryOptions) *MemoryHistory {
	return &MemoryHistory{opt: o.withDefaults(), now: time.Now, threads: make(map[threadID]*memThread)}
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

// Append implements History.
func (h *MemoryHistory) Append(ctx context.Context, e Entry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	now := h.now()
	e, err := normalize(e, now)
	if err != nil {
		return err
	}
	ts := e.threads()
	h.mu.Lock()
	defer h.mu.Unlock()
	if !now.Before(h.nextSweep) {
		for t, th := range h.threads {
			if !now.Before(th.expires) {
				delete(h.threads, t)
			}
		}
		h.nextSweep = now.Add(min(sweepEvery, h.opt.Retention))
	}
	for _, t := range ts {
		if th := h.liveLocked(t, now); th != nil && len(th.entries) >= h.opt.MaxPerThread {
			return fmt.Errorf("%w: %s thread %q holds %d entries", ErrFull, t.kind, t.id, len(th.entries))
		}
	}
	stored := &e
	for _, t := range ts {
		th := h.threads[t]
		if th == nil {
			th = &memThread{}
			h.threads[t] = th
		}
		th.entries = append(th.entries, stored)
		if th.ids == nil {
			th.ids = map[string]struct{}{}
		}
		th.ids[seenKey(e.Sender, e.MessageID)] = struct{}{}
		th.expires = now.Add(h.opt.Retention)
	}
	return nil
}

// Retract implements History.
func (h *MemoryHistory) Retract(ctx context.Context, e Entry) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	key := seenKey(e.Sender, e.MessageID)
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, t := range e.threads() {
		th := h.threads[t]
		if th == nil {
			continue
		}
		// The last one of that sender and id: the one just appended.
		for i := len(th.entries) - 1; i >= 0; i-- {
			if seenKey(th.entries[i].Sender, th.entries[i].MessageID) == key {
				th.entries = slices.Delete(th.entries, i, i+1)
				break
			}
		}
		delete(th.ids, key)
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
