package mcp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultRedisPrefix is where the door's Redis state lives: grants under
// <prefix>grant:, sessions under <prefix>sess: and each agent's set of
// sessions under <prefix>agent:. Its hash tag keeps them in one Redis
// Cluster slot: the session scripts touch a session, its agent's set and
// the sessions they evict, keys they derive from what they read.
// (Without the tag, as before, sessions and grants of an earlier version
// are not found after the upgrade: an agent initializes again.)
const DefaultRedisPrefix = "{gw:mcp}:"

// DefaultRedisTimeout bounds each Redis call of RedisGrants and
// RedisSessions when their caller gives no timeout: a Redis that hangs
// must fail the agent's request, not hold it.
const DefaultRedisTimeout = 2 * time.Second

// redisDefaults are the prefix and timeout of the door's Redis state when
// the caller gives none.
func redisDefaults(prefix string, timeout time.Duration) (string, time.Duration) {
	if prefix == "" {
		prefix = DefaultRedisPrefix
	}
	if timeout <= 0 {
		timeout = DefaultRedisTimeout
	}
	return prefix, timeout
}

// RedisGrants keeps the grants in Redis, shared by the replicas: an
// approval heard by one replica lets the call through on any, and still
// only once. Each grant is one string key (the escalation's id) that
// Redis expires at the grant's TTL; Take is GETDEL, so of two replicas
// taking the same grant at once exactly one gets it (Redis 6.2 or later:
// an older Redis answers GETDEL with an error, and the call is refused).
//
// Every call has a deadline, whatever the caller's context says. The
// deadline holds against a Redis that hangs only when the client honours
// contexts (ContextTimeoutEnabled, as limit.NewRedisClient sets it).
type RedisGrants struct {
	client  redis.UniversalClient
	prefix  string
	timeout time.Duration
}

var _ Grants = (*RedisGrants)(nil)

// NewRedisGrants returns the grants on client (the caller's, never
// closed here). prefix "" is DefaultRedisPrefix; timeout bounds every
// call (zero: DefaultRedisTimeout).
func NewRedisGrants(client redis.UniversalClient, prefix string, timeout time.Duration) *RedisGrants {
	prefix, timeout = redisDefaults(prefix, timeout)
	return &RedisGrants{client: client, prefix: prefix + "grant:", timeout: timeout}
}

// Grant implements Grants.
func (g *RedisGrants) Grant(ctx context.Context, key, escalationID string, ttl time.Duration) error {
	ms := ttl.Milliseconds()
	if ms < 1 {
		// PX 0 is an error in Redis, and a grant that cannot be used is
		// none: say so rather than store a grant that never expires.
		return fmt.Errorf("mcp: grant of escalation %s: a TTL under a millisecond (%v)", escalationID, ttl)
	}
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	if err := g.client.Set(ctx, g.prefix+key, escalationID, time.Duration(ms)*time.Millisecond).Err(); err != nil {
		return fmt.Errorf("mcp: grant of escalation %s: %w", escalationID, err)
	}
	return nil
}

// Take implements Grants. Any error of Redis is an error, never a grant:
// the door refuses the call.
func (g *RedisGrants) Take(ctx context.Context, key string) (string, bool, error) {
	ctx, cancel := context.WithTimeout(ctx, g.timeout)
	defer cancel()
	id, err := g.client.GetDel(ctx, g.prefix+key).Result()
	switch {
	case errors.Is(err, redis.Nil):
		return "", false, nil
	case err != nil:
		return "", false, fmt.Errorf("mcp: take a grant: %w", err)
	}
	return id, true, nil
}
