package registry

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Embedder makes embeddings for semantic selection (config
// registry.embeddings). The gateway's implementation is an in-process,
// governed /v1/embeddings call: agentID is the agent whose identity, limits
// and audit trail the call runs under. The registry passes the querying
// agent for the query text, and the described agent for its own profile (a
// spawned agent has no identity of its own: its profile is embedded as the
// querying agent). It returns one vector per text, in order.
type Embedder interface {
	Embed(ctx context.Context, agentID string, texts []string) ([][]float64, error)
}

// VectorKey names one cached profile embedding: whose profile, which
// profile text (SHA-256 of ProfileText, hex) and which model
// ("upstream/model"). A changed profile or model is a new key, so a stale
// vector is never found.
type VectorKey struct {
	AgentID       string
	ProfileSHA256 string
	Model         string
}

// VectorCache keeps profile embeddings between queries. A Get error is
// treated as a miss (the profile is embedded again), a Put error is logged:
// the cache only ever saves calls. Vectors handed out must not be modified.
type VectorCache interface {
	Get(ctx context.Context, k VectorKey) ([]float64, bool, error)
	Put(ctx context.Context, k VectorKey, vec []float64) error
}

// Option configures a Registry (New).
type Option func(*options)

type options struct {
	embedder     Embedder
	shared       VectorCache
	log          *slog.Logger
	embedTimeout time.Duration
}

// defaultEmbedTimeout bounds each embeddings call of a query, so that a slow
// provider costs a query its semantic ranking, not its answer.
const defaultEmbedTimeout = 10 * time.Second

// WithEmbedder turns semantic selection on for free-text queries, when the
// configuration names an embeddings model (registry.embeddings); nil leaves
// it off (lexical ranking).
func WithEmbedder(e Embedder) Option { return func(o *options) { o.embedder = e } }

// WithVectorCache adds a cache shared by the replicas (RedisVectorCache)
// behind the registry's own in-memory one; nil: memory only.
func WithVectorCache(c VectorCache) Option { return func(o *options) { o.shared = c } }

// WithLogger sets where ranking fallbacks and configuration problems are
// logged (default slog.Default()).
func WithLogger(l *slog.Logger) Option {
	return func(o *options) {
		if l != nil {
			o.log = l
		}
	}
}

// WithEmbedTimeout bounds each embeddings call (default 10s).
func WithEmbedTimeout(d time.Duration) Option {
	return func(o *options) {
		if d > 0 {
			o.embedTimeout = d
		}
	}
}

// maxDims bounds the vectors accepted from an embedder or a cache (the
// largest common models have 3072 dimensions).
const maxDims = 16384

// checkVector refuses what cannot be compared by cosine: no values, too
// many, a value that is not a finite number, or the zero vector.
func checkVector(v []float64) error {
	if len(v) == 0 || len(v) > maxDims {
		return fmt.Errorf("%d dimensions (want 1 to %d)", len(v), maxDims)
	}
	var norm float64
	for _, x := range v {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			return errors.New("a value is not a finite number")
		}
		norm += x * x
	}
	if norm == 0 || math.IsInf(norm, 0) {
		return errors.New("the zero vector (or one too large to normalise)")
	}
	return nil
}

// maxMemoryVectors bounds the in-memory cache; it holds one vector per
// agent, so only a registry of more agents than this evicts.
const maxMemoryVectors = 10000

// MemoryVectorCache keeps the latest profile vector of each agent in this
// process: a changed profile replaces the agent's vector.
type MemoryVectorCache struct {
	mu sync.Mutex
	m  map[string]memoryVector // by agent id
}

type memoryVector struct {
	key VectorKey
	vec []float64
}

// NewMemoryVectorCache returns an empty cache.
func NewMemoryVectorCache() *MemoryVectorCache {
	return &MemoryVectorCache{m: map[string]memoryVector{}}
}

// Get implements VectorCache.
func (c *MemoryVectorCache) Get(_ context.Context, k VectorKey) ([]float64, bool, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.m[k.AgentID]
	if !ok || e.key != k {
		return nil, false, nil
	}
	return e.vec, true, nil
}

// Put implements VectorCache.
func (c *MemoryVectorCache) Put(_ context.Context, k VectorKey, vec []float64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[k.AgentID]; !ok && len(c.m) >= maxMemoryVectors {
		for id := range c.m { // any one: the map is large only in odd setups
			delete(c.m, id)
			break
		}
	}
	c.m[k.AgentID] = memoryVector{key: k, vec: slices.Clone(vec)}
	return nil
}

// RedisVectorCache shares profile vectors between replicas, so that one
// embeddings call per profile and model serves them all. Each vector is a
// key of its own that expires (TTL), so vectors of old profiles go away.
type RedisVectorCache struct {
	client  redis.UniversalClient
	prefix  string
	ttl     time.Duration
	timeout time.Duration
}

// RedisVectorCacheOptions configures NewRedisVectorCache.
type RedisVectorCacheOptions struct {
	// Prefix of the keys, "gw" when empty: keys are
	// Prefix:registry:embedding:<sha256 of agent, model and profile hash>.
	Prefix string
	// TTL of each vector (default 7 days).
	TTL time.Duration
	// Timeout bounds each Redis call (default 2s): a slow Redis costs a
	// cache hit, never the query.
	Timeout time.Duration
}

// NewRedisVectorCache returns a cache on client.
func NewRedisVectorCache(client redis.UniversalClient, o RedisVectorCacheOptions) *RedisVectorCache {
	if o.Prefix == "" {
		o.Prefix = "gw"
	}
	if o.TTL <= 0 {
		o.TTL = 7 * 24 * time.Hour
	}
	if o.Timeout <= 0 {
		o.Timeout = 2 * time.Second
	}
	return &RedisVectorCache{client: client, prefix: o.Prefix, ttl: o.TTL, timeout: o.Timeout}
}

// Key is the Redis key of k. Its parts are hashed together: agent ids and
// model names are then never parsed out of a key, and no name can make
// two keys collide.
func (c *RedisVectorCache) Key(k VectorKey) string {
	h := sha256.New()
	for _, part := range []string{k.AgentID, k.Model, k.ProfileSHA256} {
		// Length-prefixed: ("ab","c") and ("a","bc") differ.
		_ = binary.Write(h, binary.BigEndian, uint32(len(part)))
		h.Write([]byte(part))
	}
	return c.prefix + ":registry:embedding:" + hex.EncodeToString(h.Sum(nil))
}

// Get implements VectorCache. A value that is not a vector this cache
// wrote (wrong length, a value that is not a finite number) is an error,
// never a vector.
func (c *RedisVectorCache) Get(ctx context.Context, k VectorKey) ([]float64, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	raw, err := c.client.Get(ctx, c.Key(k)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("registry: read cached embedding of %q: %w", k.AgentID, err)
	}
	if len(raw)%8 != 0 {
		return nil, false, fmt.Errorf("registry: cached embedding of %q: %d bytes is not a vector", k.AgentID, len(raw))
	}
	vec := make([]float64, len(raw)/8)
	for i := range vec {
		vec[i] = math.Float64frombits(binary.LittleEndian.Uint64(raw[i*8:]))
	}
	if err := checkVector(vec); err != nil {
		return nil, false, fmt.Errorf("registry: cached embedding of %q: %w", k.AgentID, err)
	}
	return vec, true, nil
}

// Put implements VectorCache: the vector as little-endian float64s (exact,
// and an eighth the size of JSON), with the TTL.
func (c *RedisVectorCache) Put(ctx context.Context, k VectorKey, vec []float64) error {
	raw := make([]byte, 8*len(vec))
	for i, x := range vec {
		binary.LittleEndian.PutUint64(raw[i*8:], math.Float64bits(x))
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	if err := c.client.Set(ctx, c.Key(k), raw, c.ttl).Err(); err != nil {
		return fmt.Errorf("registry: cache embedding of %q: %w", k.AgentID, err)
	}
	return nil
}
