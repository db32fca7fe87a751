// Package registry is compact SACP's dynamic capability registry
// (docs/glossary.md, Agent registry): the agents of agents.yaml with their
// verbs, tools, inputs and outputs, plus agents registered at run time by an
// approved SPAWN_AGENT message, shared by every replica through a Store. It
// answers registry queries, best match first, and gives the verb and tool
// library that compact SACP plans are validated against.
package registry

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sacpgw/gateway/compact"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/names"
	"github.com/sacpgw/gateway/internal/roster"
)

// ErrExists: a spawn names an agent (or defines a tool) that already exists.
var ErrExists = errors.New("registry: already registered")

// Entry is one agent of the registry, with compact SACP's field names.
type Entry struct {
	AgentName string `json:"agent_name"`
	Type      string `json:"type,omitempty"`
	roster.Profile
	// The operator's optional facts about a configured agent, shown as
	// given.
	ConfidenceScore *float64 `json:"confidence_score,omitempty"`
	Version         string   `json:"version,omitempty"`
	AgentLocation   string   `json:"agent_location,omitempty"`
	// Embedding is the configured agent's precomputed embedding, used as
	// given by semantic selection. Never shown: it is large, and says
	// nothing an agent needs.
	Embedding []float64 `json:"-"`
	// Endpoint is where the agent receives messages. It is never shown to
	// agents: they reach each other through the gateway.
	Endpoint string `json:"-"`
	// Roles are the roles a configured agent may claim in a message
	// besides its Type (agents.yaml roles). Not shown: what an agent may
	// claim is the gateway's to check.
	Roles []string `json:"-"`
	// TokenSHA256 is the lowercase hex SHA-256 of a spawned agent's bearer
	// token ("" when it has none). The token itself is never kept; the hash
	// is never shown either: no one outside the gateway needs it.
	TokenSHA256 string `json:"-"`
	// LastUsedAt is when a spawned agent last authenticated, as recorded
	// by Touch (at most a minute behind). Not shown: when another agent
	// was last active is none of an agent's business.
	LastUsedAt time.Time `json:"-"`
	// Spawned is set for an agent registered at run time; SpawnedBy is
	// "agent:<id>" of the agent that asked for it (also when a person
	// approved: the audit trail names the person).
	Spawned   bool      `json:"spawned,omitempty"`
	SpawnedBy string    `json:"spawned_by,omitempty"`
	SpawnedAt time.Time `json:"spawned_at,omitzero"`
	// Tools and Verbs are the definitions the spawn added to the library,
	// and those of other spawns it uses (see borrowed).
	Tools []compact.Tool `json:"tools,omitempty"`
	Verbs []compact.Verb `json:"verbs,omitempty"`
	// Skills are an A2A agent's skills, as its Agent Card lists them
	// (SetSkills); their tags are among Tags.
	Skills []Skill `json:"skills,omitempty"`
}

// ErrNotFound: no spawned agent of that name is stored.
var ErrNotFound = errors.New("registry: no such spawned agent")

// ErrConfigured: the agent is one of agents.yaml, which only the
// operator's configuration adds and removes.
var ErrConfigured = errors.New("registry: a configured agent cannot be retired")

// stored is the JSON form a Store keeps: the shown Entry plus what is
// never shown (endpoint, token hash, last use).
type stored struct {
	Entry
	Endpoint    string    `json:"endpoint,omitempty"`
	TokenSHA256 string    `json:"token_sha256,omitempty"`
	LastUsedAt  time.Time `json:"last_used_at,omitzero"`
}

func toStored(e Entry) stored {
	return stored{Entry: e, Endpoint: e.Endpoint, TokenSHA256: e.TokenSHA256, LastUsedAt: e.LastUsedAt}
}

func (st stored) entry() Entry {
	e := st.Entry
	e.Endpoint, e.TokenSHA256, e.LastUsedAt = st.Endpoint, st.TokenSHA256, st.LastUsedAt
	return e
}

// Store keeps the agents registered at run time, and the token hashes of
// spawns that wait for a person.
type Store interface {
	// Add stores e unless an agent of that name exists (ErrExists).
	Add(ctx context.Context, e Entry) error
	// List returns every stored entry, in no particular order.
	List(ctx context.Context) ([]Entry, error)
	// Remove deletes the agent name (ErrNotFound when there is none).
	Remove(ctx context.Context, name string) error
	// SetLastUsed records that the agent name authenticated at at
	// (ErrNotFound when there is none). It never moves LastUsedAt back, so
	// replicas writing in any order keep the latest.
	SetLastUsed(ctx context.Context, name string, at time.Time) error
	// PutPending keeps tokenSHA256 under key until expires, replacing
	// what key held: the hash of the token handed out with an escalated
	// spawn, for the person's approval to register the agent with.
	PutPending(ctx context.Context, key, tokenSHA256 string, expires time.Time) error
	// TakePending returns and deletes what key holds, unless it expired
	// at now (then ok is false).
	TakePending(ctx context.Context, key string, now time.Time) (tokenSHA256 string, ok bool, err error)
}

// Registry is the static registry of the configuration plus the Store.
// It is safe for concurrent use.
type Registry struct {
	store Store
	// ttl is how long a view of the Store serves (not the spawned agents'
	// lifetime: that is spawnTTL).
	ttl  time.Duration
	now  func() time.Time
	opts options
	// vectors is the in-process cache of profile embeddings, in front of
	// opts.shared (shared by replicas) when there is one.
	vectors *MemoryVectorCache

	// touched is when Touch last wrote each spawned agent's last use, so
	// that an agent's every request does not cost a Store write.
	touchMu sync.Mutex
	touched map[string]time.Time

	// warned holds the configuration problems already logged (a precomputed
	// embedding of the wrong dimension), so that each is logged once, not
	// at every query.
	warnMu sync.Mutex
	warned map[string]bool

	mu sync.Mutex
	// static, byName and lib are the configuration's (replaced by Reload).
	// static is base with the A2A agents' skills (skills) added.
	static []Entry
	base   []Entry
	skills map[string][]Skill
	byName map[string]int
	lib    *compact.Library
	// embedModel is cfg.Registry.Embeddings as "upstream/model" ("" when
	// not configured: free text ranks lexically).
	embedModel string
	// spawnTTL is registry.spawn.ttl: how long a spawned agent lives
	// without authenticating.
	spawnTTL time.Duration
	cachedAt time.Time
	cached   *view
}

// view is the registry as of one read of the Store.
type view struct {
	entries    []Entry
	byName     map[string]int
	lib        *compact.Library
	embedModel string
	// spawnTTL is the lifetime the view was built with; tokens are the
	// spawned agents that can authenticate.
	spawnTTL time.Duration
	tokens   []tokenAgent

	// The agents' profile texts and their BM25 statistics, computed at the
	// first free-text query of this view.
	textOnce sync.Once
	text     *textIndex
}

// New builds the registry of cfg. Spawned agents are read from store
// (refreshed at most every second, and at once after a local spawn).
// Without options free-text queries rank lexically (BM25); WithEmbedder
// turns semantic selection on.
func New(cfg *config.Config, store Store, opts ...Option) (*Registry, error) {
	o := options{log: slog.Default(), embedTimeout: defaultEmbedTimeout}
	for _, opt := range opts {
		opt(&o)
	}
	r := &Registry{store: store, ttl: time.Second, now: time.Now, opts: o, vectors: NewMemoryVectorCache(), warned: map[string]bool{}, touched: map[string]time.Time{}}
	apply, err := r.Prepare(cfg)
	if err != nil {
		return nil, err
	}
	apply()
	return r, nil
}

// Prepare builds the registry's static entries and verb/tool library
// for cfg and returns apply, which swaps them in; agents spawned at run
// time are kept. Nothing changes unless apply is called.
func (r *Registry) Prepare(cfg *config.Config) (apply func(), err error) {
	lib, err := Library(cfg.Registry)
	if err != nil {
		return nil, err
	}
	embedModel := ""
	if e := cfg.Registry.Embeddings; e != nil {
		embedModel = e.Upstream + "/" + e.Model
	}
	// config.Load sets the default; a Config built in code may not have,
	// and zero must not mean "never expires".
	spawnTTL := cfg.Registry.Spawn.TTL.D()
	if spawnTTL <= 0 {
		spawnTTL = DefaultSpawnTTL
	}
	var static []Entry
	byName := map[string]int{}
	ids := make([]string, 0, len(cfg.Agents))
	for id := range cfg.Agents {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		a := cfg.Agents[id]
		byName[id] = len(static)
		static = append(static, Entry{
			AgentName: id, Type: a.Type, Profile: a.Profile.Shown(),
			ConfidenceScore: clonePtr(a.ConfidenceScore), Version: a.Version, AgentLocation: a.AgentLocation,
			Embedding: slices.Clone(a.Embedding), Endpoint: a.Endpoint, Roles: slices.Clone(a.Roles),
		})
	}
	return func() {
		r.mu.Lock()
		r.base, r.byName, r.lib, r.embedModel, r.spawnTTL, r.cached = static, byName, lib, embedModel, spawnTTL, nil
		r.static = withSkills(static, r.skills)
		r.mu.Unlock()
	}, nil
}

// MayClaim reports whether a message may name role for the agent: its
// registered type, or a role it declares in agents.yaml.
func (e Entry) MayClaim(role string) bool {
	return role == e.Type || slices.Contains(e.Roles, role)
}

// Library converts registry.yaml into a compact library.
func Library(reg config.Registry) (*compact.Library, error) {
	lib, err := reg.Library()
	if err != nil {
		return nil, fmt.Errorf("registry library: %w", err)
	}
	return lib, nil
}

// current returns the registry including spawned agents. A Store that
// cannot be read leaves the last good view (or the static one) serving and
// returns the error alongside it.
func (r *Registry) current(ctx context.Context) (*view, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cached != nil && r.now().Sub(r.cachedAt) < r.ttl {
		return r.cached, nil
	}
	spawned, err := r.store.List(ctx)
	if err != nil {
		if r.cached != nil {
			return r.cached, fmt.Errorf("registry: read spawned agents: %w", err)
		}
		return &view{entries: r.static, byName: r.byName, lib: r.lib, embedModel: r.embedModel, spawnTTL: r.spawnTTL}, fmt.Errorf("registry: read spawned agents: %w", err)
	}
	now := r.now()
	v := &view{entries: slices.Clip(r.static), byName: make(map[string]int, len(r.byName)+len(spawned)), lib: r.lib, embedModel: r.embedModel, spawnTTL: r.spawnTTL}
	for k, i := range r.byName {
		v.byName[k] = i
	}
	// An expired agent is gone for every reader (queries, recipients,
	// authentication) at once, whether or not Sweep removed it yet.
	spawned = slices.DeleteFunc(spawned, func(e Entry) bool { return expired(e, r.spawnTTL, now) })
	sort.Slice(spawned, func(i, j int) bool { return spawned[i].AgentName < spawned[j].AgentName })
	// A spawned tool may use a verb another spawn defined: add entries
	// until a pass adds none. What is left conflicts with this replica's
	// configuration and stays out.
	for pending := spawned; len(pending) > 0; {
		var left []Entry
		for _, e := range pending {
			if _, dup := v.byName[e.AgentName]; dup {
				continue
			}
			lib, err := extend(v.lib, e.Verbs, e.Tools)
			if err != nil {
				left = append(left, e)
				continue
			}
			v.lib = lib
			v.byName[e.AgentName] = len(v.entries)
			v.entries = append(v.entries, e)
		}
		if len(left) == len(pending) {
			break
		}
		pending = left
	}
	v.tokens = tokenAgents(v.entries[len(r.static):])
	r.cached, r.cachedAt = v, now
	return v, nil
}

// extend adds to lib the spawned definitions it does not have yet (a verb
// one spawn defined may be named by the next).
func extend(lib *compact.Library, verbs []compact.Verb, tools []compact.Tool) (*compact.Library, error) {
	verbs = slices.DeleteFunc(slices.Clone(verbs), func(v compact.Verb) bool { _, ok := lib.Verb(v.Name); return ok })
	tools = slices.DeleteFunc(slices.Clone(tools), func(t compact.Tool) bool { _, ok := lib.Tool(t.ID); return ok })
	return lib.Extend(verbs, tools)
}

// Library is the verb and tool library including spawned definitions.
func (r *Registry) Library(ctx context.Context) (*compact.Library, error) {
	v, err := r.current(ctx)
	return v.lib, err
}

// Lookup returns the entry of an agent, configured or spawned.
func (r *Registry) Lookup(ctx context.Context, name string) (Entry, bool, error) {
	v, err := r.current(ctx)
	i, ok := v.byName[name]
	if !ok {
		return Entry{}, false, err
	}
	return v.entries[i], true, err
}

// Entries returns every agent, configured first, then spawned, by name.
func (r *Registry) Entries(ctx context.Context) ([]Entry, error) {
	v, err := r.current(ctx)
	return slices.Clone(v.entries), err
}

// Spawn registers the agent a SPAWN_AGENT message asked for, after the
// policy (or a person) approved it, with the hex SHA-256 of its bearer
// token ("" for an agent that cannot authenticate). It fails with
// ErrExists when the agent name is taken; new tool and verb definitions
// must not conflict with the library.
func (r *Registry) Spawn(ctx context.Context, s *compact.Spawn, by, tokenSHA256 string) (Entry, error) {
	if err := names.Check(s.AgentName); err != nil {
		return Entry{}, fmt.Errorf("registry: spawn: %w", err)
	}
	if tokenSHA256 != "" && !isHexSHA256(tokenSHA256) {
		return Entry{}, fmt.Errorf("registry: spawn %q: the token hash is not a lowercase hex SHA-256", s.AgentName)
	}
	v, err := r.current(ctx)
	if err != nil {
		return Entry{}, err
	}
	if _, ok := v.byName[s.AgentName]; ok {
		return Entry{}, fmt.Errorf("%w: agent %q", ErrExists, s.AgentName)
	}
	if _, err := extend(v.lib, s.NewVerbs, s.NewTools); err != nil {
		return Entry{}, fmt.Errorf("registry: spawn %q: %w", s.AgentName, err)
	}
	e := spawnEntry(s, by, r.now().UTC())
	e.TokenSHA256 = tokenSHA256
	r.mu.Lock()
	static := r.lib
	r.mu.Unlock()
	e.Verbs, e.Tools = borrowed(static, v.lib, e.Verbs, e.Tools, s)
	if err := r.store.Add(ctx, e); err != nil {
		return Entry{}, err
	}
	r.invalidate()
	return e, nil
}

// spawnEntry is the entry a spawn registers (also what an escalated
// spawn's prompt describes before a person decides).
func spawnEntry(s *compact.Spawn, by string, at time.Time) Entry {
	var tools []string
	if s.Tool != "" {
		tools = []string{s.Tool}
	}
	var verbs []string
	if s.Verb != "" {
		verbs = []string{s.Verb}
	}
	return Entry{
		AgentName: s.AgentName, Type: "spawned",
		Profile:  roster.Profile{SupportedVerbs: verbs, SupportedTools: tools, Inputs: s.Inputs, Outputs: s.Outputs, Description: s.Description}.Shown(),
		Endpoint: s.Endpoint, Spawned: true, SpawnedBy: by, SpawnedAt: at,
		Tools: s.NewTools, Verbs: s.NewVerbs,
	}
}

// borrowed adds to a spawn's own definitions those it uses from other
// spawns (a verb or tool that is in the current library but not the
// configured one), so that each entry stands on its own: retiring the
// agent that first defined a verb must not take the tools of the agents
// that use it out of the library, and them out of the registry.
func borrowed(static, cur *compact.Library, verbs []compact.Verb, tools []compact.Tool, s *compact.Spawn) ([]compact.Verb, []compact.Tool) {
	verbs, tools = slices.Clone(verbs), slices.Clone(tools)
	hasVerb := func(name string) bool {
		return slices.ContainsFunc(verbs, func(v compact.Verb) bool { return v.Name == name })
	}
	needVerb := func(name string) {
		if name == "" || hasVerb(name) {
			return
		}
		if _, ok := static.Verb(name); ok {
			return
		}
		if v, ok := cur.Verb(name); ok {
			verbs = append(verbs, v)
		}
	}
	if s.Tool != "" && !slices.ContainsFunc(tools, func(t compact.Tool) bool { return t.ID == s.Tool }) {
		if _, ok := static.Tool(s.Tool); !ok {
			if t, ok := cur.Tool(s.Tool); ok {
				tools = append(tools, t)
			}
		}
	}
	needVerb(s.Verb)
	for _, t := range tools {
		for _, v := range t.SupportedVerbs {
			needVerb(v)
		}
	}
	return verbs, tools
}

// invalidate makes the next read see the Store (after a local change).
func (r *Registry) invalidate() {
	r.mu.Lock()
	r.cached = nil
	r.mu.Unlock()
}

// verbOutputs: one of the agent's verbs is defined to output typ.
func (r *Registry) verbOutputs(lib *compact.Library, e Entry, typ string) bool {
	for _, name := range e.SupportedVerbs {
		if v, ok := lib.Verb(name); ok && strings.EqualFold(v.Outputs, typ) {
			return true
		}
	}
	return false
}

func takesInput(inputs []string, want string) bool {
	want = lastPart(want)
	for _, in := range inputs {
		if strings.EqualFold(lastPart(in), want) {
			return true
		}
	}
	return false
}

func lastPart(s string) string {
	s, _, _ = strings.Cut(s, ":")
	if i := strings.LastIndexByte(s, '.'); i >= 0 {
		return s[i+1:]
	}
	return s
}

func containsFold(set []string, v string) bool {
	for _, s := range set {
		if strings.EqualFold(s, v) {
			return true
		}
	}
	return false
}

// clonePtr copies *p, so that an entry shares nothing with the
// configuration it came from.
func clonePtr[T any](p *T) *T {
	if p == nil {
		return nil
	}
	v := *p
	return &v
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}
