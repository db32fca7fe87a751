package registry

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// MemoryStore keeps spawned agents in this process (state.backend memory).
type MemoryStore struct {
	mu sync.Mutex
	m  map[string]Entry
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{m: map[string]Entry{}} }

// Add implements Store.
func (s *MemoryStore) Add(_ context.Context, e Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.m[e.AgentName]; ok {
		return fmt.Errorf("%w: agent %q", ErrExists, e.AgentName)
	}
	s.m[e.AgentName] = e
	return nil
}

// List implements Store.
func (s *MemoryStore) List(context.Context) ([]Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]Entry, 0, len(s.m))
	for _, e := range s.m {
		out = append(out, e)
	}
	return out, nil
}

// RedisStore keeps spawned agents in one Redis hash, so that every replica
// sees an agent as soon as one registered it (state.backend redis).
type RedisStore struct {
	client  redis.UniversalClient
	key     string
	timeout time.Duration
}

// redisStoreTimeout bounds each call: a Redis that does not answer makes
// the registry serve its last known view (Registry.current) instead of
// holding the request.
const redisStoreTimeout = 5 * time.Second

// NewRedisStore uses the hash prefix+":registry:spawned" (prefix "" means "gw").
func NewRedisStore(client redis.UniversalClient, prefix string) *RedisStore {
	if prefix == "" {
		prefix = "gw"
	}
	return &RedisStore{client: client, key: prefix + ":registry:spawned", timeout: redisStoreTimeout}
}

// Add implements Store: HSETNX, so two replicas spawning the same name
// cannot both win.
func (s *RedisStore) Add(ctx context.Context, e Entry) error {
	raw, err := json.Marshal(stored{Entry: e, Endpoint: e.Endpoint})
	if err != nil {
		return fmt.Errorf("registry: encode %q: %w", e.AgentName, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	ok, err := s.client.HSetNX(ctx, s.key, e.AgentName, raw).Result()
	if err != nil {
		return fmt.Errorf("registry: store %q: %w", e.AgentName, err)
	}
	if !ok {
		return fmt.Errorf("%w: agent %q", ErrExists, e.AgentName)
	}
	return nil
}

// List implements Store.
func (s *RedisStore) List(ctx context.Context) ([]Entry, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	all, err := s.client.HGetAll(ctx, s.key).Result()
	if err != nil {
		return nil, fmt.Errorf("registry: list: %w", err)
	}
	out := make([]Entry, 0, len(all))
	for name, raw := range all {
		var st stored
		if err := json.Unmarshal([]byte(raw), &st); err != nil {
			return nil, fmt.Errorf("registry: decode %q: %w", name, err)
		}
		st.Entry.Endpoint = st.Endpoint
		out = append(out, st.Entry)
	}
	return out, nil
}
