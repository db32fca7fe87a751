package registry

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/escalation"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/internal/testkit"
	"github.com/sacpgw/gateway/policy"
)

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// testClock is the registry's injected clock.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *testClock) set(t time.Time) {
	c.mu.Lock()
	c.t = t
	c.mu.Unlock()
}

// recordingEscalator is the approval service's Open: it keeps the
// requests, so that a test can decide them through API.Resolve as the
// service would (escalation.Decided carries AgentID and Content back).
type recordingEscalator struct {
	mu   sync.Mutex
	reqs []escalation.Request
	fail error
}

func (e *recordingEscalator) Open(_ context.Context, req escalation.Request) (escalation.Opened, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.fail != nil {
		return escalation.Opened{}, e.fail
	}
	e.reqs = append(e.reqs, req)
	id := fmt.Sprintf("esc_%d", len(e.reqs))
	return escalation.Opened{ID: id, ReviewURL: "https://gw.example/review/" + id}, nil
}

func (e *recordingEscalator) last() escalation.Request {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.reqs[len(e.reqs)-1]
}

// fixedPolicy decides every spawn the same way (for the decisions the
// shipped policy cannot reach from a valid SPAWN_AGENT message).
type fixedPolicy string

func (p fixedPolicy) Spawn(context.Context, map[string]any) (policy.SpawnDecision, error) {
	return policy.SpawnDecision{Status: string(p), Reasons: []string{"test"}}, nil
}

type spawnHarness struct {
	t     *testing.T
	reg   *Registry
	store Store
	clock *testClock
	api   *API
	trail *testkit.Trail
	esc   *recordingEscalator
}

var t0 = time.Date(2030, 3, 1, 12, 0, 0, 0, time.UTC)

// shippedPolicy is the real spawn policy of rego/: a spawner's plain spawn
// is approved, one naming an endpoint is escalated.
func shippedPolicy(t *testing.T) *policy.Engine {
	t.Helper()
	e, err := policy.New(policy.Options{Dir: "../rego", NoWatch: true, Logger: slog.New(slog.DiscardHandler), Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	return e
}

func newSpawnHarness(t *testing.T, store Store, pol Spawner) *spawnHarness {
	t.Helper()
	cfg := testConfig()
	cfg.Registry.Spawn.TTL = config.Duration(7 * 24 * time.Hour)
	reg, err := New(cfg, store, WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	clock := &testClock{t: t0}
	reg.now = clock.now
	trail := &testkit.Trail{}
	esc := &recordingEscalator{}
	api := &API{Registry: reg, Policy: pol, Audit: &door.Recorder{Log: trail, FailClosed: true, Logger: slog.New(slog.DiscardHandler)},
		Escalator: esc, Log: slog.New(slog.DiscardHandler)}
	return &spawnHarness{t: t, reg: reg, store: store, clock: clock, api: api, trail: trail, esc: esc}
}

var spawner = &roster.Agent{ID: "orch", Capabilities: []string{"spawn"}, MaxRequestSize: 1 << 20}

func spawnMessage(name, endpoint string) string {
	ep := ""
	if endpoint != "" {
		ep = `,"endpoint":"` + endpoint + `"`
	}
	return `{"g":"SPAWN_AGENT","ctx":{"missing_capability":"visa"},"plan":[["define","` + name + `_Q",{"description":"Visa rules","inputs":["nationality"],"outputs":["visa_required"]}],["instantiate","` + name + `",{"tool":"` + name + `_Q","verb":"check"` + ep + `}]]}`
}

func (h *spawnHarness) spawn(body string) (*httptest.ResponseRecorder, SpawnResult) {
	h.t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/registry/spawn", strings.NewReader(body))
	req = scope.Attach(req, &scope.Exchange{RequestID: "req_1", Agent: spawner})
	w := httptest.NewRecorder()
	h.api.Spawn(w, req)
	var out SpawnResult
	_ = json.Unmarshal(w.Body.Bytes(), &out)
	return w, out
}

func sumOf(token string) [32]byte { return sha256.Sum256([]byte(token)) }

func hexSum(token string) string {
	h := sumOf(token)
	return hex.EncodeToString(h[:])
}

// rawStore is everything the store holds for agents, as bytes at rest.
func rawStore(t *testing.T, s Store) string {
	t.Helper()
	switch s := s.(type) {
	case *MemoryStore:
		s.mu.Lock()
		defer s.mu.Unlock()
		return fmt.Sprintf("%+v", *s.set)
	case *FileStore:
		b, err := os.ReadFile(s.path)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	case *RedisStore:
		all, err := s.client.HGetAll(context.Background(), s.key).Result()
		if err != nil {
			t.Fatal(err)
		}
		keys, _ := s.client.Keys(context.Background(), "*").Result()
		var b strings.Builder
		fmt.Fprint(&b, all, keys)
		for _, k := range keys {
			if strings.HasPrefix(k, s.pending) {
				fmt.Fprint(&b, s.client.Get(context.Background(), k).Val())
			}
		}
		return b.String()
	}
	t.Fatalf("unknown store %T", s)
	return ""
}

// TestSpawnIssuesTokenOnce, for every store: an approved spawn answers
// its token and prompt once; the store (read raw), the audit trail and
// the shown entry never hold the token, the store holds its hash; the
// token authenticates as the new agent, a wrong one does not.
func TestSpawnIssuesTokenOnce(t *testing.T) {
	for kind, mk := range storeKinds() {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			h := newSpawnHarness(t, mk(t), shippedPolicy(t))
			w, out := h.spawn(spawnMessage("VISA_AGENT", ""))
			if w.Code != http.StatusCreated {
				t.Fatalf("spawn: %d %s", w.Code, w.Body)
			}
			tok := out.Token
			if !strings.HasPrefix(tok, TokenPrefix) || len(tok) != len(TokenPrefix)+43 || out.TokenNote == "" {
				t.Fatalf("token %q (note %q)", tok, out.TokenNote)
			}
			if w.Header().Get("Cache-Control") != "no-store" {
				t.Errorf("Cache-Control %q: an answer with a secret must not be cached", w.Header().Get("Cache-Control"))
			}
			for _, want := range []string{"### Agent Role: VISA_AGENT: Visa rules", "- check\n", "- VISA_AGENT_Q\n", "SACP protocol"} {
				if !strings.Contains(out.Prompt, want) {
					t.Errorf("prompt lacks %q:\n%s", want, out.Prompt)
				}
			}
			shown := mustJSON(t, out.Agent)
			raw := rawStore(t, h.store)
			audited := fmt.Sprintf("%+v", h.trail.Records())
			if strings.Contains(shown, hexSum(tok)) || strings.Contains(shown, "token") {
				t.Errorf("the shown entry holds the token hash: %s", shown)
			}
			for where, text := range map[string]string{"shown entry": shown, "store": raw, "audit": audited} {
				if strings.Contains(text, tok) || strings.Contains(text, tok[len(TokenPrefix):]) {
					t.Errorf("the %s holds the token", where)
				}
			}
			if !strings.Contains(raw, hexSum(tok)) {
				t.Errorf("the store does not hold the token's hash:\n%s", raw)
			}
			if last := h.trail.Last(KindSpawn); last["token_issued"] != true || last["registered"] != true {
				t.Errorf("audit %v", last)
			}

			a, ok, err := h.reg.AgentByToken(ctx, sumOf(tok))
			if err != nil || !ok {
				t.Fatalf("AgentByToken: %v %v", ok, err)
			}
			want := roster.Agent{ID: "VISA_AGENT", Type: "spawned", Profile: roster.Profile{Description: "Visa rules", Tags: []string{},
				SupportedVerbs: []string{"check"}, SupportedTools: []string{"VISA_AGENT_Q"}, Inputs: []string{"nationality"}, Outputs: []string{"visa_required"}},
				SpawnedBy: "orch", RateLimit: config.Rate{N: 60, Period: time.Minute}, TokenLimit: config.Rate{N: 100_000, Period: time.Hour}, MaxRequestSize: 64 << 10,
				TokenSHA256: hexSum(tok), TokenHash: sumOf(tok)}
			if mustJSON(t, a) != mustJSON(t, want) || a.TokenHash != want.TokenHash || a.SpawnedBy != want.SpawnedBy || a.ResponseFormat != "" {
				t.Errorf("agent %+v\nwant  %+v", *a, want)
			}
			for name, sum := range map[string][32]byte{
				"another token":                sumOf(TokenPrefix + strings.Repeat("A", 43)),
				"the token's hash":             sumOf(hexSum(tok)),
				"the token without its prefix": sumOf(tok[len(TokenPrefix):]),
				"zero":                         {},
			} {
				if a, ok, err := h.reg.AgentByToken(ctx, sum); a != nil || ok || err != nil {
					t.Errorf("%s: %v %v %v", name, a, ok, err)
				}
			}

			// The token is not shown again: a second spawn of the name is
			// refused without one.
			w, out = h.spawn(`{"g":"SPAWN_AGENT","plan":[["instantiate","VISA_AGENT",{"tool":"VISA_AGENT_Q","verb":"check"}]]}`)
			if w.Code != http.StatusConflict || out.Token != "" || strings.Contains(w.Body.String(), "gw-spawn-") {
				t.Errorf("second spawn: %d %s", w.Code, w.Body)
			}
			// Another agent gets another token.
			_, out2 := h.spawn(spawnMessage("TAX_AGENT", ""))
			if out2.Token == "" || out2.Token == tok {
				t.Errorf("second agent's token %q", out2.Token)
			}
			if a, ok, _ := h.reg.AgentByToken(ctx, sumOf(out2.Token)); !ok || a.ID != "TAX_AGENT" {
				t.Errorf("second agent: %+v %v", a, ok)
			}

			if fs, ok := h.store.(*FileStore); ok {
				// A restart: a new store on the directory, a new registry.
				fs2, err := NewFileStore(fs.dir)
				if err != nil {
					t.Fatal(err)
				}
				reg2, err := New(testConfig(), fs2, WithLogger(slog.New(slog.DiscardHandler)))
				if err != nil {
					t.Fatal(err)
				}
				reg2.now = h.clock.now
				if a, ok, err := reg2.AgentByToken(ctx, sumOf(tok)); !ok || err != nil || a.ID != "VISA_AGENT" {
					t.Errorf("after a restart: %+v %v %v", a, ok, err)
				}
			}
		})
	}
}

// TestSpawnDecisionsAndTokens: a token goes with every approved or
// escalated spawn and with nothing else; an approved spawn's endpoint is
// stored and given to the delivery side (Lookup) and the identity.
func TestSpawnDecisionsAndTokens(t *testing.T) {
	const endpoint = "https://visa.example/in"
	tests := []struct {
		decision  string
		endpoint  string
		status    int
		wantToken bool
		wantAgent bool // registered at once
	}{
		{"approved", "", http.StatusCreated, true, true},
		{"approved", endpoint, http.StatusCreated, true, true},
		{"escalated", endpoint, http.StatusAccepted, true, false},
		{"rejected", "", http.StatusForbidden, false, false},
		{"", "", http.StatusForbidden, false, false}, // a policy that did not decide
	}
	for _, tc := range tests {
		t.Run(tc.decision+" "+tc.endpoint, func(t *testing.T) {
			ctx := context.Background()
			h := newSpawnHarness(t, NewMemoryStore(), fixedPolicy(tc.decision))
			w, out := h.spawn(spawnMessage("VISA_AGENT", tc.endpoint))
			if w.Code != tc.status {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			if (out.Token != "") != tc.wantToken || (out.Prompt != "") != tc.wantToken || strings.Contains(w.Body.String(), "gw-spawn-") != tc.wantToken {
				t.Errorf("token %q prompt %d bytes", out.Token, len(out.Prompt))
			}
			e, ok, _ := h.reg.Lookup(ctx, "VISA_AGENT")
			if ok != tc.wantAgent {
				t.Fatalf("registered: %v", ok)
			}
			a, authOK, _ := h.reg.AgentByToken(ctx, sumOf(out.Token))
			if authOK != tc.wantAgent {
				t.Errorf("authenticates: %v", authOK)
			}
			if ok && (e.Endpoint != tc.endpoint || a.Endpoint != tc.endpoint) {
				t.Errorf("endpoint %q (identity %q), want %q", e.Endpoint, a.Endpoint, tc.endpoint)
			}
		})
	}
}

// TestEscalatedSpawnToken: the token given with the 202 works once a
// person approves (and the approved agent keeps the endpoint), never
// before, and never after a rejection.
func TestEscalatedSpawnToken(t *testing.T) {
	const endpoint = "https://visa.example/in"
	for _, tc := range []struct {
		name     string
		approved bool
	}{{"approved", true}, {"rejected", false}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			h := newSpawnHarness(t, NewMemoryStore(), shippedPolicy(t))
			w, out := h.spawn(spawnMessage("VISA_AGENT", endpoint))
			if w.Code != http.StatusAccepted || out.RequestID == "" {
				t.Fatalf("spawn: %d %s", w.Code, w.Body)
			}
			if !strings.HasPrefix(out.Token, TokenPrefix) || !strings.Contains(out.TokenNote, "once a person approves") ||
				!strings.Contains(out.Prompt, "### Agent Role: VISA_AGENT: Visa rules") {
				t.Fatalf("202 answer %+v", out)
			}
			req := h.esc.last()
			if strings.Contains(fmt.Sprintf("%+v", req), out.Token) || strings.Contains(fmt.Sprintf("%+v", h.trail.Records()), out.Token) {
				t.Error("the token reached the review or the audit trail")
			}
			if _, ok, _ := h.reg.AgentByToken(ctx, sumOf(out.Token)); ok {
				t.Fatal("the token works before a person decided")
			}

			// A person decides, an hour later, as approval.Service reports it.
			h.clock.set(t0.Add(time.Hour))
			err := h.api.Resolve(ctx, escalation.Decided{ID: "esc_1", Type: escalation.TypeSpawn, AgentID: req.AgentID,
				Approved: tc.approved, Content: req.Content, Reviewer: "reviewer:ann"})
			if err != nil {
				t.Fatal(err)
			}
			a, ok, err := h.reg.AgentByToken(ctx, sumOf(out.Token))
			if ok != tc.approved || err != nil {
				t.Fatalf("after the decision: %v %v", ok, err)
			}
			if _, held, _ := h.store.TakePending(ctx, pendingKey(req.AgentID, req.Content), h.clock.now()); held {
				t.Error("the hash is still pending after the decision")
			}
			if !tc.approved {
				// Even an approval arriving after the rejection (it cannot,
				// but the hash is gone anyway) registers no working token.
				if err := h.api.Resolve(ctx, escalation.Decided{ID: "esc_1", AgentID: req.AgentID, Approved: true, Content: req.Content}); err != nil {
					t.Fatal(err)
				}
				if _, ok, _ := h.reg.AgentByToken(ctx, sumOf(out.Token)); ok {
					t.Error("a rejected spawn's token works")
				}
				if last := h.trail.Last(KindSpawn); last["token_issued"] != false {
					t.Errorf("audit %v", last)
				}
				return
			}
			e, _, _ := h.reg.Lookup(ctx, "VISA_AGENT")
			if a.ID != "VISA_AGENT" || a.SpawnedBy != "orch" || e.SpawnedBy != "agent:orch" || a.Endpoint != endpoint || e.Endpoint != endpoint || !e.SpawnedAt.Equal(t0.Add(time.Hour)) {
				t.Errorf("approved agent %+v, entry %+v", a, e)
			}
			if last := h.trail.Last(KindSpawn); last["token_issued"] != true || last["registered"] != true || last["reviewer"] != "reviewer:ann" {
				t.Errorf("audit %v", last)
			}
		})
	}
}

// A review that cannot be opened leaves no hash behind; a hash that cannot
// be kept opens no review.
func TestEscalatedSpawnFailures(t *testing.T) {
	ctx := context.Background()
	h := newSpawnHarness(t, NewMemoryStore(), shippedPolicy(t))
	h.esc.fail = errors.New("approval store down")
	body := spawnMessage("VISA_AGENT", "https://visa.example/in")
	w, out := h.spawn(body)
	if w.Code < 500 || out.Token != "" {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if _, held, _ := h.store.TakePending(ctx, pendingKey(spawner.ID, body), t0); held {
		t.Error("a hash is pending for a review that never opened")
	}

	h = newSpawnHarness(t, brokenPending{NewMemoryStore()}, shippedPolicy(t))
	w, out = h.spawn(body)
	if w.Code < 500 || out.Token != "" || len(h.esc.reqs) != 0 {
		t.Errorf("%d %s, %d reviews opened", w.Code, w.Body, len(h.esc.reqs))
	}
}

type brokenPending struct{ *MemoryStore }

func (brokenPending) PutPending(context.Context, string, string, time.Time) error {
	return errors.New("store down")
}

// TestAgentByTokenExpiry: an agent lives registry.spawn.ttl from its
// spawn or last use; expired, it neither authenticates nor appears.
func TestAgentByTokenExpiry(t *testing.T) {
	ctx := context.Background()
	ttl := 7 * 24 * time.Hour
	tests := []struct {
		name     string
		lastUsed time.Duration // after t0; 0: never used
		at       time.Duration // after t0
		alive    bool
	}{
		{"just spawned", 0, 0, true},
		{"a second before the TTL", 0, ttl - time.Second, true},
		{"exactly the TTL", 0, ttl, true},
		{"a second after the TTL", 0, ttl + time.Second, false},
		{"used, within the TTL of the use", 6 * 24 * time.Hour, ttl + 5*24*time.Hour, true},
		{"used, past the TTL of the use", 24 * time.Hour, ttl + 25*time.Hour, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newSpawnHarness(t, NewMemoryStore(), fixedPolicy("approved"))
			_, out := h.spawn(spawnMessage("VISA_AGENT", ""))
			if tc.lastUsed > 0 {
				h.clock.set(t0.Add(tc.lastUsed))
				if err := h.reg.Touch(ctx, "VISA_AGENT"); err != nil {
					t.Fatal(err)
				}
			}
			h.clock.set(t0.Add(tc.at))
			_, ok, err := h.reg.AgentByToken(ctx, sumOf(out.Token))
			if ok != tc.alive || err != nil {
				t.Errorf("AgentByToken: %v %v, want %v", ok, err, tc.alive)
			}
			_, found, _ := h.reg.Lookup(ctx, "VISA_AGENT")
			matches, _ := h.reg.Query(ctx, Query{Verb: "check"})
			entries, _ := h.reg.Entries(ctx)
			listed := slices.ContainsFunc(entries, func(e Entry) bool { return e.AgentName == "VISA_AGENT" })
			if found != tc.alive || (len(matches) == 1) != tc.alive || listed != tc.alive {
				t.Errorf("lookup %v, query %d hits, listed %v; want alive %v", found, len(matches), listed, tc.alive)
			}
		})
	}
}

// countingStore counts the last-use writes.
type countingStore struct {
	*MemoryStore
	mu     sync.Mutex
	writes map[string]int
}

func (s *countingStore) SetLastUsed(ctx context.Context, name string, at time.Time) error {
	s.mu.Lock()
	s.writes[name]++
	s.mu.Unlock()
	return s.MemoryStore.SetLastUsed(ctx, name, at)
}

func (s *countingStore) count(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.writes[name]
}

// TestTouchThrottled: at most one Store write per agent and minute, also
// under concurrent requests; an unknown agent is ErrNotFound.
func TestTouchThrottled(t *testing.T) {
	ctx := context.Background()
	store := &countingStore{MemoryStore: NewMemoryStore(), writes: map[string]int{}}
	h := newSpawnHarness(t, store, fixedPolicy("approved"))
	for _, name := range []string{"VISA_AGENT", "TAX_AGENT"} {
		if w, _ := h.spawn(spawnMessage(name, "")); w.Code != http.StatusCreated {
			t.Fatal(w.Body)
		}
	}
	steps := []struct {
		at     time.Duration
		agent  string
		writes int // the agent's writes so far
	}{
		{0, "VISA_AGENT", 1},
		{time.Second, "VISA_AGENT", 1},
		{59 * time.Second, "VISA_AGENT", 1},
		{59 * time.Second, "TAX_AGENT", 1}, // its own minute
		{time.Minute, "VISA_AGENT", 2},
		{time.Minute + 30*time.Second, "VISA_AGENT", 2},
		{2*time.Minute + time.Second, "VISA_AGENT", 3},
		{2*time.Minute + time.Second, "TAX_AGENT", 2},
	}
	for _, st := range steps {
		h.clock.set(t0.Add(st.at))
		var wg sync.WaitGroup
		for range 20 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if err := h.reg.Touch(ctx, st.agent); err != nil {
					t.Error(err)
				}
			}()
		}
		wg.Wait()
		if got := store.count(st.agent); got != st.writes {
			t.Errorf("at %v: %s written %d times, want %d", st.at, st.agent, got, st.writes)
		}
	}
	e, _, _ := h.reg.Lookup(ctx, "VISA_AGENT")
	if !e.LastUsedAt.Equal(t0.Add(2*time.Minute + time.Second)) {
		t.Errorf("last used %v", e.LastUsedAt)
	}
	if err := h.reg.Touch(ctx, "NOBODY"); !errors.Is(err, ErrNotFound) {
		t.Errorf("unknown agent: %v", err)
	}
	if err := h.reg.Touch(ctx, "NOBODY"); !errors.Is(err, ErrNotFound) || store.count("NOBODY") != 2 {
		t.Errorf("an unknown agent is remembered as touched: %v, %d writes", err, store.count("NOBODY"))
	}
}

// TestSweep removes exactly the expired agents, with the TTL the
// configuration has now (Prepare), and a zero TTL is the default, not
// "never".
func TestSweep(t *testing.T) {
	ctx := context.Background()
	day := 24 * time.Hour
	h := newSpawnHarness(t, NewMemoryStore(), fixedPolicy("approved"))
	spawnAt := func(name string, at time.Duration) string {
		h.clock.set(t0.Add(at))
		w, out := h.spawn(spawnMessage(name, ""))
		if w.Code != http.StatusCreated {
			t.Fatal(w.Body)
		}
		return out.Token
	}
	spawnAt("A_AGENT", 0)
	spawnAt("B_AGENT", 0)
	tokC := spawnAt("C_AGENT", 5*day)
	h.clock.set(t0.Add(3 * day))
	if err := h.reg.Touch(ctx, "B_AGENT"); err != nil {
		t.Fatal(err)
	}
	stored := func() []string {
		list, _ := h.store.List(ctx)
		var out []string
		for _, e := range list {
			out = append(out, e.AgentName)
		}
		slices.Sort(out)
		return out
	}
	steps := []struct {
		name    string
		at      time.Duration
		ttl     time.Duration // 0: unchanged
		removed int
		left    []string
	}{
		{"nothing expired", 7 * day, 0, 0, []string{"A_AGENT", "B_AGENT", "C_AGENT"}},
		{"A expired", 8 * day, 0, 1, []string{"B_AGENT", "C_AGENT"}},
		{"again: nothing more", 8 * day, 0, 0, []string{"B_AGENT", "C_AGENT"}},
		{"B expired from its last use", 10*day + time.Second, 0, 1, []string{"C_AGENT"}},
		{"a shorter TTL reloaded", 10*day + time.Second, time.Hour, 1, nil},
	}
	for _, st := range steps {
		if st.ttl > 0 {
			cfg := testConfig()
			cfg.Registry.Spawn.TTL = config.Duration(st.ttl)
			// Before the reload, C still authenticates.
			if _, ok, _ := h.reg.AgentByToken(ctx, sumOf(tokC)); !ok {
				t.Fatalf("%s: C does not authenticate before the reload", st.name)
			}
			apply, err := h.reg.Prepare(cfg)
			if err != nil {
				t.Fatal(err)
			}
			apply()
			if _, ok, _ := h.reg.AgentByToken(ctx, sumOf(tokC)); ok {
				t.Errorf("%s: C authenticates past the reloaded TTL", st.name)
			}
		}
		h.clock.set(t0.Add(st.at))
		n, err := h.reg.Sweep(ctx)
		if err != nil || n != st.removed || !slices.Equal(stored(), st.left) {
			t.Errorf("%s: removed %d (%v), left %v; want %d, %v", st.name, n, err, stored(), st.removed, st.left)
		}
	}

	// No TTL in a Config built in code: the default, not forever.
	r, err := New(testConfig(), NewMemoryStore(), WithLogger(slog.New(slog.DiscardHandler)))
	if err != nil {
		t.Fatal(err)
	}
	clock := &testClock{t: t0}
	r.now = clock.now
	lib, _ := r.Library(ctx)
	sp, _ := lib.ParseSpawn([]byte(spawnMessage("D_AGENT", "")))
	if _, err := r.Spawn(ctx, sp, "agent:orch", hashA); err != nil {
		t.Fatal(err)
	}
	clock.set(t0.Add(DefaultSpawnTTL + time.Second))
	if n, err := r.Sweep(ctx); n != 1 || err != nil {
		t.Errorf("default TTL sweep: %d %v", n, err)
	}
}

// Retiring the agent whose spawn defined a verb leaves the agents that
// use it (through a tool of their own, or the first one's tool) whole:
// in the registry, and their plans valid.
func TestRetireKeepsBorrowedDefinitions(t *testing.T) {
	ctx := context.Background()
	h := newSpawnHarness(t, NewMemoryStore(), fixedPolicy("approved"))
	for _, body := range []string{
		spawnMessage("A_AGENT", ""), // defines verb check and tool A_AGENT_Q
		spawnMessage("B_AGENT", ""), // its own tool, A's verb
		`{"g":"SPAWN_AGENT","plan":[["instantiate","C_AGENT",{"tool":"A_AGENT_Q","verb":"check"}]]}`, // A's tool
	} {
		if w, _ := h.spawn(body); w.Code != http.StatusCreated {
			t.Fatalf("%s: %d %s", body, w.Code, w.Body)
		}
	}
	if err := h.reg.Retire(ctx, "A_AGENT"); err != nil {
		t.Fatal(err)
	}
	lib, err := h.reg.Library(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"B_AGENT", "C_AGENT"} {
		if _, ok, _ := h.reg.Lookup(ctx, name); !ok {
			t.Errorf("%s left the registry with A_AGENT", name)
		}
	}
	for _, plan := range []string{`[["check","B_AGENT_Q",{}]]`, `[["check","A_AGENT_Q",{}]]`} {
		if res := lib.Validate([]byte(`{"g":"X","plan":` + plan + `}`)); !res.Valid() {
			t.Errorf("plan %s after A_AGENT retired: %+v", plan, res)
		}
	}
}

// testPeople is approval.Service.Person in miniature: the person is the
// X-Test-Person header; none is a 401.
type testPeople struct{}

func (testPeople) Person(r *http.Request) (string, error) {
	who := r.Header.Get("X-Test-Person")
	if who == "" {
		return "", apierror.Unauthorized("No admin or reviewer token.")
	}
	return who, nil
}

// TestRetireHTTP: DELETE /registry/agents/{id}: the admin retires a
// spawned agent (204; its token stops working at once); a reviewer may
// not (403); a configured or unknown agent is 404; every attempt by a
// person is audited.
func TestRetireHTTP(t *testing.T) {
	ctx := context.Background()
	h := newSpawnHarness(t, NewMemoryStore(), fixedPolicy("approved"))
	_, out := h.spawn(spawnMessage("VISA_AGENT", ""))
	mux := http.NewServeMux()
	mux.Handle("DELETE /registry/agents/{id}", h.api.Retire(testPeople{}))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	tests := []struct {
		name    string
		person  string
		id      string
		status  int
		audited bool
		retired bool
		alive   bool // VISA_AGENT afterwards
	}{
		{"nobody", "", "VISA_AGENT", http.StatusUnauthorized, false, false, true},
		{"a reviewer", "reviewer:ann", "VISA_AGENT", http.StatusForbidden, true, false, true},
		{"a configured agent", "admin:root", "price_predictor", http.StatusNotFound, true, false, true},
		{"an unknown agent", "admin:root", "NOBODY", http.StatusNotFound, true, false, true},
		{"not a name", "admin:root", "a%20b", http.StatusNotFound, true, false, true},
		{"the admin", "admin:root", "VISA_AGENT", http.StatusNoContent, true, true, false},
		{"again", "admin:root", "VISA_AGENT", http.StatusNotFound, true, false, false},
	}
	for _, tc := range tests {
		before := len(h.trail.ByKind(KindRetire))
		req, _ := http.NewRequest(http.MethodDelete, srv.URL+"/registry/agents/"+tc.id, nil)
		if tc.person != "" {
			req.Header.Set("X-Test-Person", tc.person)
		}
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		var body bytes.Buffer
		_, _ = body.ReadFrom(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status {
			t.Errorf("%s: %d %s, want %d", tc.name, resp.StatusCode, body.String(), tc.status)
		}
		recs := h.trail.ByKind(KindRetire)
		if (len(recs) > before) != tc.audited {
			t.Errorf("%s: audited %v, want %v", tc.name, len(recs) > before, tc.audited)
		}
		if tc.audited && len(recs) > before {
			last := testkit.SummaryOf(recs[len(recs)-1])
			if last["retired"] != tc.retired || last["by"] != tc.person {
				t.Errorf("%s: audit %v", tc.name, last)
			}
		}
		_, ok, err := h.reg.AgentByToken(ctx, sumOf(out.Token))
		_, found, _ := h.reg.Lookup(ctx, "VISA_AGENT")
		if ok != tc.alive || found != tc.alive || err != nil {
			t.Errorf("%s: authenticates %v, found %v (%v); want %v", tc.name, ok, found, err, tc.alive)
		}
	}
	if _, ok, _ := h.reg.Lookup(ctx, "price_predictor"); !ok {
		t.Error("the configured agent was retired")
	}
	if err := h.reg.Retire(ctx, "price_predictor"); !errors.Is(err, ErrConfigured) {
		t.Errorf("Retire of a configured agent: %v", err)
	}
	if strings.Contains(fmt.Sprintf("%+v", h.trail.Records()), out.Token) {
		t.Error("the token reached the audit trail")
	}
}

// An approved spawned agent's endpoint is what delivery uses: the
// messaging service takes Entry.Endpoint from Lookup (messaging/send.go,
// worker.go). Through a store that only keeps the stored form, and a
// restart of the file store, the endpoint is intact.
func TestSpawnedEndpointKept(t *testing.T) {
	for kind, mk := range storeKinds() {
		t.Run(kind, func(t *testing.T) {
			ctx := context.Background()
			h := newSpawnHarness(t, mk(t), fixedPolicy("approved"))
			if w, _ := h.spawn(spawnMessage("VISA_AGENT", "https://visa.example/in")); w.Code != http.StatusCreated {
				t.Fatal(w.Body)
			}
			reg := h.reg
			if fs, ok := h.store.(*FileStore); ok {
				fs2, err := NewFileStore(fs.dir)
				if err != nil {
					t.Fatal(err)
				}
				if reg, err = New(testConfig(), fs2); err != nil {
					t.Fatal(err)
				}
				reg.now = h.clock.now
			}
			e, ok, err := reg.Lookup(ctx, "VISA_AGENT")
			if !ok || err != nil || e.Endpoint != "https://visa.example/in" {
				t.Errorf("%+v %v %v", e, ok, err)
			}
		})
	}
}

// The file store holds the state of a registry end to end: a new
// directory is made 0700 below a missing parent.
func TestFileStoreDirectory(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	if _, err := NewFileStore(dir); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o700 {
		t.Errorf("%v %v", fi, err)
	}
	if _, err := NewFileStore(""); err == nil {
		t.Error("an empty directory name was accepted")
	}
}
