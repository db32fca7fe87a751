package ledger

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultKeyPrefix is the prefix of the Redis hashes, one per day:
// gw:usage:2026-11-29, fields "<subject>|req", "|tok" and "|usd". Each
// command touches one key, so a Cluster may place the days anywhere.
const DefaultKeyPrefix = "gw:usage:"

// keep is how long a day's hash outlives its day: the page's Days and a
// margin for time zones and late flushes.
const keep = (Days + 2) * 24 * time.Hour

// RedisStore keeps the days in Redis, shared by every replica.
type RedisStore struct {
	client redis.UniversalClient
	prefix string
}

// NewRedisStore returns a store on client (the caller's; never closed
// here) under prefix ("" is DefaultKeyPrefix).
func NewRedisStore(client redis.UniversalClient, prefix string) *RedisStore {
	if prefix == "" {
		prefix = DefaultKeyPrefix
	}
	return &RedisStore{client: client, prefix: prefix}
}

var fieldSuffix = [...]string{"|req", "|tok", "|usd"}

// Add implements Store: one pipeline of HINCRBYs on the day's hash and its
// expiry.
func (s *RedisStore) Add(ctx context.Context, day string, counts map[string]Counts) error {
	key := s.prefix + day
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for subj, c := range counts {
			for i, v := range [...]int64{c.Requests, c.Tokens, c.MicroUSD} {
				if v != 0 {
					p.HIncrBy(ctx, key, subj+fieldSuffix[i], v)
				}
			}
		}
		p.Expire(ctx, key, keep)
		return nil
	})
	if err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// Read implements Store: one HGETALL per day, in one pipeline.
func (s *RedisStore) Read(ctx context.Context, days []string) (map[string]map[string]Counts, error) {
	cmds := make([]*redis.MapStringStringCmd, len(days))
	_, err := s.client.Pipelined(ctx, func(p redis.Pipeliner) error {
		for i, d := range days {
			cmds[i] = p.HGetAll(ctx, s.prefix+d)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("redis: %w", err)
	}
	out := map[string]map[string]Counts{}
	for i, d := range days {
		m := map[string]Counts{}
		for f, v := range cmds[i].Val() {
			subj, kind, ok := strings.Cut(f, "|")
			n, err := strconv.ParseInt(v, 10, 64)
			if !ok || err != nil {
				continue // not a field this package writes
			}
			c := m[subj]
			switch kind {
			case "req":
				c.Requests = n
			case "tok":
				c.Tokens = n
			case "usd":
				c.MicroUSD = n
			default:
				continue
			}
			m[subj] = c
		}
		out[d] = m
	}
	return out, nil
}
