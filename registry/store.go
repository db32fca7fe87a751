package registry

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sacpgw/gateway/internal/names"
)

// spawnedSet is the state of the in-process stores (MemoryStore, and
// FileStore in front of its file).
type spawnedSet struct {
	agents  map[string]Entry
	pending map[string]pendingToken
}

// pendingToken is the token hash of a spawn that waits for a person.
type pendingToken struct {
	TokenSHA256 string    `json:"token_sha256"`
	Expires     time.Time `json:"expires"`
}

func newSpawnedSet() *spawnedSet {
	return &spawnedSet{agents: map[string]Entry{}, pending: map[string]pendingToken{}}
}

// clone copies the maps (entries are values whose slices are never
// written), so that FileStore can change a copy and keep it only once
// the file holds it.
func (s *spawnedSet) clone() *spawnedSet {
	return &spawnedSet{agents: maps.Clone(s.agents), pending: maps.Clone(s.pending)}
}

func (s *spawnedSet) add(e Entry) error {
	if _, ok := s.agents[e.AgentName]; ok {
		return fmt.Errorf("%w: agent %q", ErrExists, e.AgentName)
	}
	s.agents[e.AgentName] = e
	return nil
}

func (s *spawnedSet) list() []Entry {
	out := make([]Entry, 0, len(s.agents))
	for _, e := range s.agents {
		out = append(out, e)
	}
	return out
}

func (s *spawnedSet) remove(name string) error {
	if _, ok := s.agents[name]; !ok {
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	delete(s.agents, name)
	return nil
}

// setLastUsed reports whether anything changed.
func (s *spawnedSet) setLastUsed(name string, at time.Time) (bool, error) {
	e, ok := s.agents[name]
	if !ok {
		return false, fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if !at.After(e.LastUsedAt) {
		return false, nil
	}
	e.LastUsedAt = at
	s.agents[name] = e
	return true, nil
}

func (s *spawnedSet) putPending(key, sum string, expires time.Time) {
	s.pending[key] = pendingToken{TokenSHA256: sum, Expires: expires}
}

// takePending also drops every expired hash (nothing else would: an
// escalation whose decision never came back leaves its hash behind) and
// reports whether anything changed.
func (s *spawnedSet) takePending(key string, now time.Time) (sum string, ok, changed bool) {
	for k, p := range s.pending {
		if !now.Before(p.Expires) {
			delete(s.pending, k)
			changed = true
		}
	}
	p, ok := s.pending[key]
	if !ok {
		return "", false, changed
	}
	delete(s.pending, key)
	return p.TokenSHA256, true, true
}

// MemoryStore keeps spawned agents in this process: they are gone at a
// restart (tests; FileStore keeps them for state.backend memory).
type MemoryStore struct {
	mu  sync.Mutex
	set *spawnedSet
}

// NewMemoryStore returns an empty MemoryStore.
func NewMemoryStore() *MemoryStore { return &MemoryStore{set: newSpawnedSet()} }

// Add implements Store.
func (s *MemoryStore) Add(_ context.Context, e Entry) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.set.add(e)
}

// List implements Store.
func (s *MemoryStore) List(context.Context) ([]Entry, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.set.list(), nil
}

// Remove implements Store.
func (s *MemoryStore) Remove(_ context.Context, name string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.set.remove(name)
}

// SetLastUsed implements Store.
func (s *MemoryStore) SetLastUsed(_ context.Context, name string, at time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_, err := s.set.setLastUsed(name, at)
	return err
}

// PutPending implements Store.
func (s *MemoryStore) PutPending(_ context.Context, key, sum string, expires time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.set.putPending(key, sum, expires)
	return nil
}

// TakePending implements Store.
func (s *MemoryStore) TakePending(_ context.Context, key string, now time.Time) (string, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	sum, ok, _ := s.set.takePending(key, now)
	return sum, ok, nil
}

// RedisStore keeps spawned agents in one Redis hash, so that every replica
// sees an agent as soon as one registered it (state.backend redis). The
// hash holds each agent's stored JSON under its name and its last use
// (Unix milliseconds) under lastUsedField(name): an agent name cannot
// contain ':', so the two never meet, and one key keeps the scripts that
// touch both valid on a Redis Cluster. A pending spawn's token hash is a
// key of its own, which Redis expires.
type RedisStore struct {
	client  redis.UniversalClient
	key     string
	pending string
	timeout time.Duration
}

// redisStoreTimeout bounds each call: a Redis that does not answer makes
// the registry serve its last known view (Registry.current) instead of
// holding the request.
const redisStoreTimeout = 5 * time.Second

// NewRedisStore uses the hash prefix+":registry:spawned" and the keys
// prefix+":registry:pending:*" (prefix "" means "gw").
func NewRedisStore(client redis.UniversalClient, prefix string) *RedisStore {
	if prefix == "" {
		prefix = "gw"
	}
	return &RedisStore{client: client, key: prefix + ":registry:spawned", pending: prefix + ":registry:pending:", timeout: redisStoreTimeout}
}

const lastUsedPrefix = "last_used:"

func lastUsedField(name string) string { return lastUsedPrefix + name }

// addScript: HSETNX, so two replicas spawning the same name cannot both
// win; a last use left from an earlier agent of the name is dropped.
var addScript = redis.NewScript(`
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('HDEL', KEYS[1], 'last_used:' .. ARGV[1])
return 1
`)

// removeScript deletes the agent and its last use together.
var removeScript = redis.NewScript(`
local n = redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[1], 'last_used:' .. ARGV[1])
return n
`)

// lastUsedScript writes a last use only for an agent that exists (a
// Touch racing a Remove must not leave a stray field) and only forward.
var lastUsedScript = redis.NewScript(`
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
local f = 'last_used:' .. ARGV[1]
local cur = redis.call('HGET', KEYS[1], f)
if not cur or tonumber(ARGV[2]) > tonumber(cur) then redis.call('HSET', KEYS[1], f, ARGV[2]) end
return 1
`)

// Add implements Store.
func (s *RedisStore) Add(ctx context.Context, e Entry) error {
	// The hash's field names rely on it (lastUsedField).
	if err := names.Check(e.AgentName); err != nil {
		return fmt.Errorf("registry: store: %w", err)
	}
	st := toStored(e)
	st.LastUsedAt = time.Time{} // kept in its own field
	raw, err := json.Marshal(st)
	if err != nil {
		return fmt.Errorf("registry: encode %q: %w", e.AgentName, err)
	}
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	n, err := addScript.Run(ctx, s.client, []string{s.key}, e.AgentName, raw).Int()
	if err != nil {
		return fmt.Errorf("registry: store %q: %w", e.AgentName, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: agent %q", ErrExists, e.AgentName)
	}
	if !e.LastUsedAt.IsZero() {
		return s.SetLastUsed(ctx, e.AgentName, e.LastUsedAt)
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
		if strings.HasPrefix(name, lastUsedPrefix) {
			continue
		}
		var st stored
		if err := json.Unmarshal([]byte(raw), &st); err != nil {
			return nil, fmt.Errorf("registry: decode %q: %w", name, err)
		}
		e := st.entry()
		if ms, ok := all[lastUsedField(name)]; ok {
			n, err := strconv.ParseInt(ms, 10, 64)
			if err != nil {
				return nil, fmt.Errorf("registry: decode the last use of %q: %w", name, err)
			}
			if at := time.UnixMilli(n).UTC(); at.After(e.LastUsedAt) {
				e.LastUsedAt = at
			}
		}
		out = append(out, e)
	}
	return out, nil
}

// Remove implements Store.
func (s *RedisStore) Remove(ctx context.Context, name string) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	n, err := removeScript.Run(ctx, s.client, []string{s.key}, name).Int()
	if err != nil {
		return fmt.Errorf("registry: remove %q: %w", name, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	return nil
}

// SetLastUsed implements Store, to the millisecond.
func (s *RedisStore) SetLastUsed(ctx context.Context, name string, at time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	n, err := lastUsedScript.Run(ctx, s.client, []string{s.key}, name, at.UnixMilli()).Int()
	if err != nil {
		return fmt.Errorf("registry: record the last use of %q: %w", name, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	return nil
}

// PutPending implements Store: Redis expires the key at expires.
func (s *RedisStore) PutPending(ctx context.Context, key, sum string, expires time.Time) error {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	if err := s.client.SetArgs(ctx, s.pending+key, sum, redis.SetArgs{ExpireAt: expires}).Err(); err != nil {
		return fmt.Errorf("registry: store a pending token hash: %w", err)
	}
	return nil
}

// TakePending implements Store (GETDEL: two replicas resolving the same
// decision cannot both get the hash).
func (s *RedisStore) TakePending(ctx context.Context, key string, _ time.Time) (string, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	sum, err := s.client.GetDel(ctx, s.pending+key).Result()
	if errors.Is(err, redis.Nil) {
		return "", false, nil
	}
	if err != nil {
		return "", false, fmt.Errorf("registry: read a pending token hash: %w", err)
	}
	return sum, true, nil
}
