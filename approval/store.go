package approval

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Store keeps approval records. It is owned by this package and kept small
// so that a Redis implementation maps onto it directly:
//
//   - records are serialised as JSON (one key per record);
//   - Create is SET NX;
//   - Update is an optimistic read-modify-write (WATCH/GET … MULTI/SET/EXEC,
//     retried on conflict), so fn may run more than once and must not have
//     side effects outside the record;
//   - Escalated reads a set of ids maintained beside the records (a sorted
//     set scored by creation time, updated in the same transaction), and
//     ApprovedBefore another (scored by the time of the approval);
//   - review sessions are keys of their own that expire by themselves
//     (SET NX with a TTL), so a reviewer signed in on one replica is signed
//     in on all of them.
type Store interface {
	// Create stores a new record; ErrExists if the id is taken.
	Create(ctx context.Context, rec *Record) error
	// Get returns a copy of the record; ErrNotFound if there is none.
	Get(ctx context.Context, id string) (*Record, error)
	// Update applies fn to a copy of the current record and stores the
	// result atomically with respect to other updates of the same id. If fn
	// returns an error nothing is stored and Update returns that error.
	Update(ctx context.Context, id string, fn func(*Record) error) (*Record, error)
	// Escalated returns the records in state ESCALATED, oldest first.
	Escalated(ctx context.Context) ([]*Record, error)
	// ApprovedBefore returns the records in state APPROVED whose approval
	// (approvedAt) is before t, oldest approval first: the ones the
	// approval expiry is due to look at.
	ApprovedBefore(ctx context.Context, t time.Time) ([]*Record, error)

	// CreateSession stores a review session under id for ttl (the
	// session's lifetime, after which the store forgets it by itself);
	// ErrExists if id is taken.
	CreateSession(ctx context.Context, id string, s *ReviewSession, ttl time.Duration) error
	// Session returns the review session id; ErrNotFound if there is none
	// (never created, deleted, or past its ttl).
	Session(ctx context.Context, id string) (*ReviewSession, error)
	// DeleteSession forgets the review session id; no error if absent.
	DeleteSession(ctx context.Context, id string) error
}

// ReviewSession is a person signed in to the review pages. A store keeps it
// under a hash of its id (sessionKey), never under the id itself, which is
// the cookie: whoever reads the store learns no usable session.
type ReviewSession struct {
	// Name and Admin are the principal (the admin, or a reviewer by name),
	// or, signed in with the organisation's provider, the person's e-mail
	// (else subject) and whether they are an admin.
	Name  string `json:"name"`
	Admin bool   `json:"admin"`
	// Via is "oidc" for a sign-in with the organisation's provider; empty
	// for a token's. Subject and Email are the ID token's; Groups its
	// groups claim, from which the roles are mapped again on every request
	// (a group taken off a role in gateway.yaml takes effect at once);
	// Reviewer, TeamOwner and TeamReviewer are the roles at sign-in.
	Via          string   `json:"via,omitempty"`
	Subject      string   `json:"subject,omitempty"`
	Email        string   `json:"email,omitempty"`
	Groups       []string `json:"groups,omitempty"`
	Reviewer     bool     `json:"reviewer,omitempty"`
	TeamOwner    []string `json:"team_owner,omitempty"`
	TeamReviewer []string `json:"team_reviewer,omitempty"`
	// CSRF is the token the session's forms carry.
	CSRF string `json:"csrf"`
	// Expires is when the session ends, by the Service's clock; the store's
	// own expiry (ttl) is the same moment by the store's.
	Expires time.Time `json:"expires"`
}

// sessionKey is the name under which a store keeps session id.
func sessionKey(id string) string {
	h := sha256.Sum256([]byte(id))
	return hex.EncodeToString(h[:])
}

// Pruner is implemented by stores that must drop old records themselves
// (the memory store; Redis would use key expiry instead). Run calls it.
type Pruner interface {
	// Prune deletes records in a terminal state last updated before t.
	Prune(ctx context.Context, before time.Time) (int, error)
}

var (
	// ErrNotFound means there is no record with the id.
	ErrNotFound = errors.New("approval request not found")
	// ErrExists means a record with the id already exists.
	ErrExists = errors.New("approval request already exists")
)

// MemoryStore is a Store for a single replica. Records are held as JSON, as
// in Redis, so that callers never share memory with the store and a record
// that would not survive serialisation fails here first.
type MemoryStore struct {
	mu        sync.Mutex
	records   map[string][]byte
	escalated map[string]time.Time // id → created_at
	approved  map[string]time.Time // id → approvedAt
	sessions  map[string]memSession
}

// memSession is a stored session and when the store forgets it (by the
// process clock, as Redis would).
type memSession struct {
	b        []byte
	deadline time.Time
}

var (
	_ Store  = (*MemoryStore)(nil)
	_ Pruner = (*MemoryStore)(nil)
)

// NewMemoryStore returns an empty store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{records: map[string][]byte{}, escalated: map[string]time.Time{}, approved: map[string]time.Time{},
		sessions: map[string]memSession{}}
}

// Create implements Store.
func (m *MemoryStore) Create(_ context.Context, rec *Record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode record %s: %w", rec.ID, err)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.records[rec.ID]; ok {
		return fmt.Errorf("%w: %s", ErrExists, rec.ID)
	}
	m.records[rec.ID] = b
	m.index(rec)
	return nil
}

// Get implements Store.
func (m *MemoryStore) Get(_ context.Context, id string) (*Record, error) {
	m.mu.Lock()
	b, ok := m.records[id]
	m.mu.Unlock()
	if !ok {
		return nil, ErrNotFound
	}
	return decodeRecord(b)
}

// Update implements Store.
func (m *MemoryStore) Update(_ context.Context, id string, fn func(*Record) error) (*Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	b, ok := m.records[id]
	if !ok {
		return nil, ErrNotFound
	}
	rec, err := decodeRecord(b)
	if err != nil {
		return nil, err
	}
	if err := fn(rec); err != nil {
		return nil, err
	}
	rec.ID = id // fn must not move a record
	nb, err := json.Marshal(rec)
	if err != nil {
		return nil, fmt.Errorf("encode record %s: %w", id, err)
	}
	m.records[id] = nb
	m.index(rec)
	return rec, nil
}

// index keeps the escalated and approved sets in step; m.mu must be held.
func (m *MemoryStore) index(rec *Record) {
	if rec.State == StateEscalated {
		m.escalated[rec.ID] = rec.CreatedAt
	} else {
		delete(m.escalated, rec.ID)
	}
	if rec.State == StateApproved {
		m.approved[rec.ID] = approvedAt(rec)
	} else {
		delete(m.approved, rec.ID)
	}
}

// ApprovedBefore implements Store.
func (m *MemoryStore) ApprovedBefore(_ context.Context, t time.Time) ([]*Record, error) {
	m.mu.Lock()
	var items []indexed
	for id, at := range m.approved {
		if at.Before(t) {
			items = append(items, indexed{id, at, m.records[id]})
		}
	}
	m.mu.Unlock()
	return decodeOldestFirst(items)
}

// CreateSession implements Store.
func (m *MemoryStore) CreateSession(_ context.Context, id string, s *ReviewSession, ttl time.Duration) error {
	b, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("encode session: %w", err)
	}
	k := sessionKey(id)
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.sessions[k]; ok && time.Now().Before(old.deadline) {
		return ErrExists
	}
	m.sessions[k] = memSession{b: b, deadline: time.Now().Add(ttl)}
	return nil
}

// Session implements Store.
func (m *MemoryStore) Session(_ context.Context, id string) (*ReviewSession, error) {
	k := sessionKey(id)
	m.mu.Lock()
	ms, ok := m.sessions[k]
	if ok && !time.Now().Before(ms.deadline) {
		delete(m.sessions, k)
		ok = false
	}
	m.mu.Unlock()
	if !ok {
		return nil, ErrNotFound
	}
	var s ReviewSession
	if err := json.Unmarshal(ms.b, &s); err != nil {
		return nil, fmt.Errorf("decode session: %w", err)
	}
	return &s, nil
}

// DeleteSession implements Store.
func (m *MemoryStore) DeleteSession(_ context.Context, id string) error {
	m.mu.Lock()
	delete(m.sessions, sessionKey(id))
	m.mu.Unlock()
	return nil
}

// PruneSessions drops the sessions that ended by now (the Service's
// clock) or by their ttl, and returns how many it dropped. Redis needs no
// such thing: its keys expire.
func (m *MemoryStore) PruneSessions(_ context.Context, now time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	wall := time.Now()
	for k, ms := range m.sessions {
		var s ReviewSession
		if err := json.Unmarshal(ms.b, &s); err != nil || !now.Before(s.Expires) || !wall.Before(ms.deadline) {
			delete(m.sessions, k)
			n++
		}
	}
	return n, nil
}

// Escalated implements Store.
func (m *MemoryStore) Escalated(_ context.Context) ([]*Record, error) {
	m.mu.Lock()
	items := make([]indexed, 0, len(m.escalated))
	for id, at := range m.escalated {
		items = append(items, indexed{id, at, m.records[id]})
	}
	m.mu.Unlock()
	return decodeOldestFirst(items)
}

// indexed is a record of one of the memory store's time indexes: its id,
// its time there and its stored bytes.
type indexed struct {
	id string
	at time.Time
	b  []byte
}

// decodeOldestFirst decodes the records oldest first (ties by id), outside
// the store's lock.
func decodeOldestFirst(items []indexed) ([]*Record, error) {
	sort.Slice(items, func(i, j int) bool {
		if !items[i].at.Equal(items[j].at) {
			return items[i].at.Before(items[j].at)
		}
		return items[i].id < items[j].id
	})
	out := make([]*Record, 0, len(items))
	for _, it := range items {
		rec, err := decodeRecord(it.b)
		if err != nil {
			return nil, err
		}
		out = append(out, rec)
	}
	return out, nil
}

// Prune implements Pruner.
func (m *MemoryStore) Prune(_ context.Context, before time.Time) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for id, b := range m.records {
		var head struct {
			State     State     `json:"state"`
			UpdatedAt time.Time `json:"updated_at"`
		}
		if err := json.Unmarshal(b, &head); err != nil {
			return n, fmt.Errorf("decode record %s: %w", id, err)
		}
		if head.State.Terminal() && head.UpdatedAt.Before(before) {
			delete(m.records, id)
			n++
		}
	}
	return n, nil
}

func decodeRecord(b []byte) (*Record, error) {
	var rec Record
	if err := json.Unmarshal(b, &rec); err != nil {
		return nil, fmt.Errorf("decode record: %w", err)
	}
	return &rec, nil
}
