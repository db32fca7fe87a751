package proxy

import (
	"container/list"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sacpgw/gateway/limit"
)

// ResponseStore keeps the Responses API's conversations, each under the
// agent that had it and the response id the gateway gave it, for a TTL.
// The agent is part of the key, never a filter applied after a read: one
// agent's Get cannot reach another's conversation, whatever id it names.
type ResponseStore interface {
	// Get returns what Put kept for (agent, id), or ErrResponseNotFound
	// when nothing is kept (never kept, expired, evicted, another
	// agent's). Any other error is the backend's (apierror.
	// ErrStateUnavailable when it could not be reached).
	Get(ctx context.Context, agent, id string) ([]byte, error)
	// Put keeps conv for (agent, id) for ttl, replacing what was kept.
	Put(ctx context.Context, agent, id string, conv []byte, ttl time.Duration) error
}

// ErrResponseNotFound is a response the store does not keep.
var ErrResponseNotFound = errors.New("response not found")

// DefaultResponseStoreTimeout bounds each call of a RedisResponseStore
// when its caller gives none.
const DefaultResponseStoreTimeout = 2 * time.Second

// Bounds of a MemoryResponseStore when its options set none.
const (
	DefaultMemoryResponseEntries = 10000
	DefaultMemoryResponseBytes   = 256 << 20
)

// MemoryResponseStoreOptions bound a MemoryResponseStore.
type MemoryResponseStoreOptions struct {
	// MaxEntries and MaxBytes bound what is kept (zero: the defaults);
	// when a Put would pass either, the oldest entries go first.
	MaxEntries int
	MaxBytes   int
	// Now is the clock (nil: time.Now), for tests of expiry.
	Now func() time.Time
}

// MemoryResponseStore keeps conversations in this process: each replica
// its own, lost at a restart. It is bounded in entries and bytes, the
// oldest evicted first (an evicted conversation is not found, as an
// expired one), and an entry expires at its TTL.
type MemoryResponseStore struct {
	mu         sync.Mutex
	maxEntries int
	maxBytes   int
	now        func() time.Time
	used       int
	entries    map[responseKey]*list.Element
	// order holds the entries oldest first: with one TTL for all, the
	// front also expires first.
	order *list.List
}

type responseKey struct{ agent, id string }

type memoryResponse struct {
	key     responseKey
	conv    []byte
	expires time.Time
}

var (
	_ ResponseStore = (*MemoryResponseStore)(nil)
	_ ResponseStore = (*RedisResponseStore)(nil)
)

// NewMemoryResponseStore returns an empty store.
func NewMemoryResponseStore(o MemoryResponseStoreOptions) *MemoryResponseStore {
	s := &MemoryResponseStore{maxEntries: o.MaxEntries, maxBytes: o.MaxBytes, now: o.Now,
		entries: map[responseKey]*list.Element{}, order: list.New()}
	if s.maxEntries <= 0 {
		s.maxEntries = DefaultMemoryResponseEntries
	}
	if s.maxBytes <= 0 {
		s.maxBytes = DefaultMemoryResponseBytes
	}
	if s.now == nil {
		s.now = time.Now
	}
	return s
}

// Get implements ResponseStore.
func (s *MemoryResponseStore) Get(_ context.Context, agent, id string) ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.entries[responseKey{agent, id}]
	if !ok {
		return nil, ErrResponseNotFound
	}
	r := e.Value.(*memoryResponse)
	if !s.now().Before(r.expires) {
		s.remove(e)
		return nil, ErrResponseNotFound
	}
	return slices.Clone(r.conv), nil
}

// Put implements ResponseStore. A conversation larger than the store's
// whole size is not kept (an error): it would evict everything else.
func (s *MemoryResponseStore) Put(_ context.Context, agent, id string, conv []byte, ttl time.Duration) error {
	if len(conv) > s.maxBytes {
		return fmt.Errorf("responses: a conversation of %d bytes is over the store's %d", len(conv), s.maxBytes)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	k := responseKey{agent, id}
	if e, ok := s.entries[k]; ok {
		s.remove(e)
	}
	now := s.now()
	// Expired entries go first, then the oldest while over a bound.
	for e := s.order.Front(); e != nil; e = s.order.Front() {
		r := e.Value.(*memoryResponse)
		if now.Before(r.expires) && len(s.entries) < s.maxEntries && s.used+len(conv) <= s.maxBytes {
			break
		}
		s.remove(e)
	}
	r := &memoryResponse{key: k, conv: slices.Clone(conv), expires: now.Add(ttl)}
	s.entries[k] = s.order.PushBack(r)
	s.used += len(conv)
	return nil
}

// Len is the number of entries kept (expired ones included until they are
// swept), for tests and metrics.
func (s *MemoryResponseStore) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

func (s *MemoryResponseStore) remove(e *list.Element) {
	r := s.order.Remove(e).(*memoryResponse)
	delete(s.entries, r.key)
	s.used -= len(r.conv)
}

// DefaultResponseKeyPrefix is where a RedisResponseStore keeps its keys:
// <prefix><agent>:<response id>.
const DefaultResponseKeyPrefix = "gw:resp:"

// RedisResponseStore keeps conversations in Redis, shared by the
// replicas: one string key per response, written with SET ... PX so that
// Redis expires it. Every call has a deadline, whatever the caller's
// context says.
type RedisResponseStore struct {
	client  redis.UniversalClient
	prefix  string
	timeout time.Duration
}

// NewRedisResponseStore returns a store on client (the caller's, which
// it never closes). prefix "" is DefaultResponseKeyPrefix; timeout bounds
// every call (zero: DefaultResponseStoreTimeout).
func NewRedisResponseStore(client redis.UniversalClient, prefix string, timeout time.Duration) *RedisResponseStore {
	if prefix == "" {
		prefix = DefaultResponseKeyPrefix
	}
	if timeout <= 0 {
		timeout = DefaultResponseStoreTimeout
	}
	return &RedisResponseStore{client: client, prefix: prefix, timeout: timeout}
}

// key is the Redis key of (agent, id). Neither may hold the separator:
// agent names cannot (internal/names), and the gateway looks up only ids
// of the form it mints (validResponseID), so no (agent, id) pair can name
// another's key.
func (s *RedisResponseStore) key(agent, id string) string {
	return s.prefix + agent + ":" + id
}

// Get implements ResponseStore.
func (s *RedisResponseStore) Get(ctx context.Context, agent, id string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	b, err := s.client.Get(ctx, s.key(agent, id)).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, ErrResponseNotFound
	case err != nil:
		return nil, fmt.Errorf("responses: get %s: %w", id, limit.MarkUnavailable(err))
	}
	return b, nil
}

// Put implements ResponseStore.
func (s *RedisResponseStore) Put(ctx context.Context, agent, id string, conv []byte, ttl time.Duration) error {
	ms := ttl.Milliseconds()
	if ms < 1 {
		return fmt.Errorf("responses: put %s: a TTL under a millisecond (%v)", id, ttl)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.client.Do(ctx, "SET", s.key(agent, id), conv, "PX", ms).Err(); err != nil {
		return fmt.Errorf("responses: put %s: %w", id, limit.MarkUnavailable(err))
	}
	return nil
}
