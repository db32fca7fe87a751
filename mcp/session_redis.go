package mcp

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/redis/go-redis/v9"
)

// RedisSessionsOptions configure RedisSessions; the zero value is the
// production setting.
type RedisSessionsOptions struct {
	// Prefix of every key ("": DefaultRedisPrefix); keep a {hash tag} in
	// it for Redis Cluster.
	Prefix string
	// Timeout bounds every call (zero: DefaultRedisTimeout).
	Timeout time.Duration
	// Idle ends a session unused this long (zero: one hour, as the memory
	// sessions); tests shorten it, as Redis' clock cannot be moved.
	Idle time.Duration
	// PerAgent bounds one agent's sessions (zero: 64, as the memory
	// sessions).
	PerAgent int
}

// RedisSessions keeps the sessions in Redis, shared by the replicas: a
// session initialized through one replica goes on through any, so an
// agent needs no sticky routing.
//
// A session is one JSON string key, <prefix>sess:<id>, that Redis expires
// when it has not been used for Idle (every Get sets the TTL again). Each
// agent's sessions are a sorted set, <prefix>agent:<agent>, scored by
// their last use on Redis' clock (TIME, so that replicas with skewed
// clocks agree on the order): a Put that takes an agent past PerAgent
// ends its least recently used, key and member together. The set expires
// with the agent's last used session, so an agent gone leaves nothing.
//
// Put, Get and Delete are Lua scripts, each one atomic step: an eviction
// cannot race a Get into keeping a session it removed. The scripts derive
// keys from the session (its agent's set, the evicted sessions' keys);
// the prefix's hash tag puts those in the slot of the keys they are
// given, which is what a Redis Cluster requires of a script.
//
// Every call has a deadline, whatever the caller's context says (it holds
// against a hung Redis when the client honours contexts, as
// limit.NewRedisClient's does). The stored session includes the server's
// own session id, which never leaves the gateway: Redis is the gateway's.
type RedisSessions struct {
	client   redis.UniversalClient
	sess     string // key prefix of the sessions
	agents   string // key prefix of the agents' sets
	timeout  time.Duration
	idle     time.Duration
	perAgent int
}

var _ Sessions = (*RedisSessions)(nil)

// NewRedisSessions returns the sessions on client (the caller's, never
// closed here).
func NewRedisSessions(client redis.UniversalClient, o RedisSessionsOptions) *RedisSessions {
	if o.Prefix == "" {
		o.Prefix = DefaultRedisPrefix
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultRedisTimeout
	}
	if o.Idle <= 0 {
		o.Idle = sessionIdle
	}
	if o.PerAgent <= 0 {
		o.PerAgent = sessionsPerAgent
	}
	return &RedisSessions{client: client, sess: o.Prefix + "sess:", agents: o.Prefix + "agent:",
		timeout: o.Timeout, idle: o.Idle, perAgent: o.PerAgent}
}

// storedSession is a Session as Redis keeps it: the same fields (a field
// added to Session does not compile until it is given its name here).
// Reading it back is not strict: a replica of the next version may add
// members during a rolling upgrade.
type storedSession struct {
	ID        string            `json:"id"`
	Agent     string            `json:"agent"`
	Server    string            `json:"server"`
	Upstream  string            `json:"upstream,omitempty"`
	Protocol  string            `json:"protocol"`
	Target    string            `json:"target"`
	Members   map[string]Member `json:"members,omitempty"`
	CursorKey string            `json:"cursor_key,omitempty"`
}

// stampLua is the score of a use of a session of the agent set KEYS[2]:
// Redis' clock in milliseconds, and never at or below the set's latest,
// so that two uses within a millisecond (or a clock set back) keep the
// order in which they happened. It is formatted with %.0f: Lua's own
// number-to-string conversion keeps 14 digits only.
const stampLua = `
local function stamp(set)
  local t = redis.call('TIME')
  local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
  local top = redis.call('ZRANGE', set, -1, -1, 'WITHSCORES')
  if top[2] and tonumber(top[2]) >= now then now = tonumber(top[2]) + 1 end
  return string.format('%.0f', now)
end
`

// putScript stores a session, marks it used, and ends the agent's least
// recently used sessions past the bound. Members of sessions that expired
// are dropped first (they count for nothing); they are looked for only
// when the set is past the bound, so a Put is O(1) until then.
//
// KEYS[1] the session, KEYS[2] its agent's set; ARGV[1] the JSON, ARGV[2]
// idle in ms, ARGV[3] the id, ARGV[4] the bound, ARGV[5] the sessions' key
// prefix. Returns the number of sessions ended.
var putScript = redis.NewScript(`if redis.replicate_commands then redis.replicate_commands() end
` + stampLua + `
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
redis.call('ZADD', KEYS[2], stamp(KEYS[2]), ARGV[3])
redis.call('PEXPIRE', KEYS[2], ARGV[2])
local bound = tonumber(ARGV[4])
local n = redis.call('ZCARD', KEYS[2])
if n <= bound then return 0 end
for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, -1)) do
  if redis.call('EXISTS', ARGV[5] .. id) == 0 then
    redis.call('ZREM', KEYS[2], id)
    n = n - 1
  end
end
local ended = 0
if n > bound then
  for _, id in ipairs(redis.call('ZRANGE', KEYS[2], 0, n - bound - 1)) do
    redis.call('DEL', ARGV[5] .. id)
    redis.call('ZREM', KEYS[2], id)
    ended = ended + 1
  end
end
return ended
`)

// getScript returns the session KEYS[1] and marks it used: its TTL and
// its agent's set's are set again, its score is now. A value that is not
// this session is returned as it is, untouched, for Get to refuse.
//
// ARGV[1] idle in ms, ARGV[2] the agents' sets' key prefix, ARGV[3] the
// id.
var getScript = redis.NewScript(`if redis.replicate_commands then redis.replicate_commands() end
` + stampLua + `
local v = redis.call('GET', KEYS[1])
if not v then return false end
local ok, s = pcall(cjson.decode, v)
if not ok or type(s) ~= 'table' or s['id'] ~= ARGV[3] or type(s['agent']) ~= 'string' then return v end
local set = ARGV[2] .. s['agent']
redis.call('PEXPIRE', KEYS[1], ARGV[1])
redis.call('ZADD', set, stamp(set), ARGV[3])
redis.call('PEXPIRE', set, ARGV[1])
return v
`)

// deleteScript removes the session KEYS[1] and its member of its agent's
// set. ARGV[1] the agents' sets' key prefix, ARGV[2] the id.
var deleteScript = redis.NewScript(`
local v = redis.call('GET', KEYS[1])
if not v then return 0 end
redis.call('DEL', KEYS[1])
local ok, s = pcall(cjson.decode, v)
if ok and type(s) == 'table' and type(s['agent']) == 'string' then
  redis.call('ZREM', ARGV[1] .. s['agent'], ARGV[2])
end
return 1
`)

// Put implements Sessions.
func (r *RedisSessions) Put(ctx context.Context, s Session) error {
	if !mintedSessionID(s.ID) || s.Agent == "" {
		// Get finds only minted ids: a session stored under another would
		// be lost at once.
		return errors.New("mcp: session store: a session needs an id of the gateway's and an agent")
	}
	v, err := json.Marshal(storedSession(s))
	if err != nil {
		return fmt.Errorf("mcp: session store: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	err = putScript.Run(ctx, r.client, []string{r.sess + s.ID, r.agents + s.Agent},
		v, r.idleMS(), s.ID, strconv.Itoa(r.perAgent), r.sess).Err()
	if err != nil {
		return fmt.Errorf("mcp: session store: put: %w", err)
	}
	return nil
}

// Get implements Sessions. An id the gateway cannot have minted is not
// found without asking Redis: the agent's header never names a key of
// its choosing.
func (r *RedisSessions) Get(ctx context.Context, id string) (Session, bool, error) {
	if !mintedSessionID(id) {
		return Session{}, false, nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	v, err := getScript.Run(ctx, r.client, []string{r.sess + id}, r.idleMS(), r.agents, id).Text()
	switch {
	case errors.Is(err, redis.Nil):
		return Session{}, false, nil
	case err != nil:
		return Session{}, false, fmt.Errorf("mcp: session store: get: %w", err)
	}
	var ss storedSession
	// A value that does not read back as this very session is an error,
	// not a session: the door refuses (503) rather than guess its agent.
	if err := json.Unmarshal([]byte(v), &ss); err != nil {
		return Session{}, false, fmt.Errorf("mcp: session store: session %s: %w", id, err)
	}
	if ss.ID != id || ss.Agent == "" {
		return Session{}, false, fmt.Errorf("mcp: session store: session %s holds another session or no agent", id)
	}
	return Session(ss), true, nil
}

// Delete implements Sessions.
func (r *RedisSessions) Delete(ctx context.Context, id string) error {
	if !mintedSessionID(id) {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	if err := deleteScript.Run(ctx, r.client, []string{r.sess + id}, r.agents, id).Err(); err != nil {
		return fmt.Errorf("mcp: session store: delete: %w", err)
	}
	return nil
}

// idleMS is the idle expiry as PX takes it (at least 1: PX 0 is an error).
func (r *RedisSessions) idleMS() string {
	return strconv.FormatInt(max(1, r.idle.Milliseconds()), 10)
}

// mintedSessionID reports whether id has the form newSessionID gives.
func mintedSessionID(id string) bool {
	const prefix = "mcp-"
	if len(id) != len(prefix)+32 || id[:len(prefix)] != prefix {
		return false
	}
	for _, c := range id[len(prefix):] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
