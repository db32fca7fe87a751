package workflow

import (
	"context"
	"errors"
	"slices"
	"sync"
	"time"
)

// ErrNotFound is a run that does not exist (or has expired).
var ErrNotFound = errors.New("workflow run not found")

// Store keeps runs where every replica can read them: this process's
// memory, or Redis. Every call takes a context with a deadline.
type Store interface {
	// Create stores a new run.
	Create(ctx context.Context, r *Run) error
	// Get returns a copy of the run.
	Get(ctx context.Context, id string) (*Run, error)
	// Update changes a run atomically: fn gets a copy, and what it leaves
	// is stored, unless it returns an error (then nothing changes).
	Update(ctx context.Context, id string, fn func(*Run) error) (*Run, error)
	// Lease makes owner the one replica that may advance run id for ttl
	// (taken when free, expired or already owner's: then it is renewed).
	Lease(ctx context.Context, id, owner string, ttl time.Duration) (bool, error)
	// Release gives up owner's lease.
	Release(ctx context.Context, id, owner string) error
	// Live lists the runs IN_PROGRESS, for a replica to take over the ones
	// whose lease lapsed.
	Live(ctx context.Context) ([]string, error)
}

// MemoryStore is the Store of a single replica. Runs that have ended are
// dropped after Retention, and the oldest ended ones first when more than
// MaxRuns are kept, so a long-lived gateway does not grow without bound.
type MemoryStore struct {
	mu     sync.Mutex
	runs   map[string]*Run
	leases map[string]lease
	now    func() time.Time
	// Retention and MaxRuns bound what is kept (defaults 7 days, 100,000).
	Retention time.Duration
	MaxRuns   int
	created   int
}

type lease struct {
	owner string
	until time.Time
}

// NewMemoryStore returns an empty store.
func NewMemoryStore() *MemoryStore {
	return &MemoryStore{runs: map[string]*Run{}, leases: map[string]lease{}, now: time.Now, Retention: DefaultRetention, MaxRuns: 100_000}
}

// Create implements Store.
func (s *MemoryStore) Create(_ context.Context, r *Run) error {
	c, err := r.clone()
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, dup := s.runs[r.ID]; dup {
		return errors.New("workflow run " + r.ID + " exists")
	}
	s.runs[r.ID] = c
	if s.created++; s.created%1024 == 0 || len(s.runs) > s.MaxRuns {
		s.prune()
	}
	return nil
}

// prune drops ended runs past their retention, then the oldest ended ones
// while over MaxRuns (live runs are never dropped).
func (s *MemoryStore) prune() {
	cutoff := s.now().Add(-s.Retention)
	var ended []*Run
	for id, r := range s.runs {
		switch {
		case !r.Status.Final():
		case r.EndedAt.Before(cutoff):
			delete(s.runs, id)
			delete(s.leases, id)
		default:
			ended = append(ended, r)
		}
	}
	if over := len(s.runs) - s.MaxRuns; over > 0 {
		slices.SortFunc(ended, func(a, b *Run) int { return a.EndedAt.Compare(b.EndedAt) })
		for _, r := range ended[:min(over, len(ended))] {
			delete(s.runs, r.ID)
			delete(s.leases, r.ID)
		}
	}
}

// Get implements Store.
func (s *MemoryStore) Get(_ context.Context, id string) (*Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[id]
	if !ok {
		return nil, ErrNotFound
	}
	return r.clone()
}

// Update implements Store.
func (s *MemoryStore) Update(_ context.Context, id string, fn func(*Run) error) (*Run, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.runs[id]
	if !ok {
		return nil, ErrNotFound
	}
	c, err := r.clone()
	if err != nil {
		return nil, err
	}
	if err := fn(c); err != nil {
		return nil, err
	}
	stored, err := c.clone()
	if err != nil {
		return nil, err
	}
	s.runs[id] = stored
	return c, nil
}

// Lease implements Store.
func (s *MemoryStore) Lease(_ context.Context, id, owner string, ttl time.Duration) (bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if l, ok := s.leases[id]; ok && l.owner != owner && now.Before(l.until) {
		return false, nil
	}
	s.leases[id] = lease{owner: owner, until: now.Add(ttl)}
	return true, nil
}

// Release implements Store.
func (s *MemoryStore) Release(_ context.Context, id, owner string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if l, ok := s.leases[id]; ok && l.owner == owner {
		delete(s.leases, id)
	}
	return nil
}

// Live implements Store.
func (s *MemoryStore) Live(context.Context) ([]string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var ids []string
	for id, r := range s.runs {
		if r.Status == InProgress {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids, nil
}
