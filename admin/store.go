package admin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"sort"
	"sync"
	"time"

	"github.com/sacpgw/gateway/internal/atomicfile"
)

var (
	// ErrNotFound: no agent, key or team by that name.
	ErrNotFound = errors.New("not found")
	// ErrExists: the name is taken.
	ErrExists = errors.New("already exists")
)

// The collections of the store: each maps an id to one JSON record.
const (
	collAgents = "agents" // name → Agent
	collKeys   = "keys"   // hex SHA-256 of the key → Key
	collUsed   = "used"   // hex SHA-256 of the key → last use (a JSON time)
	collTeams  = "teams"  // name → Team
)

// kv is what a backend does: records of JSON by collection and id. Both
// backends (this process with a file, Redis) are this small so that the
// typed rules (what a key names, what a delete removes) are written once.
type kv interface {
	// create stores val under id; ErrExists if id is taken.
	create(ctx context.Context, coll, id string, val []byte) error
	// update replaces the record by fn's result, atomically with respect
	// to other updates; ErrNotFound if there is none. fn may run more than
	// once.
	update(ctx context.Context, coll, id string, fn func([]byte) ([]byte, error)) ([]byte, error)
	// put stores val whatever was there.
	put(ctx context.Context, coll, id string, val []byte) error
	// get returns the record; ErrNotFound if there is none.
	get(ctx context.Context, coll, id string) ([]byte, error)
	// list returns every record of coll by id.
	list(ctx context.Context, coll string) (map[string][]byte, error)
	// del removes the records; ErrNotFound if the first is absent.
	del(ctx context.Context, coll string, ids ...string) error
}

// FileName is the memory backend's file in state.dir.
const FileName = "admin.json"

// memoryKV keeps the records in this process and, with a directory, in
// one file there, written whole before a change is answered (a change the
// file refused is not kept either), so that run-time agents, keys and
// teams survive a restart with state.backend memory.
type memoryKV struct {
	dir  string
	mu   sync.Mutex
	data map[string]map[string]json.RawMessage
}

// newMemoryKV opens dir's file ("" keeps nothing on disk). A file that
// cannot be read is an error: starting empty would drop every key, and the
// next write would destroy the evidence.
func newMemoryKV(dir string) (*memoryKV, error) {
	m := &memoryKV{dir: dir, data: map[string]map[string]json.RawMessage{}}
	if dir == "" {
		return m, nil
	}
	raw, err := readFile(dir)
	if err != nil || raw == nil {
		return m, err
	}
	if err := json.Unmarshal(raw, &m.data); err != nil {
		return nil, fmt.Errorf("admin: %s is not a valid file of run-time agents, keys and teams (fix or remove it): %w", FileName, err)
	}
	if m.data == nil {
		m.data = map[string]map[string]json.RawMessage{}
	}
	return m, nil
}

// change applies fn to a copy of coll and keeps the copy once the file
// holds it.
func (m *memoryKV) change(coll string, fn func(map[string]json.RawMessage) error) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	next := maps.Clone(m.data[coll])
	if next == nil {
		next = map[string]json.RawMessage{}
	}
	if err := fn(next); err != nil {
		return err
	}
	if m.dir != "" {
		all := maps.Clone(m.data)
		all[coll] = next
		raw, err := json.MarshalIndent(all, "", "  ")
		if err != nil {
			return fmt.Errorf("admin: encode %s: %w", FileName, err)
		}
		renamed, err := atomicfile.Write(m.dir, FileName, append(raw, '\n'))
		if !renamed {
			return fmt.Errorf("admin: %w", err)
		}
		// Renamed: the file holds next even if syncing its directory
		// failed, and memory must not disagree with a restart.
	}
	m.data[coll] = next
	return nil
}

func (m *memoryKV) create(_ context.Context, coll, id string, val []byte) error {
	return m.change(coll, func(c map[string]json.RawMessage) error {
		if _, ok := c[id]; ok {
			return ErrExists
		}
		c[id] = val
		return nil
	})
}

func (m *memoryKV) update(_ context.Context, coll, id string, fn func([]byte) ([]byte, error)) ([]byte, error) {
	var out []byte
	err := m.change(coll, func(c map[string]json.RawMessage) error {
		cur, ok := c[id]
		if !ok {
			return ErrNotFound
		}
		next, err := fn(cur)
		if err != nil {
			return err
		}
		c[id], out = next, next
		return nil
	})
	return out, err
}

func (m *memoryKV) put(_ context.Context, coll, id string, val []byte) error {
	return m.change(coll, func(c map[string]json.RawMessage) error {
		c[id] = val
		return nil
	})
}

func (m *memoryKV) get(_ context.Context, coll, id string) ([]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	v, ok := m.data[coll][id]
	if !ok {
		return nil, ErrNotFound
	}
	return v, nil
}

func (m *memoryKV) list(_ context.Context, coll string) (map[string][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[string][]byte, len(m.data[coll]))
	for k, v := range m.data[coll] {
		out[k] = v
	}
	return out, nil
}

func (m *memoryKV) del(_ context.Context, coll string, ids ...string) error {
	return m.change(coll, func(c map[string]json.RawMessage) error {
		if len(ids) > 0 {
			if _, ok := c[ids[0]]; !ok {
				return ErrNotFound
			}
		}
		for _, id := range ids {
			delete(c, id)
		}
		return nil
	})
}

// Entry is what the admin API keeps of every agent and team it created.
type Entry struct {
	Name string `json:"name"`
	// Spec is the fields as they were accepted: an agent's agents.yaml
	// entry in JSON without the name (checked by CheckRuntime), a team's
	// description, rate_limit, token_limit and budget.
	Spec    json.RawMessage `json:"spec"`
	Created time.Time       `json:"created_at"`
	Updated time.Time       `json:"updated_at"`
	// By is who made the last change (a person's name, never a key).
	By string `json:"by"`
}

// Agent is an agent created through the admin API.
type Agent struct {
	Entry
	Disabled bool `json:"disabled"`
}

// Key is one issued key of an agent: its SHA-256, never the key.
type Key struct {
	ID    string `json:"id"`
	Agent string `json:"agent"`
	// Runtime: the agent was created through the API. Such a key dies with
	// its agent: it must never authenticate as an agents.yaml agent that
	// later takes the name.
	Runtime bool       `json:"runtime"`
	SHA256  string     `json:"sha256"`
	Created time.Time  `json:"created_at"`
	Expires *time.Time `json:"expires_at,omitempty"`
	By      string     `json:"by"`
}

// Team is a team created through the admin API.
type Team struct{ Entry }

// Store keeps run-time agents, their keys and teams in the state backend.
type Store struct{ kv kv }

// NewMemoryStore keeps everything in this process and, with dir, in a
// file there (state.backend memory: state.dir).
func NewMemoryStore(dir string) (*Store, error) {
	m, err := newMemoryKV(dir)
	if err != nil {
		return nil, err
	}
	return &Store{kv: m}, nil
}

func decode[T any](raw []byte, what string) (T, error) {
	var v T
	if err := json.Unmarshal(raw, &v); err != nil {
		return v, fmt.Errorf("admin: stored %s: %w", what, err)
	}
	return v, nil
}

// createRec stores v under id in coll; ErrExists if id is taken.
func createRec[T any](ctx context.Context, kv kv, coll, id string, v T) error {
	raw, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return kv.create(ctx, coll, id, raw)
}

// updateRec applies fn to the record id of coll.
func updateRec[T any](ctx context.Context, kv kv, coll, id string, fn func(*T) error) (T, error) {
	var out T
	_, err := kv.update(ctx, coll, id, func(cur []byte) ([]byte, error) {
		v, err := decode[T](cur, coll)
		if err != nil {
			return nil, err
		}
		if err := fn(&v); err != nil {
			return nil, err
		}
		out = v
		return json.Marshal(v)
	})
	return out, err
}

// getRec returns the record id of coll.
func getRec[T any](ctx context.Context, kv kv, coll, id string) (T, error) {
	raw, err := kv.get(ctx, coll, id)
	if err != nil {
		var zero T
		return zero, err
	}
	return decode[T](raw, coll)
}

// CreateAgent stores a; ErrExists if the name is taken.
func (s *Store) CreateAgent(ctx context.Context, a Agent) error {
	return createRec(ctx, s.kv, collAgents, a.Name, a)
}

// UpdateAgent applies fn to the stored agent name.
func (s *Store) UpdateAgent(ctx context.Context, name string, fn func(*Agent) error) (Agent, error) {
	return updateRec(ctx, s.kv, collAgents, name, fn)
}

// Agent returns the agent name.
func (s *Store) Agent(ctx context.Context, name string) (Agent, error) {
	return getRec[Agent](ctx, s.kv, collAgents, name)
}

// Agents returns every run-time agent, by name.
func (s *Store) Agents(ctx context.Context) ([]Agent, error) {
	return listOf[Agent](ctx, s.kv, collAgents, func(a Agent) string { return a.Name })
}

func listOf[T any](ctx context.Context, kv kv, coll string, name func(T) string) ([]T, error) {
	all, err := kv.list(ctx, coll)
	if err != nil {
		return nil, err
	}
	out := make([]T, 0, len(all))
	for _, raw := range all {
		v, err := decode[T](raw, coll)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	sort.Slice(out, func(i, j int) bool { return name(out[i]) < name(out[j]) })
	return out, nil
}

// DeleteAgent removes the agent and then its keys: once the agent is
// gone its keys no longer authenticate (AgentByKey), so a failure half-way
// leaves nothing usable behind.
func (s *Store) DeleteAgent(ctx context.Context, name string) error {
	if err := s.kv.del(ctx, collAgents, name); err != nil {
		return err
	}
	keys, err := s.Keys(ctx, name)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if err := s.kv.del(ctx, collKeys, k.SHA256); err != nil && !errors.Is(err, ErrNotFound) {
			return err
		}
		_ = s.kv.del(ctx, collUsed, k.SHA256)
	}
	return nil
}

// AddKey stores k.
func (s *Store) AddKey(ctx context.Context, k Key) error {
	return createRec(ctx, s.kv, collKeys, k.SHA256, k)
}

// KeyInfo is a key as the API lists it.
type KeyInfo struct {
	Key
	LastUsed *time.Time
}

// Keys returns agent's keys, oldest first.
func (s *Store) Keys(ctx context.Context, agent string) ([]Key, error) {
	all, err := listOf[Key](ctx, s.kv, collKeys, func(k Key) string { return k.Created.Format(time.RFC3339Nano) + k.ID })
	if err != nil {
		return nil, err
	}
	out := all[:0]
	for _, k := range all {
		if k.Agent == agent {
			out = append(out, k)
		}
	}
	return out, nil
}

// KeysInfo is Keys with each key's last use.
func (s *Store) KeysInfo(ctx context.Context, agent string) ([]KeyInfo, error) {
	keys, err := s.Keys(ctx, agent)
	if err != nil {
		return nil, err
	}
	used, err := s.kv.list(ctx, collUsed)
	if err != nil {
		return nil, err
	}
	out := make([]KeyInfo, 0, len(keys))
	for _, k := range keys {
		ki := KeyInfo{Key: k}
		var t time.Time
		if json.Unmarshal(used[k.SHA256], &t) == nil && !t.IsZero() {
			ki.LastUsed = &t
		}
		out = append(out, ki)
	}
	return out, nil
}

// KeyBySum returns the key whose SHA-256 is sum (lowercase hex).
func (s *Store) KeyBySum(ctx context.Context, sum string) (Key, error) {
	return getRec[Key](ctx, s.kv, collKeys, sum)
}

// RevokeKey removes agent's key id; ErrNotFound if agent has none by id.
func (s *Store) RevokeKey(ctx context.Context, agent, id string) error {
	keys, err := s.Keys(ctx, agent)
	if err != nil {
		return err
	}
	for _, k := range keys {
		if k.ID == id {
			if err := s.kv.del(ctx, collKeys, k.SHA256); err != nil {
				return err
			}
			_ = s.kv.del(ctx, collUsed, k.SHA256)
			return nil
		}
	}
	return ErrNotFound
}

// keyUsed records the last use of the key sum.
func (s *Store) keyUsed(ctx context.Context, sum string, at time.Time) error {
	raw, err := json.Marshal(at.UTC())
	if err != nil {
		return err
	}
	return s.kv.put(ctx, collUsed, sum, raw)
}

// CreateTeam stores t; ErrExists if the name is taken.
func (s *Store) CreateTeam(ctx context.Context, t Team) error {
	return createRec(ctx, s.kv, collTeams, t.Name, t)
}

// UpdateTeam applies fn to the stored team name.
func (s *Store) UpdateTeam(ctx context.Context, name string, fn func(*Team) error) (Team, error) {
	return updateRec(ctx, s.kv, collTeams, name, fn)
}

// StoredTeam returns the run-time team name.
func (s *Store) StoredTeam(ctx context.Context, name string) (Team, error) {
	return getRec[Team](ctx, s.kv, collTeams, name)
}

// Teams returns every run-time team, by name.
func (s *Store) Teams(ctx context.Context) ([]Team, error) {
	return listOf[Team](ctx, s.kv, collTeams, func(t Team) string { return t.Name })
}

// DeleteTeam removes the team name.
func (s *Store) DeleteTeam(ctx context.Context, name string) error {
	return s.kv.del(ctx, collTeams, name)
}
