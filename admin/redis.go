package admin

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// redisKV keeps each collection in one Redis hash; the hash tag puts them
// in one slot of a cluster. Every replica reads the same hashes, so a key
// revoked on one is refused by the next request on any other.
type redisKV struct {
	c       redis.UniversalClient
	prefix  string
	timeout time.Duration
}

// NewRedisStore keeps everything in Redis (state.backend redis); timeout
// bounds each call (state.timeout; zero: none beyond the caller's).
func NewRedisStore(c redis.UniversalClient, timeout time.Duration) *Store {
	return &Store{kv: &redisKV{c: c, prefix: "{gw:admin}:", timeout: timeout}}
}

func (r *redisKV) ctx(ctx context.Context) (context.Context, context.CancelFunc) {
	if r.timeout <= 0 {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, r.timeout)
}

func (r *redisKV) create(ctx context.Context, coll, id string, val []byte) error {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	ok, err := r.c.HSetNX(ctx, r.prefix+coll, id, val).Result()
	switch {
	case err != nil:
		return fmt.Errorf("admin: redis: %w", err)
	case !ok:
		return ErrExists
	}
	return nil
}

// update is an optimistic read-modify-write (WATCH, HGET, MULTI/HSET/EXEC),
// retried when another write came between.
func (r *redisKV) update(ctx context.Context, coll, id string, fn func([]byte) ([]byte, error)) ([]byte, error) {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	key := r.prefix + coll
	var out []byte
	for range 10 {
		err := r.c.Watch(ctx, func(tx *redis.Tx) error {
			cur, err := tx.HGet(ctx, key, id).Bytes()
			if errors.Is(err, redis.Nil) {
				return ErrNotFound
			}
			if err != nil {
				return err
			}
			next, err := fn(cur)
			if err != nil {
				return err
			}
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.HSet(ctx, key, id, next)
				return nil
			})
			out = next
			return err
		}, key)
		if errors.Is(err, redis.TxFailedErr) {
			continue
		}
		return out, err
	}
	return nil, fmt.Errorf("admin: redis: %s %q changed by others 10 times in a row", coll, id)
}

func (r *redisKV) put(ctx context.Context, coll, id string, val []byte) error {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	if err := r.c.HSet(ctx, r.prefix+coll, id, val).Err(); err != nil {
		return fmt.Errorf("admin: redis: %w", err)
	}
	return nil
}

func (r *redisKV) get(ctx context.Context, coll, id string) ([]byte, error) {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	v, err := r.c.HGet(ctx, r.prefix+coll, id).Bytes()
	switch {
	case errors.Is(err, redis.Nil):
		return nil, ErrNotFound
	case err != nil:
		return nil, fmt.Errorf("admin: redis: %w", err)
	}
	return v, nil
}

func (r *redisKV) list(ctx context.Context, coll string) (map[string][]byte, error) {
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	all, err := r.c.HGetAll(ctx, r.prefix+coll).Result()
	if err != nil {
		return nil, fmt.Errorf("admin: redis: %w", err)
	}
	out := make(map[string][]byte, len(all))
	for k, v := range all {
		out[k] = []byte(v)
	}
	return out, nil
}

func (r *redisKV) del(ctx context.Context, coll string, ids ...string) error {
	if len(ids) == 0 {
		return nil
	}
	ctx, cancel := r.ctx(ctx)
	defer cancel()
	n, err := r.c.HDel(ctx, r.prefix+coll, ids...).Result()
	switch {
	case err != nil:
		return fmt.Errorf("admin: redis: %w", err)
	case n == 0:
		return ErrNotFound
	}
	return nil
}
