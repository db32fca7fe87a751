package workflow

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sacpgw/gateway/limit"
)

// Defaults of RedisStore.
const (
	// DefaultRedisPrefix starts the keys of RedisStore; its hash tag keeps
	// a run and the live set in one Redis Cluster slot.
	DefaultRedisPrefix = "{gw}"
	// DefaultRetention is how long a run that has ended stays readable.
	DefaultRetention = 7 * 24 * time.Hour
	// DefaultRedisTimeout bounds each Redis call of a RedisStore.
	DefaultRedisTimeout = 2 * time.Second
	// maxTxAttempts bounds the optimistic transactions of Create and
	// Update: each lost race (another replica wrote the run between WATCH
	// and EXEC) is retried, up to this many attempts in all.
	maxTxAttempts = 20
)

// RedisStore keeps runs in Redis, shared by the replicas.
//
// Keys (under the prefix, DefaultRedisPrefix by default):
//
//	<prefix>:workflow:run:<id>    string: the run's JSON; expires Retention
//	                              after the run ended, never while it lives
//	<prefix>:workflow:live        set: the ids of the runs IN_PROGRESS
//	<prefix>:workflow:lease:<id>  string: the replica advancing run id (PX ttl)
//
// A run and the live set are written in one MULTI, so with Redis Cluster
// the prefix must hold a {hash tag} to keep them in one slot; the
// default's is {gw}. (Before it had one, the default was "gw": runs that
// an earlier version left in progress are not resumed after the upgrade.)
//
// Every failure to reach Redis (refused, timed out) is marked
// apierror.ErrStateUnavailable, so the API answers 503 and the caller may
// try again.
type RedisStore struct {
	client  redis.UniversalClient
	prefix  string
	timeout time.Duration
	// Retention is how long a run that has ended (Status.Final) is kept
	// (DefaultRetention unless set). Set it before the store is used.
	Retention time.Duration
}

var _ Store = (*RedisStore)(nil)

// NewRedisStore returns a store on client (which stays the caller's: the
// store never closes it). prefix "" means DefaultRedisPrefix; timeout bounds every Redis
// call, also when the caller's context has no deadline (0 means
// DefaultRedisTimeout).
func NewRedisStore(client redis.UniversalClient, prefix string, timeout time.Duration) *RedisStore {
	if prefix == "" {
		prefix = DefaultRedisPrefix
	}
	if timeout <= 0 {
		timeout = DefaultRedisTimeout
	}
	return &RedisStore{client: client, prefix: prefix, timeout: timeout, Retention: DefaultRetention}
}

func (s *RedisStore) runKey(id string) string   { return s.prefix + ":workflow:run:" + id }
func (s *RedisStore) leaseKey(id string) string { return s.prefix + ":workflow:lease:" + id }
func (s *RedisStore) liveKey() string           { return s.prefix + ":workflow:live" }

// bound gives ctx the store's deadline (or keeps the caller's, if sooner).
func (s *RedisStore) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, s.timeout)
}

func (s *RedisStore) retention() time.Duration {
	if s.Retention > 0 {
		return s.Retention
	}
	return DefaultRetention
}

// Create implements Store: the run is stored only if no run has its id.
func (s *RedisStore) Create(ctx context.Context, r *Run) error {
	raw, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("workflow: encode run %s: %w", r.ID, err)
	}
	key := s.runKey(r.ID)
	errExists := errors.New("workflow run " + r.ID + " exists")
	return s.transact(ctx, "create", r.ID, func(ctx context.Context) error {
		return s.client.Watch(ctx, func(tx *redis.Tx) error {
			n, err := tx.Exists(ctx, key).Result()
			if err != nil {
				return err
			}
			if n > 0 {
				return errExists
			}
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				s.put(ctx, p, r.ID, r.Status, raw, true)
				return nil
			})
			return err
		}, key)
	}, errExists)
}

// Get implements Store.
func (s *RedisStore) Get(ctx context.Context, id string) (*Run, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	raw, err := s.client.Get(ctx, s.runKey(id)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, ErrNotFound
	}
	if err != nil {
		return nil, redisErr("get", id, err)
	}
	return decodeRun(id, raw)
}

// Update implements Store, atomically across replicas: WATCH the run,
// read it, give fn a copy, and write what fn left in a MULTI that fails
// when another replica wrote the run meanwhile; then it starts over (with
// a fresh copy), up to maxTxAttempts times. So fn may be called more than
// once, and must leave the same effects outside the run whichever call
// is the last. An error of fn is returned unchanged, with nothing written.
func (s *RedisStore) Update(ctx context.Context, id string, fn func(*Run) error) (*Run, error) {
	key := s.runKey(id)
	var out *Run
	var fnErr error
	err := s.transact(ctx, "update", id, func(ctx context.Context) error {
		out, fnErr = nil, nil
		return s.client.Watch(ctx, func(tx *redis.Tx) error {
			raw, err := tx.Get(ctx, key).Bytes()
			if errors.Is(err, redis.Nil) {
				return ErrNotFound
			}
			if err != nil {
				return err
			}
			r, err := decodeRun(id, raw)
			if err != nil {
				return err
			}
			if err := fn(r); err != nil {
				fnErr = err
				return err
			}
			val, err := json.Marshal(r)
			if err != nil {
				return fmt.Errorf("workflow: encode run %s: %w", id, err)
			}
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				s.put(ctx, p, id, r.Status, val, false)
				return nil
			})
			if err == nil {
				out = r
			}
			return err
		}, key)
	}, ErrNotFound, errDecode)
	if fnErr != nil {
		return nil, fnErr
	}
	if err != nil {
		return nil, err
	}
	return out, nil
}

// put queues the writes of a run in a MULTI: the run (with the retention
// as TTL once it has ended; SET drops any TTL otherwise) and its place in
// the live set.
func (s *RedisStore) put(ctx context.Context, p redis.Pipeliner, id string, st Status, raw []byte, create bool) {
	var ttl time.Duration
	if st.Final() {
		ttl = s.retention()
	}
	if create {
		p.SetNX(ctx, s.runKey(id), raw, ttl)
	} else {
		p.Set(ctx, s.runKey(id), raw, ttl)
	}
	if st == InProgress {
		p.SAdd(ctx, s.liveKey(), id)
	} else {
		p.SRem(ctx, s.liveKey(), id)
	}
}

// transact runs attempt until it does not lose a WATCH race, each attempt
// under the store's deadline, and wraps its errors but the ones in keep.
func (s *RedisStore) transact(ctx context.Context, op, id string, attempt func(context.Context) error, keep ...error) error {
	for i := range maxTxAttempts {
		actx, cancel := s.bound(ctx)
		err := attempt(actx)
		cancel()
		if !errors.Is(err, redis.TxFailedErr) {
			for _, k := range keep {
				if k != nil && errors.Is(err, k) {
					return err
				}
			}
			if err != nil {
				return redisErr(op, id, err)
			}
			return nil
		}
		// Lost a race: wait, longer each time and at random so that the
		// losers do not collide again, and start over.
		t := time.NewTimer(txBackoff(i))
		select {
		case <-ctx.Done():
			t.Stop()
			return redisErr(op, id, ctx.Err())
		case <-t.C:
		}
	}
	return fmt.Errorf("workflow: %s run %s: %d attempts lost to concurrent writers: %w", op, id, maxTxAttempts, redis.TxFailedErr)
}

// txBackoff is the wait after the attempt-th lost race (from 0): half of
// min(1ms·2^attempt, 32ms) plus a random part up to the other half.
func txBackoff(attempt int) time.Duration {
	d := time.Millisecond << min(attempt, 5)
	return d/2 + rand.N(d/2+1)
}

// leaseScript takes or renews a lease: set when absent, renewed when owner
// holds it. KEYS[1] the lease; ARGV[1] owner, ARGV[2] ttl in ms. Returns 1
// when owner holds the lease, 0 when another does.
var leaseScript = redis.NewScript(`
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
return 0
`)

// releaseScript deletes a lease if owner holds it. KEYS[1] the lease;
// ARGV[1] owner.
var releaseScript = redis.NewScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
`)

// Lease implements Store. ttl is rounded up to a whole millisecond.
func (s *RedisStore) Lease(ctx context.Context, id, owner string, ttl time.Duration) (bool, error) {
	if ttl <= 0 {
		return false, fmt.Errorf("workflow: lease run %s: ttl %s is not positive", id, ttl)
	}
	ms := (ttl + time.Millisecond - 1) / time.Millisecond
	ctx, cancel := s.bound(ctx)
	defer cancel()
	n, err := leaseScript.Run(ctx, s.client, []string{s.leaseKey(id)}, owner, int64(ms)).Int()
	if err != nil {
		return false, redisErr("lease", id, err)
	}
	return n == 1, nil
}

// Release implements Store: a lease another owner holds stays.
func (s *RedisStore) Release(ctx context.Context, id, owner string) error {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	if err := releaseScript.Run(ctx, s.client, []string{s.leaseKey(id)}, owner).Err(); err != nil {
		return redisErr("release", id, err)
	}
	return nil
}

// Live implements Store: the ids, sorted.
func (s *RedisStore) Live(ctx context.Context) ([]string, error) {
	ctx, cancel := s.bound(ctx)
	defer cancel()
	ids, err := s.client.SMembers(ctx, s.liveKey()).Result()
	if err != nil {
		return nil, fmt.Errorf("workflow: list live runs: %w", limit.MarkUnavailable(err))
	}
	slices.Sort(ids)
	return ids, nil
}

// errDecode marks a stored run that is not a run's JSON.
var errDecode = errors.New("stored run is not valid JSON")

func decodeRun(id string, raw []byte) (*Run, error) {
	var r Run
	if err := json.Unmarshal(raw, &r); err != nil {
		return nil, fmt.Errorf("workflow: decode run %s: %w: %w", id, errDecode, err)
	}
	return &r, nil
}

// redisErr wraps a failed Redis call of op on run id.
func redisErr(op, id string, err error) error {
	return fmt.Errorf("workflow: %s run %s: %w", op, id, limit.MarkUnavailable(err))
}
