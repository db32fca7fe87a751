package registry

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sacpgw/gateway/compact"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
)

// Spawned agents get a bearer token of their own, made by the gateway: the
// agent that asked for the spawn receives it once and hands it to the new
// agent. The gateway keeps only its SHA-256, as for configured agents.
const (
	// TokenPrefix starts every spawned agent's token, so that a leaked one
	// is recognisable (secret scanners, logs) as a gateway spawn token.
	TokenPrefix = "gw-spawn-"
	// tokenBytes of crypto/rand: 256 bits, beyond guessing.
	tokenBytes = 32
)

// The fixed limits of a spawned agent: nobody wrote an agents.yaml entry
// for it, so it gets a small allowance rather than the unlimited zero
// values of roster.Agent.
const (
	// SpawnedRequestsPerMinute is a spawned agent's rate_limit.
	SpawnedRequestsPerMinute = 60
	// SpawnedMaxRequestSize bounds a spawned agent's request bodies.
	SpawnedMaxRequestSize = config.Size(64 << 10)
	// SpawnedTokensPerHour bounds a spawned agent's model tokens (prompt
	// and completion): a run-time agent does not get an unlimited budget.
	SpawnedTokensPerHour = 100_000
	// DefaultSpawnTTL is a spawned agent's lifetime without authenticating
	// when the configuration gives none (config.Load's default).
	DefaultSpawnTTL = 7 * 24 * time.Hour
	// touchInterval is how often Touch writes one agent's last use to the
	// Store: far below any sensible TTL, far above the request rate.
	touchInterval = time.Minute
)

// tokenAgent is a spawned agent that can authenticate, as a view holds it.
type tokenAgent struct {
	hash  [sha256.Size]byte
	entry Entry
	agent *roster.Agent
}

// tokenAgents builds the authentication table of a view's spawned
// entries: the agents are made once per view, not per request.
func tokenAgents(spawned []Entry) []tokenAgent {
	var out []tokenAgent
	for _, e := range spawned {
		var h [sha256.Size]byte
		if !isHexSHA256(e.TokenSHA256) {
			// No token, or a hash that is not one: the agent cannot
			// authenticate, which is the safe reading of a damaged entry.
			continue
		}
		if _, err := hex.Decode(h[:], []byte(e.TokenSHA256)); err != nil {
			continue
		}
		out = append(out, tokenAgent{hash: h, entry: e, agent: spawnedAgent(e, h)})
	}
	return out
}

// spawnedAgent is the roster.Agent the identify stage sees for a spawned
// agent. Nothing else is granted: no capabilities, no allowed targets, no
// message rules (the wiring decides what SpawnedBy allows).
func spawnedAgent(e Entry, h [sha256.Size]byte) *roster.Agent {
	return &roster.Agent{
		ID: e.AgentName, Type: e.Type, Profile: e.Profile,
		Endpoint: e.Endpoint, SpawnedBy: spawnerID(e.SpawnedBy),
		RateLimit: config.Rate{N: SpawnedRequestsPerMinute, Period: time.Minute}, MaxRequestSize: SpawnedMaxRequestSize,
		TokenLimit:  config.Rate{N: SpawnedTokensPerHour, Period: time.Hour},
		TokenSHA256: hex.EncodeToString(h[:]), TokenHash: h,
	}
}

// spawnerID is the agent id of an entry's SpawnedBy ("agent:<id>"), or ""
// when no agent spawned it (an entry registered before reviewed spawns
// recorded their requester names the person): then the new agent answers
// to nobody.
func spawnerID(by string) string {
	id, ok := strings.CutPrefix(by, "agent:")
	if !ok {
		return ""
	}
	return id
}

// newToken makes a spawned agent's token and its hex SHA-256. The token
// goes to the requester once and nowhere else (never a log, an audit
// entry or an error).
func newToken() (token, sum string, err error) {
	b := make([]byte, tokenBytes)
	if _, err := rand.Read(b); err != nil {
		return "", "", fmt.Errorf("registry: make a token: %w", err)
	}
	token = TokenPrefix + base64.RawURLEncoding.EncodeToString(b)
	h := sha256.Sum256([]byte(token))
	return token, hex.EncodeToString(h[:]), nil
}

func isHexSHA256(s string) bool {
	if len(s) != 2*sha256.Size {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// expired: a spawned agent that has neither been spawned nor authenticated
// for longer than ttl. Configured agents never expire.
func expired(e Entry, ttl time.Duration, now time.Time) bool {
	if !e.Spawned {
		return false
	}
	last := e.SpawnedAt
	if e.LastUsedAt.After(last) {
		last = e.LastUsedAt
	}
	return now.Sub(last) > ttl
}

// agentPrompt is the compact SACP prompt of a spawned agent: compact's
// template, its role being the agent's name and what it is for.
func agentPrompt(e Entry) string {
	role := e.AgentName
	if e.Description != "" {
		role += ": " + e.Description
	}
	return compact.Prompt(compact.PromptAgent{Name: role, Verbs: e.SupportedVerbs, Tools: e.SupportedTools})
}

// AgentByToken returns the spawned agent whose token hashes to sum. Every
// spawned agent's hash is compared, in constant time and without stopping
// at a match, so timing says nothing of which one (or how much of one)
// matched. An expired agent does not authenticate. It reads the cached
// view (a Store read at most every second), not the Store per call; a
// Store that cannot be read is an error, not the last known agents: an
// agent retired meanwhile must not authenticate on a stale view.
func (r *Registry) AgentByToken(ctx context.Context, sum [32]byte) (*roster.Agent, bool, error) {
	v, err := r.current(ctx)
	if err != nil {
		return nil, false, err
	}
	var match *tokenAgent
	for i := range v.tokens {
		if subtle.ConstantTimeCompare(sum[:], v.tokens[i].hash[:]) == 1 {
			match = &v.tokens[i]
		}
	}
	// The view was built up to a second ago: the entry may have expired
	// since.
	if match == nil || expired(match.entry, v.spawnTTL, r.now()) {
		return nil, false, nil
	}
	return match.agent, true, nil
}

// Touch records that the spawned agent name authenticated, which keeps it
// alive (registry.spawn.ttl counts from its last use). The Store is
// written at most once a minute per agent on this replica: Touch is on
// every request's path. A failed write is not retried before the minute
// is over either, so a Store that is down costs one deadline per agent and
// minute, not one per request. An unknown name is ErrNotFound.
func (r *Registry) Touch(ctx context.Context, name string) error {
	now := r.now()
	r.touchMu.Lock()
	if last, ok := r.touched[name]; ok && now.Sub(last) < touchInterval && !now.Before(last) {
		r.touchMu.Unlock()
		return nil
	}
	r.touched[name] = now
	r.touchMu.Unlock()
	err := r.store.SetLastUsed(ctx, name, now.UTC())
	if errors.Is(err, ErrNotFound) {
		r.forget(name)
	}
	return err
}

// forget drops Touch's memory of name (gone from the Store).
func (r *Registry) forget(name string) {
	r.touchMu.Lock()
	delete(r.touched, name)
	r.touchMu.Unlock()
}

// Sweep removes the spawned agents that expired (not spawned nor
// authenticated for registry.spawn.ttl) from the Store and returns how
// many it removed. The view drops them as soon as they expire; Sweep
// frees their names and their Store space. An agent another replica swept
// first is not counted.
func (r *Registry) Sweep(ctx context.Context) (int, error) {
	list, err := r.store.List(ctx)
	if err != nil {
		return 0, fmt.Errorf("registry: sweep: %w", err)
	}
	r.mu.Lock()
	ttl := r.spawnTTL
	r.mu.Unlock()
	now := r.now()
	n := 0
	var errs []error
	for _, e := range list {
		if !expired(e, ttl, now) {
			continue
		}
		switch err := r.store.Remove(ctx, e.AgentName); {
		case err == nil:
			n++
			r.forget(e.AgentName)
			r.opts.log.Info("registry: expired spawned agent removed", "agent", e.AgentName, "spawned_by", e.SpawnedBy,
				"spawned_at", e.SpawnedAt, "last_used_at", e.LastUsedAt)
		case errors.Is(err, ErrNotFound):
			r.forget(e.AgentName)
		default:
			errs = append(errs, err)
		}
	}
	if n > 0 {
		r.invalidate()
	}
	if len(errs) > 0 {
		return n, fmt.Errorf("registry: sweep: %w", errors.Join(errs...))
	}
	return n, nil
}

// Retire removes the spawned agent name: it no longer authenticates,
// receives or appears in queries, on this replica at once and on the
// others within a second. A configured agent is ErrConfigured (agents.yaml
// is the operator's); an unknown one ErrNotFound.
func (r *Registry) Retire(ctx context.Context, name string) error {
	r.mu.Lock()
	_, configured := r.byName[name]
	r.mu.Unlock()
	if configured {
		return fmt.Errorf("%w: %q is in agents.yaml", ErrConfigured, name)
	}
	err := r.store.Remove(ctx, name)
	if errors.Is(err, ErrNotFound) {
		return fmt.Errorf("%w: %q", ErrNotFound, name)
	}
	if err != nil {
		return fmt.Errorf("registry: retire %q: %w", name, err)
	}
	r.forget(name)
	r.invalidate()
	return nil
}

// pendingKey names the token hash of an escalated spawn: the requester
// and the message the person judges, both of which the decision carries
// back (escalation.Decided's AgentID and Content). The same agent asking
// for the same spawn again replaces the earlier token: the latest one
// handed out is the one that works.
func pendingKey(agentID, content string) string {
	h := sha256.New()
	h.Write([]byte(agentID))
	h.Write([]byte{0})
	h.Write([]byte(content))
	return hex.EncodeToString(h.Sum(nil))
}

// holdToken keeps an escalated spawn's token hash until a person decides
// (at most registry.spawn.ttl: an approval later than that would hand the
// new agent a token its requester may have long discarded).
func (r *Registry) holdToken(ctx context.Context, key, sum string) error {
	r.mu.Lock()
	ttl := r.spawnTTL
	r.mu.Unlock()
	if err := r.store.PutPending(ctx, key, sum, r.now().Add(ttl)); err != nil {
		return fmt.Errorf("registry: keep the pending spawn's token hash: %w", err)
	}
	return nil
}

// takeToken returns and forgets an escalated spawn's token hash.
func (r *Registry) takeToken(ctx context.Context, key string) (string, bool, error) {
	sum, ok, err := r.store.TakePending(ctx, key, r.now())
	if err != nil {
		return "", false, fmt.Errorf("registry: read the pending spawn's token hash: %w", err)
	}
	return sum, ok, nil
}
