package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultRedisKeyPrefix is where RedisStore keeps its keys. The hash tag
// puts them all in one Redis Cluster slot, so the scripts and transactions
// that touch a record and the escalated index together stay valid there.
const DefaultRedisKeyPrefix = "{gw:approval}:"

// DefaultRedisRetention is how long a record in a terminal state is kept
// after its last update (the Service's default retention).
const DefaultRedisRetention = 7 * 24 * time.Hour

// updateAttempts bounds the optimistic retries of one Update.
const updateAttempts = 200

// RedisStore is a Store shared by all replicas. Each record is one JSON
// string key; the ids of ESCALATED records are a sorted set scored by
// creation time (microseconds), written in the same transaction as the
// record.
//
// Records in a terminal state expire by themselves (key TTL) after the
// retention period, so RedisStore is not a Pruner: no replica has to scan
// Redis for old records.
type RedisStore struct {
	client    redis.UniversalClient
	prefix    string
	retention time.Duration
}

var _ Store = (*RedisStore)(nil)

// RedisStoreOption configures a RedisStore.
type RedisStoreOption func(*RedisStore)

// WithRedisKeyPrefix sets the prefix of every key. Keep a {hash tag} in it
// for Redis Cluster.
func WithRedisKeyPrefix(p string) RedisStoreOption { return func(s *RedisStore) { s.prefix = p } }

// WithRedisRetention sets how long terminal records are kept after their
// last update. Zero or negative: forever.
func WithRedisRetention(d time.Duration) RedisStoreOption {
	return func(s *RedisStore) { s.retention = d }
}

// NewRedisStore returns a store on client. The client is the caller's.
func NewRedisStore(client redis.UniversalClient, opts ...RedisStoreOption) *RedisStore {
	s := &RedisStore{client: client, prefix: DefaultRedisKeyPrefix, retention: DefaultRedisRetention}
	for _, o := range opts {
		o(s)
	}
	return s
}

func (s *RedisStore) recordKey(id string) string { return s.prefix + "rec:" + id }
func (s *RedisStore) escalatedKey() string       { return s.prefix + "escalated" }

// ttl is the expiry of rec's key; 0 means none.
func (s *RedisStore) ttl(rec *Record) time.Duration {
	if rec.State.Terminal() && s.retention > 0 {
		return s.retention
	}
	return 0
}

// createScript stores a record only if its key is free, and indexes it, in
// one step.
//
// KEYS[1] record, KEYS[2] escalated set; ARGV[1] JSON, ARGV[2] "1" when
// escalated, ARGV[3] score, ARGV[4] id, ARGV[5] TTL in ms (0: none).
var createScript = redis.NewScript(`
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
if tonumber(ARGV[5]) > 0 then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[5])
else
  redis.call('SET', KEYS[1], ARGV[1])
end
if ARGV[2] == '1' then
  redis.call('ZADD', KEYS[2], ARGV[3], ARGV[4])
else
  redis.call('ZREM', KEYS[2], ARGV[4])
end
return 1
`)

// Create implements Store.
func (s *RedisStore) Create(ctx context.Context, rec *Record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode record %s: %w", rec.ID, err)
	}
	esc := "0"
	if rec.State == StateEscalated {
		esc = "1"
	}
	n, err := createScript.Run(ctx, s.client, []string{s.recordKey(rec.ID), s.escalatedKey()},
		b, esc, rec.CreatedAt.UnixMicro(), rec.ID, s.ttl(rec).Milliseconds()).Int()
	if err != nil {
		return fmt.Errorf("approval store: create %s: %w", rec.ID, err)
	}
	if n == 0 {
		return fmt.Errorf("%w: %s", ErrExists, rec.ID)
	}
	return nil
}

// Get implements Store.
func (s *RedisStore) Get(ctx context.Context, id string) (*Record, error) {
	b, err := s.client.Get(ctx, s.recordKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("approval store: get %s: %w", id, err)
	}
	return decodeRecord(b)
}

// Update implements Store with WATCH … MULTI/EXEC, retried when another
// replica changed the record in between; fn runs once per attempt.
func (s *RedisStore) Update(ctx context.Context, id string, fn func(*Record) error) (*Record, error) {
	key := s.recordKey(id)
	for attempt := range updateAttempts {
		var out *Record
		err := s.client.Watch(ctx, func(tx *redis.Tx) error {
			b, err := tx.Get(ctx, key).Bytes()
			if errors.Is(err, redis.Nil) {
				return ErrNotFound
			}
			if err != nil {
				return fmt.Errorf("approval store: get %s: %w", id, err)
			}
			rec, err := decodeRecord(b)
			if err != nil {
				return err
			}
			if err := fn(rec); err != nil {
				return err
			}
			rec.ID = id // fn must not move a record
			nb, err := json.Marshal(rec)
			if err != nil {
				return fmt.Errorf("encode record %s: %w", id, err)
			}
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, key, nb, s.ttl(rec))
				if rec.State == StateEscalated {
					p.ZAdd(ctx, s.escalatedKey(), redis.Z{Score: float64(rec.CreatedAt.UnixMicro()), Member: id})
				} else {
					p.ZRem(ctx, s.escalatedKey(), id)
				}
				return nil
			})
			out = rec
			return err
		}, key)
		if err == nil {
			return out, nil
		}
		if !errors.Is(err, redis.TxFailedErr) {
			return nil, err
		}
		// Someone else wrote the record first: back off a little, with
		// jitter, and read it again.
		wait := time.Duration(rand.Int64N(int64(time.Millisecond) << min(attempt, 5)))
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(wait):
		}
	}
	return nil, fmt.Errorf("approval store: update %s: %d conflicting attempts: %w", id, updateAttempts, redis.TxFailedErr)
}

// Escalated implements Store. A record that left ESCALATED between the
// index read and the record read is left out.
func (s *RedisStore) Escalated(ctx context.Context) ([]*Record, error) {
	ids, err := s.client.ZRange(ctx, s.escalatedKey(), 0, -1).Result()
	if err != nil {
		return nil, fmt.Errorf("approval store: list escalated: %w", err)
	}
	out := make([]*Record, 0, len(ids))
	if len(ids) == 0 {
		return out, nil
	}
	keys := make([]string, len(ids))
	for i, id := range ids {
		keys[i] = s.recordKey(id)
	}
	vals, err := s.client.MGet(ctx, keys...).Result()
	if err != nil {
		return nil, fmt.Errorf("approval store: read escalated: %w", err)
	}
	var gone []any
	for i, v := range vals {
		str, ok := v.(string)
		if !ok { // deleted behind our back: drop it from the index
			gone = append(gone, ids[i])
			continue
		}
		rec, err := decodeRecord([]byte(str))
		if err != nil {
			return nil, err
		}
		if rec.State == StateEscalated {
			out = append(out, rec)
		}
	}
	if len(gone) > 0 {
		// Best effort; the next listing tries again.
		_ = s.client.ZRem(ctx, s.escalatedKey(), gone...).Err()
	}
	return out, nil
}

// Lease reports whether the caller obtained the named lease for ttl. Only
// one caller in all replicas obtains it until it expires, so periodic work
// guarded by it (escalation expiry) runs once per period, not once per
// replica. A lease is never released early: the work is idempotent, only
// its repetition is wasteful.
func (s *RedisStore) Lease(ctx context.Context, name string, ttl time.Duration) (bool, error) {
	ok, err := s.client.SetNX(ctx, s.prefix+"lease:"+name, "1", ttl).Result()
	if err != nil {
		return false, fmt.Errorf("approval store: lease %s: %w", name, err)
	}
	return ok, nil
}

// Ready pings Redis; it is meant for /readyz.
func (s *RedisStore) Ready(ctx context.Context) error {
	if err := s.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("approval store: redis: %w", err)
	}
	return nil
}
