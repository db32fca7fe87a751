package approval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
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

// DefaultRedisTimeout bounds each Redis call of a RedisStore (each attempt
// of an Update): a Redis that hangs must fail a request, not hold it.
const DefaultRedisTimeout = 2 * time.Second

// updateAttempts bounds the optimistic retries of one Update.
const updateAttempts = 200

// RedisStore is a Store shared by all replicas. Each record is one JSON
// string key; the ids of ESCALATED records are a sorted set scored by
// creation time (microseconds), and the ids of APPROVED records one scored
// by the time of their approval, both written in the same transaction as
// the record. Review sessions are keys of their own with the session's
// lifetime as TTL. State changes are published on one channel (Publish,
// Subscribe), so GET /agent/events on any replica sees the changes made on
// all of them.
//
// Records in a terminal state expire by themselves (key TTL) after the
// retention period, so RedisStore is not a Pruner: no replica has to scan
// Redis for old records.
//
// Every call has a deadline (WithRedisTimeout), whatever the caller's
// context says.
type RedisStore struct {
	client    redis.UniversalClient
	prefix    string
	retention time.Duration
	timeout   time.Duration
}

var (
	_ Store    = (*RedisStore)(nil)
	_ EventBus = (*RedisStore)(nil)
)

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

// WithRedisTimeout sets the deadline of each Redis call. Zero or
// negative: DefaultRedisTimeout.
func WithRedisTimeout(d time.Duration) RedisStoreOption {
	return func(s *RedisStore) { s.timeout = d }
}

// NewRedisStore returns a store on client. The client is the caller's.
func NewRedisStore(client redis.UniversalClient, opts ...RedisStoreOption) *RedisStore {
	s := &RedisStore{client: client, prefix: DefaultRedisKeyPrefix, retention: DefaultRedisRetention}
	for _, o := range opts {
		o(s)
	}
	if s.timeout <= 0 {
		s.timeout = DefaultRedisTimeout
	}
	return s
}

func (s *RedisStore) recordKey(id string) string  { return s.prefix + "rec:" + id }
func (s *RedisStore) escalatedKey() string        { return s.prefix + "escalated" }
func (s *RedisStore) approvedKey() string         { return s.prefix + "approved" }
func (s *RedisStore) sessionKey(id string) string { return s.prefix + "session:" + sessionKey(id) }
func (s *RedisStore) eventsChannel() string       { return s.prefix + "events" }
func (s *RedisStore) leaseKey(name string) string { return s.prefix + "lease:" + name }
func approvedScore(rec *Record) float64           { return float64(approvedAt(rec).UnixMicro()) }
func (s *RedisStore) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.timeout)
}

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
// KEYS[1] record, KEYS[2] escalated set, KEYS[3] approved set; ARGV[1]
// JSON, ARGV[2] "1" when escalated, ARGV[3] its score, ARGV[4] id, ARGV[5]
// TTL in ms (0: none), ARGV[6] "1" when approved, ARGV[7] its score.
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
if ARGV[6] == '1' then
  redis.call('ZADD', KEYS[3], ARGV[7], ARGV[4])
else
  redis.call('ZREM', KEYS[3], ARGV[4])
end
return 1
`)

// Create implements Store.
func (s *RedisStore) Create(ctx context.Context, rec *Record) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encode record %s: %w", rec.ID, err)
	}
	esc, appr := "0", "0"
	if rec.State == StateEscalated {
		esc = "1"
	}
	if rec.State == StateApproved {
		appr = "1"
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	n, err := createScript.Run(ctx, s.client, []string{s.recordKey(rec.ID), s.escalatedKey(), s.approvedKey()},
		b, esc, rec.CreatedAt.UnixMicro(), rec.ID, s.ttl(rec).Milliseconds(), appr, approvedScore(rec)).Int()
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
	b, err := s.value(ctx, s.recordKey(id), id)
	if err != nil {
		return nil, err
	}
	return decodeRecord(b)
}

// value reads key within the store's deadline: ErrNotFound when it is
// missing; what names it in any other error (never a session's id, which
// is a credential).
func (s *RedisStore) value(ctx context.Context, key, what string) ([]byte, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	b, err := s.client.Get(ctx, key).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, fmt.Errorf("approval store: get %s: %w", what, err)
	}
	return b, nil
}

// Update implements Store with WATCH … MULTI/EXEC, retried when another
// replica changed the record in between; fn runs once per attempt, and
// each attempt has its own deadline.
func (s *RedisStore) Update(ctx context.Context, id string, fn func(*Record) error) (*Record, error) {
	key := s.recordKey(id)
	for attempt := range updateAttempts {
		var out *Record
		actx, cancel := s.bound(ctx)
		err := s.client.Watch(actx, func(tx *redis.Tx) error {
			ctx := actx
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
				if rec.State == StateApproved {
					p.ZAdd(ctx, s.approvedKey(), redis.Z{Score: approvedScore(rec), Member: id})
				} else {
					p.ZRem(ctx, s.approvedKey(), id)
				}
				return nil
			})
			out = rec
			return err
		}, key)
		cancel()
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
	return s.indexed(ctx, s.escalatedKey(), "+inf", StateEscalated)
}

// ApprovedBefore implements Store. A record that left APPROVED between the
// index read and the record read is left out.
func (s *RedisStore) ApprovedBefore(ctx context.Context, t time.Time) ([]*Record, error) {
	// Exclusive bound: "before t", as in the memory store.
	return s.indexed(ctx, s.approvedKey(), "("+strconv.FormatInt(t.UnixMicro(), 10), StateApproved)
}

// indexed reads the records of the sorted set key scored up to max (a
// ZRANGEBYSCORE bound; "+inf" for all of them) that are still in state,
// lowest score first.
func (s *RedisStore) indexed(ctx context.Context, key, max string, state State) ([]*Record, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	ids, err := s.client.ZRangeByScore(ctx, key, &redis.ZRangeBy{Min: "-inf", Max: max}).Result()
	if err != nil {
		return nil, fmt.Errorf("approval store: list %s: %w", state, err)
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
		return nil, fmt.Errorf("approval store: read %s: %w", state, err)
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
		if rec.State == state {
			out = append(out, rec)
		}
	}
	if len(gone) > 0 {
		// Best effort; the next listing tries again.
		_ = s.client.ZRem(ctx, key, gone...).Err()
	}
	return out, nil
}

// CreateSession implements Store: SET NX with the session's lifetime as
// TTL, one atomic step, so Redis forgets the session by itself.
func (s *RedisStore) CreateSession(ctx context.Context, id string, sess *ReviewSession, ttl time.Duration) error {
	if ttl <= 0 {
		return errors.New("approval store: a review session needs a lifetime")
	}
	b, err := json.Marshal(sess)
	if err != nil {
		return fmt.Errorf("encode session: %w", err)
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	ok, err := s.client.SetNX(ctx, s.sessionKey(id), b, ttl).Result()
	if err != nil {
		return fmt.Errorf("approval store: create session: %w", err)
	}
	if !ok {
		return ErrExists
	}
	return nil
}

// Session implements Store.
func (s *RedisStore) Session(ctx context.Context, id string) (*ReviewSession, error) {
	b, err := s.value(ctx, s.sessionKey(id), "session")
	if err != nil {
		return nil, err
	}
	var sess ReviewSession
	if err := json.Unmarshal(b, &sess); err != nil {
		return nil, fmt.Errorf("decode session: %w", err)
	}
	return &sess, nil
}

// DeleteSession implements Store.
func (s *RedisStore) DeleteSession(ctx context.Context, id string) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.client.Del(ctx, s.sessionKey(id)).Err(); err != nil {
		return fmt.Errorf("approval store: delete session: %w", err)
	}
	return nil
}

// Publish implements EventBus: PUBLISH on the store's events channel.
// Redis pub/sub delivers to the replicas subscribed at that moment and
// keeps nothing: a stream that was not connected misses the event (its
// agent reads the state from GET /agent/status).
func (s *RedisStore) Publish(ctx context.Context, ev Event) error {
	b, err := json.Marshal(ev)
	if err != nil {
		return fmt.Errorf("encode event: %w", err)
	}
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.client.Publish(ctx, s.eventsChannel(), b).Err(); err != nil {
		return fmt.Errorf("approval store: publish event: %w", err)
	}
	return nil
}

// Subscribe implements EventBus: one SUBSCRIBE to the events channel,
// confirmed within the store's timeout before it returns; then deliver
// gets every event until ctx ends, and done is closed once it stopped.
func (s *RedisStore) Subscribe(ctx context.Context, deliver func(Event)) (<-chan struct{}, error) {
	// SUBSCRIBE and its confirmation under the deadline; after that the
	// subscription waits for messages, which go-redis bounds itself (it
	// pings an idle connection and reconnects a broken one).
	rctx, cancel := s.bound(ctx)
	ps := s.client.Subscribe(rctx, s.eventsChannel())
	_, err := ps.Receive(rctx)
	cancel()
	if err != nil {
		_ = ps.Close()
		return nil, fmt.Errorf("approval store: subscribe to events: %w", err)
	}
	msgs := ps.Channel()
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer func() { _ = ps.Close() }()
		for {
			select {
			case <-ctx.Done():
				return
			case m, ok := <-msgs:
				if !ok {
					return
				}
				var ev Event
				if json.Unmarshal([]byte(m.Payload), &ev) != nil || ev.AgentID == "" {
					continue // not one of ours
				}
				deliver(ev)
			}
		}
	}()
	return done, nil
}

// Lease reports whether the caller obtained the named lease for ttl. Only
// one caller in all replicas obtains it until it expires, so periodic work
// guarded by it (escalation expiry) runs once per period, not once per
// replica. A lease is never released early: the work is idempotent, only
// its repetition is wasteful.
func (s *RedisStore) Lease(ctx context.Context, name string, ttl time.Duration) (bool, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	ok, err := s.client.SetNX(ctx, s.leaseKey(name), "1", ttl).Result()
	if err != nil {
		return false, fmt.Errorf("approval store: lease %s: %w", name, err)
	}
	return ok, nil
}

// Ready pings Redis; it is meant for /readyz.
func (s *RedisStore) Ready(ctx context.Context) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := s.client.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("approval store: redis: %w", err)
	}
	return nil
}
