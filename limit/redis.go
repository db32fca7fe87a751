package limit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/go-redis/redis_rate/v10"
	"github.com/redis/go-redis/v9"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/redisx"
)

// Default key prefixes. redis_rate adds its own "rate:" in front of the
// limiter's keys.
const (
	DefaultRateKeyPrefix   = "gw:rl:"
	DefaultBudgetKeyPrefix = "gw:budget:"
)

// NewRedisClient returns a client for a redis:// or rediss:// URL (timeouts,
// pool size and retries may be set as URL query parameters, e.g.
// ?dial_timeout=1s&read_timeout=500ms), as NewStateClient does for one
// node.
func NewRedisClient(url string, timeout time.Duration) (redis.UniversalClient, error) {
	return NewStateClient(redisx.Settings{URL: url}, timeout)
}

// NewStateClient returns a client for what s names: one node, a
// Sentinel-managed primary or a Cluster (redisx.NewClient). Context
// deadlines bound network calls. The client reconnects by itself after
// Redis restarts, and follows failovers and slot moves.
//
// timeout (state.timeout; zero keeps the URL's or go-redis' defaults) is
// the deadline of every call: dialing, reading, writing and waiting for a
// pooled connection, so a hung Redis costs a request at most that long
// (blocking reads such as XREADGROUP BLOCK add their block time). Every
// failure that is not Redis' own reply is marked
// apierror.ErrStateUnavailable, so the front doors answer 503 with
// Retry-After instead of 500.
func NewStateClient(s redisx.Settings, timeout time.Duration) (redis.UniversalClient, error) {
	c, err := redisx.NewClient(s, redisx.Timeouts{Call: timeout})
	if err != nil {
		return nil, err
	}
	c.AddHook(unavailableHook{})
	if cc, ok := c.(*redis.ClusterClient); ok {
		// A transaction (WATCH … EXEC) runs on a node's own client,
		// under the node's hooks, not the cluster's.
		cc.OnNewNode(func(n *redis.Client) { n.AddHook(unavailableHook{}) })
	}
	return c, nil
}

// unavailableHook marks transport failures (not Redis' replies, not
// redis.Nil) as apierror.ErrStateUnavailable.
type unavailableHook struct{}

func (unavailableHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (unavailableHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		mark(cmd)
		return MarkUnavailable(err)
	}
}

func (unavailableHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, c := range cmds {
			mark(c)
		}
		return MarkUnavailable(err)
	}
}

func mark(cmd redis.Cmder) {
	if err := cmd.Err(); err != nil && isUnavailable(err) {
		cmd.SetErr(MarkUnavailable(err))
	}
}

// MarkUnavailable is err marked as apierror.ErrStateUnavailable when it is
// a failure to reach Redis (not one of its replies, nor redis.Nil), unless
// it is marked already (NewRedisClient's hook does it for its clients): the
// client gets a 503 it may retry, not a 500.
func MarkUnavailable(err error) error {
	if err != nil && isUnavailable(err) {
		return fmt.Errorf("%w: %w", apierror.ErrStateUnavailable, err)
	}
	return err
}

// isUnavailable: a failure to reach Redis, not an answer from it.
func isUnavailable(err error) bool {
	if errors.Is(err, redis.Nil) || errors.Is(err, apierror.ErrStateUnavailable) {
		return false
	}
	var reply redis.Error
	return !errors.As(err, &reply)
}

// RedisOption configures Redis and RedisBudget.
type RedisOption func(*redisConfig)

type redisConfig struct{ prefix string }

// WithKeyPrefix sets the prefix of every key, so that several gateways (or
// environments) can share one Redis.
func WithKeyPrefix(p string) RedisOption { return func(c *redisConfig) { c.prefix = p } }

// keyPrefix is the prefix opts set, def when none does.
func keyPrefix(def string, opts []RedisOption) string {
	c := redisConfig{prefix: def}
	for _, o := range opts {
		o(&c)
	}
	return c.prefix
}

// Redis is a Limiter shared by all replicas: GCRA (go-redis/redis_rate)
// with burst = N and N per Period, evaluated atomically on the Redis server
// clock. Its keys expire by themselves once the limiter is full again.
type Redis struct {
	client redis.UniversalClient
	rl     *redis_rate.Limiter
	prefix string
}

var (
	_ Limiter = (*Redis)(nil)
	_ Readier = (*Redis)(nil)
)

// NewRedis returns a limiter on client. The client is the caller's: Redis
// never closes it.
func NewRedis(client redis.UniversalClient, opts ...RedisOption) *Redis {
	return &Redis{client: client, rl: redis_rate.NewLimiter(client), prefix: keyPrefix(DefaultRateKeyPrefix, opts)}
}

// Allow implements Limiter. A cost larger than N can never pass; like
// Memory, it is refused with RetryAfter set to the full period.
func (r *Redis) Allow(ctx context.Context, key string, rule Rule, cost int) (Result, error) {
	if rule.IsZero() {
		return Result{Allowed: true, Limit: 0, Remaining: math.MaxInt32}, nil
	}
	lim := redis_rate.Limit{Rate: rule.N, Burst: rule.N, Period: rule.Period}
	n := cost
	if cost > rule.N {
		n = 0 // only look, to report what remains
	}
	rr, err := r.rl.AllowN(ctx, r.prefix+key, lim, n)
	if err != nil {
		return Result{}, fmt.Errorf("redis rate limit: %w", err)
	}
	res := Result{
		Allowed:    rr.Allowed >= n && n == cost,
		Limit:      rule.N,
		Remaining:  max(0, rr.Remaining),
		RetryAfter: max(0, rr.RetryAfter),
		Reset:      max(0, rr.ResetAfter),
	}
	if n != cost {
		res.RetryAfter = rule.Period
	}
	return res, nil
}

// Ready pings Redis; it is meant for /readyz.
func (r *Redis) Ready(ctx context.Context) error { return ping(ctx, r.client) }

func ping(ctx context.Context, c redis.UniversalClient) error {
	if err := c.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("redis: %w", err)
	}
	return nil
}

// budgetScript is a token bucket kept in a hash {tokens, ts, cap, period}
// and refilled on the server clock, so that every replica sees the same
// bucket and a reservation is checked and debited in one step.
var budgetScript = redis.NewScript(budgetLua)

const budgetLua = `-- Token bucket for limit.RedisBudget.
-- KEYS[1]  the bucket (a hash: tokens, ts, cap, period)
-- ARGV[1]  capacity N
-- ARGV[2]  period in microseconds (the bucket refills N per period)
-- ARGV[3]  "reserve" (take ARGV[4] tokens if available) or
--          "settle" (add ARGV[4] tokens, negative to debit; debt allowed)
-- ARGV[4]  tokens
-- Returns {allowed, floor(tokens), reset µs, retry µs}.
-- The server clock (TIME) is the only clock, so replicas with skewed clocks
-- agree. A changed capacity or period (a config reload) keeps what was
-- spent under the old one (up to one whole capacity of debt): a lowered
-- budget must not grant a fresh bucket.
if redis.replicate_commands then redis.replicate_commands() end

local key = KEYS[1]
local cap = tonumber(ARGV[1])
local period = tonumber(ARGV[2])
local op = ARGV[3]
local n = tonumber(ARGV[4])
local rate = cap / period -- tokens per microsecond

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])

local h = redis.call('HMGET', key, 'tokens', 'ts', 'cap', 'period')
local tokens, ts = tonumber(h[1]), tonumber(h[2])
local oldcap, oldperiod = tonumber(h[3]), tonumber(h[4])
if tokens == nil or ts == nil or oldcap == nil or oldperiod == nil or oldperiod <= 0 then
  tokens, ts = cap, now
elseif oldcap ~= cap or oldperiod ~= period then
  if now > ts then
    tokens = math.min(oldcap, tokens + (now - ts) * oldcap / oldperiod)
  end
  tokens, ts = math.max(-cap, cap - (oldcap - tokens)), now
end
if now > ts then
  tokens = math.min(cap, tokens + (now - ts) * rate)
  ts = now
end

local allowed = 1
local retry = 0
if op == 'reserve' then
  if n > cap or tokens < n then
    allowed = 0
    retry = math.ceil((n - tokens) / rate)
  else
    tokens = tokens - n
  end
else
  tokens = math.min(cap, tokens + n)
end

local reset = math.ceil((cap - tokens) / rate)
redis.call('HSET', key,
  'tokens', string.format('%.17g', tokens),
  'ts', string.format('%.0f', ts),
  'cap', ARGV[1],
  'period', ARGV[2])
-- A full bucket is the same as no bucket: let the key go then.
redis.call('PEXPIRE', key, math.ceil(reset / 1000) + 1000)

return {allowed, math.floor(tokens), reset, retry}
`

// RedisBudget is a Budget shared by all replicas. Reserve and Settle each
// run one Lua script, so concurrent reservations from any number of
// replicas cannot take more than the bucket holds. A bucket's key expires
// once it would be full again, which is the same as a missing key.
type RedisBudget struct {
	client redis.UniversalClient
	prefix string
}

var (
	_ Budget  = (*RedisBudget)(nil)
	_ Readier = (*RedisBudget)(nil)
)

// NewRedisBudget returns a budget on client. The client is the caller's.
func NewRedisBudget(client redis.UniversalClient, opts ...RedisOption) *RedisBudget {
	return &RedisBudget{client: client, prefix: keyPrefix(DefaultBudgetKeyPrefix, opts)}
}

// Reserve implements Budget. A request larger than the whole budget can
// never pass, so it is refused with RetryAfter set to the full period.
func (b *RedisBudget) Reserve(ctx context.Context, key string, rule Rule, n int) (Result, error) {
	if rule.IsZero() {
		return Result{Allowed: true, Remaining: math.MaxInt32}, nil
	}
	v, err := b.run(ctx, key, rule, "reserve", n)
	if err != nil {
		return Result{}, fmt.Errorf("redis budget reserve: %w", err)
	}
	res := Result{
		Allowed:    v[0] == 1,
		Limit:      rule.N,
		Remaining:  int(max(0, v[1])),
		Reset:      time.Duration(v[2]) * time.Microsecond,
		RetryAfter: time.Duration(v[3]) * time.Microsecond,
	}
	if n > rule.N {
		res.RetryAfter = rule.Period
	}
	return res, nil
}

// Settle implements Budget: it debits actual-reserved (which may leave the
// bucket in debt, delaying later requests) or refunds the difference
// (at most the reservation: a negative actual counts as nothing), up to
// the capacity.
func (b *RedisBudget) Settle(ctx context.Context, key string, rule Rule, reserved, actual int) error {
	actual = max(actual, 0) // nothing spent refunds more than it reserved
	if rule.IsZero() || reserved == actual {
		return nil
	}
	if _, err := b.run(ctx, key, rule, "settle", reserved-actual); err != nil {
		return fmt.Errorf("redis budget settle: %w", err)
	}
	return nil
}

// Ready pings Redis; it is meant for /readyz.
func (b *RedisBudget) Ready(ctx context.Context) error { return ping(ctx, b.client) }

// run returns {allowed, floor(tokens), reset µs, retry µs}.
func (b *RedisBudget) run(ctx context.Context, key string, rule Rule, op string, n int) ([4]int64, error) {
	var out [4]int64
	period := rule.Period.Microseconds()
	if period <= 0 {
		period = 1
	}
	vals, err := budgetScript.Run(ctx, b.client, []string{b.prefix + key}, rule.N, period, op, n).Int64Slice()
	if err != nil {
		return out, err
	}
	if len(vals) != len(out) {
		return out, fmt.Errorf("budget script returned %d values, want %d", len(vals), len(out))
	}
	copy(out[:], vals)
	return out, nil
}
