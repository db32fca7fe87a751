package admin

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/team"
)

// KeyPrefix starts every key the admin API issues, so that a leaked one
// is recognisable (secret scanners, logs) as a gateway agent key.
const KeyPrefix = "gw-key-"

// usedEvery is how often a key's last use is written: far below what a
// person reading "last used" cares about, far above the request rate.
const usedEvery = time.Minute

// Keys is the identify stage's view of the issued keys (door.RuntimeKeys)
// and the teams' (team.Source): both read the store on every call, so a
// revocation or a change on one replica holds on every other at once.
type Keys struct {
	store *Store
	log   *slog.Logger
	now   func() time.Time

	mu sync.Mutex
	// used is when this replica last wrote each key's use.
	used map[string]time.Time
	// agents caches the decoded run-time agents by name, valid while the
	// stored record is byte for byte the same: decoding and checking an
	// entry per request would cost more than the read.
	agents map[string]cachedAgent
}

type cachedAgent struct {
	spec  string
	agent *roster.Agent
}

// NewKeys is the view of store.
func NewKeys(store *Store, log *slog.Logger) *Keys {
	return &Keys{store: store, log: log, now: time.Now, used: map[string]time.Time{}, agents: map[string]cachedAgent{}}
}

var (
	_ door.RuntimeKeys = (*Keys)(nil)
	_ team.Source      = (*Keys)(nil)
)

// AgentByKey implements door.RuntimeKeys. The key is found by its hash,
// not compared with every stored one: the hash of a random 256-bit key
// leaks nothing useful through a lookup's timing, and the store of every
// replica is read on each call so revocation holds at once.
func (k *Keys) AgentByKey(ctx context.Context, sum [sha256.Size]byte) (string, *roster.Agent, bool, error) {
	h := hex.EncodeToString(sum[:])
	key, err := k.store.KeyBySum(ctx, h)
	switch {
	case errors.Is(err, ErrNotFound):
		return "", nil, false, nil
	case err != nil:
		return "", nil, false, err
	case key.Expires != nil && !k.now().Before(*key.Expires):
		return "", nil, false, nil
	}
	k.touch(ctx, h)
	if !key.Runtime {
		return key.Agent, nil, true, nil
	}
	a, err := k.store.Agent(ctx, key.Agent)
	switch {
	case errors.Is(err, ErrNotFound):
		k.mu.Lock()
		delete(k.agents, key.Agent)
		k.mu.Unlock()
		return "", nil, false, nil
	case err != nil:
		return "", nil, false, err
	case a.Disabled:
		return "", nil, false, nil
	}
	ra, err := k.runtimeAgent(a)
	if err != nil {
		return "", nil, false, err
	}
	return a.Name, ra, true, nil
}

// runtimeAgent is a's roster entry, decoded once per stored version.
func (k *Keys) runtimeAgent(a Agent) (*roster.Agent, error) {
	k.mu.Lock()
	c, ok := k.agents[a.Name]
	k.mu.Unlock()
	if ok && c.spec == string(a.Spec) {
		return c.agent, nil
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(a.Spec, &fields); err != nil {
		return nil, fmt.Errorf("admin: stored agent %q: %w", a.Name, err)
	}
	// Its recipients were checked when it was written; what it may send
	// is decided again by the relay per message.
	ra := &roster.Agent{}
	if err := decodeEntry(fields, ra); err != nil {
		return nil, fmt.Errorf("admin: stored agent %q: %w", a.Name, err)
	}
	ra.ID = a.Name
	var ps problems
	roster.CheckRuntime(&ps, ra, nil) // fills the defaults
	k.mu.Lock()
	k.agents[a.Name] = cachedAgent{spec: string(a.Spec), agent: ra}
	k.mu.Unlock()
	return ra, nil
}

// touch writes the key's last use at most once a minute on this replica;
// a failed write is not retried before the minute is over either, so a
// store that is down costs one deadline per key and minute.
func (k *Keys) touch(ctx context.Context, h string) {
	now := k.now()
	k.mu.Lock()
	last, ok := k.used[h]
	if ok && now.Sub(last) < usedEvery && !now.Before(last) {
		k.mu.Unlock()
		return
	}
	k.used[h] = now
	k.mu.Unlock()
	if err := k.store.keyUsed(ctx, h, now); err != nil && k.log != nil {
		k.log.Warn("admin: a key's last use not recorded", "error", err.Error())
	}
}

// Team implements team.Source for the run-time teams.
func (k *Keys) Team(ctx context.Context, name string) (*team.Team, bool, error) {
	t, err := k.store.StoredTeam(ctx, name)
	switch {
	case errors.Is(err, ErrNotFound):
		return nil, false, nil
	case err != nil:
		return nil, false, err
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(t.Spec, &fields); err != nil {
		return nil, false, fmt.Errorf("admin: stored team %q: %w", name, err)
	}
	tt, err := teamOf(name, fields)
	if err != nil {
		return nil, false, fmt.Errorf("admin: stored team %q: %w", name, err)
	}
	return tt, true, nil
}

// newKey makes a key, its id and its hex SHA-256. The key goes to the
// caller once and nowhere else (never a log, an audit entry or an error).
func newKey() (key, id, sum string, err error) {
	b := make([]byte, 32+6)
	if _, err := rand.Read(b); err != nil {
		return "", "", "", fmt.Errorf("admin: make a key: %w", err)
	}
	key = KeyPrefix + base64.RawURLEncoding.EncodeToString(b[:32])
	h := sha256.Sum256([]byte(key))
	return key, "key_" + hex.EncodeToString(b[32:]), hex.EncodeToString(h[:]), nil
}
