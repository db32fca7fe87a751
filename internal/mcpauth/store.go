package mcpauth

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Store keeps the authorization server's records, each under a kind
// ("client", "code", ...) and a key, until its TTL ends. Secrets (codes,
// tokens) are keyed by their SHA-256 (Key), never stored themselves. Take
// removes what it returns, so of two replicas spending one code or one
// refresh token at once exactly one gets it.
type Store interface {
	Put(ctx context.Context, kind, key string, v []byte, ttl time.Duration) error
	Get(ctx context.Context, kind, key string) ([]byte, bool, error)
	Take(ctx context.Context, kind, key string) ([]byte, bool, error)
	Delete(ctx context.Context, kind, key string) error
}

// ErrFull is the memory store's answer when it holds MaxMemoryRecords
// live records: new registrations and grants are refused rather than
// memory spent without bound.
var ErrFull = errors.New("mcpauth: the store is full")

// MaxMemoryRecords bounds the memory store.
const MaxMemoryRecords = 100_000

// Put stores v as JSON.
func Put[T any](ctx context.Context, s Store, kind, key string, v T, ttl time.Duration) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("mcpauth: %s: %w", kind, err)
	}
	return s.Put(ctx, kind, key, b, ttl)
}

// Get reads the JSON record of kind and key.
func Get[T any](ctx context.Context, s Store, kind, key string) (T, bool, error) {
	return decode[T](kind)(s.Get(ctx, kind, key))
}

// Take reads and removes the JSON record of kind and key.
func Take[T any](ctx context.Context, s Store, kind, key string) (T, bool, error) {
	return decode[T](kind)(s.Take(ctx, kind, key))
}

func decode[T any](kind string) func([]byte, bool, error) (T, bool, error) {
	return func(b []byte, ok bool, err error) (T, bool, error) {
		var v T
		if err != nil || !ok {
			return v, false, err
		}
		if err := json.Unmarshal(b, &v); err != nil {
			return v, false, fmt.Errorf("mcpauth: %s record unreadable: %w", kind, err)
		}
		return v, true, nil
	}
}

// MemoryStore keeps the records in this process: a restart forgets every
// client and token (people sign in again), and replicas do not share them.
type MemoryStore struct {
	mu  sync.Mutex
	m   map[string]memRecord
	now func() time.Time
}

type memRecord struct {
	v       []byte
	expires time.Time
}

var _ Store = (*MemoryStore)(nil)

// NewMemoryStore returns an empty store.
func NewMemoryStore() *MemoryStore { return &MemoryStore{m: map[string]memRecord{}, now: time.Now} }

// Put implements Store.
func (s *MemoryStore) Put(_ context.Context, kind, key string, v []byte, ttl time.Duration) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if len(s.m) >= MaxMemoryRecords {
		for k, r := range s.m {
			if !now.Before(r.expires) {
				delete(s.m, k)
			}
		}
		if len(s.m) >= MaxMemoryRecords {
			return ErrFull
		}
	}
	s.m[kind+":"+key] = memRecord{v: v, expires: now.Add(ttl)}
	return nil
}

// Get implements Store.
func (s *MemoryStore) Get(_ context.Context, kind, key string) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[kind+":"+key]
	if !ok || !s.now().Before(r.expires) {
		return nil, false, nil
	}
	return r.v, true, nil
}

// Take implements Store.
func (s *MemoryStore) Take(_ context.Context, kind, key string) ([]byte, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.m[kind+":"+key]
	delete(s.m, kind+":"+key)
	if !ok || !s.now().Before(r.expires) {
		return nil, false, nil
	}
	return r.v, true, nil
}

// Delete implements Store.
func (s *MemoryStore) Delete(_ context.Context, kind, key string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, kind+":"+key)
	return nil
}

// DefaultRedisPrefix is where the records live in Redis.
const DefaultRedisPrefix = "{gw:oauth}:"

// RedisStore keeps the records in Redis, shared by the replicas: a token
// issued through one is honoured by all, and revoked on all at once. Each
// record is one string key Redis expires at its TTL; Take is GETDEL
// (Redis 6.2 or later). Every call is bounded by the store's timeout, and
// any error of Redis is an error, never a record.
type RedisStore struct {
	client  redis.UniversalClient
	prefix  string
	timeout time.Duration
}

var _ Store = (*RedisStore)(nil)

// NewRedisStore returns the store on client (the caller's, never closed
// here); timeout bounds every call (zero: 2s).
func NewRedisStore(client redis.UniversalClient, timeout time.Duration) *RedisStore {
	if timeout <= 0 {
		timeout = 2 * time.Second
	}
	return &RedisStore{client: client, prefix: DefaultRedisPrefix, timeout: timeout}
}

func (s *RedisStore) key(kind, key string) string { return s.prefix + kind + ":" + key }

// Put implements Store.
func (s *RedisStore) Put(ctx context.Context, kind, key string, v []byte, ttl time.Duration) error {
	if ttl < time.Millisecond {
		return fmt.Errorf("mcpauth: %s: a TTL under a millisecond", kind)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.client.Set(ctx, s.key(kind, key), v, ttl.Truncate(time.Millisecond)).Err(); err != nil {
		return fmt.Errorf("mcpauth: store a %s: %w", kind, err)
	}
	return nil
}

// Get implements Store.
func (s *RedisStore) Get(ctx context.Context, kind, key string) ([]byte, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	b, err := s.client.Get(ctx, s.key(kind, key)).Bytes()
	return answer(kind, b, err)
}

// Take implements Store.
func (s *RedisStore) Take(ctx context.Context, kind, key string) ([]byte, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	b, err := s.client.GetDel(ctx, s.key(kind, key)).Bytes()
	return answer(kind, b, err)
}

func answer(kind string, b []byte, err error) ([]byte, bool, error) {
	switch {
	case errors.Is(err, redis.Nil):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("mcpauth: read a %s: %w", kind, err)
	}
	return b, true, nil
}

// Delete implements Store.
func (s *RedisStore) Delete(ctx context.Context, kind, key string) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.client.Del(ctx, s.key(kind, key)).Err(); err != nil {
		return fmt.Errorf("mcpauth: delete a %s: %w", kind, err)
	}
	return nil
}
