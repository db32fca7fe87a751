package messaging

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sacpgw/gateway/mailbox"
)

// contextTxAttempts bounds the optimistic transactions of one update: a
// thread's context is written by its messages, a handful at a time.
const contextTxAttempts = 20

// RedisContexts is a ContextStore in Redis, shared by the replicas: one
// JSON string per thread at <prefix>:rc:<kind>:<id>, kept as long as the
// thread's history (Retention after its last change), changed under WATCH.
type RedisContexts struct {
	client    redis.UniversalClient
	prefix    string
	retention time.Duration
}

// NewRedisContexts returns the store; prefix "" is mailbox's default,
// retention 0 mailbox's default.
func NewRedisContexts(client redis.UniversalClient, prefix string, retention time.Duration) *RedisContexts {
	if prefix == "" {
		prefix = mailbox.DefaultRedisPrefix
	}
	if retention <= 0 {
		retention = mailbox.DefaultRetention
	}
	return &RedisContexts{client: client, prefix: prefix, retention: retention}
}

func (s *RedisContexts) key(thread string) string { return s.prefix + ":rc:" + thread }

// Get implements ContextStore.
func (s *RedisContexts) Get(ctx context.Context, thread string) (*ThreadContext, error) {
	raw, err := s.client.Get(ctx, s.key(thread)).Bytes()
	if errors.Is(err, redis.Nil) {
		return nil, nil
	}
	if err != nil {
		return nil, errorf("read the context of %s: %w", thread, err)
	}
	return decodeContext(raw)
}

// Update implements ContextStore.
func (s *RedisContexts) Update(ctx context.Context, thread string, fn func(*ThreadContext) error) (*ThreadContext, error) {
	key := s.key(thread)
	var out *ThreadContext
	var fnErr error
	for range contextTxAttempts {
		err := s.client.Watch(ctx, func(tx *redis.Tx) error {
			out, fnErr = nil, nil
			tc := &ThreadContext{}
			raw, err := tx.Get(ctx, key).Bytes()
			switch {
			case err == nil:
				if tc, err = decodeContext(raw); err != nil {
					return err
				}
			case !errors.Is(err, redis.Nil):
				return err
			}
			if fnErr = fn(tc); fnErr != nil {
				return fnErr
			}
			val, err := json.Marshal(tc)
			if err != nil {
				return err
			}
			_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
				p.Set(ctx, key, val, s.retention)
				return nil
			})
			if err == nil {
				out = tc
			}
			return err
		}, key)
		switch {
		case fnErr != nil:
			return nil, fnErr
		case errors.Is(err, redis.TxFailedErr):
			continue // another writer came first: read again
		case err != nil:
			return nil, errorf("update the context of %s: %w", thread, err)
		}
		return out, nil
	}
	return nil, errorf("update the context of %s: %d attempts lost to concurrent writers", thread, contextTxAttempts)
}
