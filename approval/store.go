package approval

import (
	"context"
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
//     set scored by creation time, updated in the same transaction).
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
}

var (
	_ Store  = (*MemoryStore)(nil)
	_ Pruner = (*MemoryStore)(nil)
)

// NewMemoryStore returns an empty store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{records: map[string][]byte{}, escalated: map[string]time.Time{}}
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

// index keeps the escalated set in step; m.mu must be held.
func (m *MemoryStore) index(rec *Record) {
	if rec.State == StateEscalated {
		m.escalated[rec.ID] = rec.CreatedAt
	} else {
		delete(m.escalated, rec.ID)
	}
}

// Escalated implements Store.
func (m *MemoryStore) Escalated(_ context.Context) ([]*Record, error) {
	m.mu.Lock()
	type item struct {
		id string
		at time.Time
		b  []byte
	}
	items := make([]item, 0, len(m.escalated))
	for id, at := range m.escalated {
		items = append(items, item{id, at, m.records[id]})
	}
	m.mu.Unlock()
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
