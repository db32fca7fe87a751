package messaging

import (
	"context"
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
	"sync/atomic"
	"testing"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/egress"
	"github.com/sacpgw/gateway/internal/escalation"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/internal/testkit"
	"github.com/sacpgw/gateway/internal/testredis"
	"github.com/sacpgw/gateway/mailbox"
	"github.com/sacpgw/gateway/policy"
	"github.com/sacpgw/gateway/registry"
)

// This file builds the messaging service the way app.Build does (config
// loaded from files, the repository's policies, casbin RBAC, the registry,
// the memory queue and history, the audit recorder, the egress-guarded
// client), with real HTTP endpoints for the agents. Only the approval
// service is a double (escalator): it is another front door.

// newPeer is an agent endpoint (testkit.Peer) over plain HTTP.
func newPeer(t testing.TB) *testkit.Peer { return testkit.NewPeer(t, nil) }

// eventually polls cond until it holds or a deadline passes.
func eventually(cond func() bool) bool {
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// answerStatus answers every message with code.
func answerStatus(code int) func(http.ResponseWriter, *http.Request, []byte) {
	return func(w http.ResponseWriter, _ *http.Request, _ []byte) { w.WriteHeader(code) }
}

// escalator is the approval service's double: it records what it is asked
// to open and hands out ids esc_1, esc_2...
type escalator struct {
	mu     sync.Mutex
	opened []escalation.Request
	fail   bool
}

func (e *escalator) Open(_ context.Context, req escalation.Request) (escalation.Opened, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.fail {
		return escalation.Opened{}, errors.New("approval store down")
	}
	e.opened = append(e.opened, req)
	id := fmt.Sprintf("esc_%d", len(e.opened))
	return escalation.Opened{ID: id, ReviewURL: "https://gw.example/review/" + id}, nil
}

func (e *escalator) requests() []escalation.Request {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]escalation.Request(nil), e.opened...)
}

func (e *escalator) setFail(v bool) {
	e.mu.Lock()
	e.fail = v
	e.mu.Unlock()
}

// testAgents: %endpoint:<id>% is replaced by the peer's URL.
const testAgents = `agents:
  orch:
    type: orchestrator
    capabilities: [read]
    endpoint: "%endpoint:orch%"
    messages:
      - to: ["*"]
        actions: ["*"]
      - to: [broadcast]
        actions: ["*"]
  planner:
    type: planner
    endpoint: "%endpoint:planner%"
    supported_verbs: [predict]
    supported_tools: [PRC_EST]
    description: Plans workflows
    messages:
      - to: [orch]
        actions: [plan_complete, status, ack]
  executor:
    type: executor
    endpoint: "%endpoint:executor%"
    supported_verbs: [search, rank]
    supported_tools: [H_API, RANK]
    messages:
      - to: [orch]
        actions: ["*"]
      - to: [broadcast]
        actions: [task_completed]
  small:
    type: reviewer
    max_request_size: 1KB
    messages:
      - to: [orch]
        actions: [ping]
  silent:
    type: reviewer
`

// peerIDs are the agents served by a peer of the harness.
var peerIDs = []string{"orch", "planner", "executor"}

type harnessOpts struct {
	// protocolExtra is appended under "protocol:" in protocol.yaml.
	protocolExtra string
	// messagingExtra is appended to gateway.yaml's messaging section.
	messagingExtra string
	// attempts is protocol limits.max_retry_attempts (default 3).
	attempts int
	// workers is messaging.workers (default 2).
	workers int
	// timeout is messaging.timeout (default 2s).
	timeout string
	// publicOnly leaves out allowed_networks: loopback endpoints are then
	// refused, as in a default install.
	publicOnly bool
	// failOpen writes the audit trail in fail_mode open.
	failOpen bool
	// deps changes the dependencies before New (doubles for failures).
	deps func(*Deps)
	// now is the service's clock (default time.Now).
	now func() time.Time
	// claimIdle is the queue's ClaimIdle (default a minute).
	claimIdle time.Duration
	// maxDeliveries is the queue's MaxDeliveries (default 5).
	maxDeliveries int
	// agents is appended to agents.yaml (more agents; %endpoint:<id>% of
	// each id in peers is its peer's URL).
	agents string
	// peers are agents of agents besides peerIDs that get a peer.
	peers []string
	// registry replaces config/registry.yaml (a library of the test's own,
	// unaffected by edits to the shipped one).
	registry string
	// wrapHistory, if set, wraps the history of h and of its replicas.
	wrapHistory func(mailbox.History) mailbox.History
	// redis puts the queue and the history on a real redis-server (a
	// fresh one per test, skipped loudly when none is installed) instead
	// of in memory: the state every replica shares.
	redis bool
}

// backends are the two state backends the replica-facing tests run on.
var backends = []struct {
	name  string
	redis bool
}{{"memory", false}, {"redis", true}}

// harness is the messaging service as app.Build wires it.
type harness struct {
	t       *testing.T
	dir     string
	cfg     *config.Config
	svc     *Service
	trail   *testkit.Trail
	esc     *escalator
	queue   mailbox.Queue
	history mailbox.History
	// redis is the server of a redis harness (nil in memory).
	redis  *testredis.Server
	opts   harnessOpts
	deps   Deps
	reg    *registry.Registry
	peers  map[string]*testkit.Peer
	logs   *testkit.LogBuffer
	reqSeq atomic.Int64
}

// writeConfig writes the four config files into dir and loads them.
func writeConfig(t *testing.T, dir string, peers map[string]*testkit.Peer, o harnessOpts) *config.Config {
	t.Helper()
	agents := testAgents + o.agents
	for id, p := range peers {
		agents = strings.ReplaceAll(agents, "%endpoint:"+id+"%", p.Srv.URL+"/messages")
	}
	var b strings.Builder
	for line := range strings.SplitSeq(agents, "\n") {
		b.WriteString(line + "\n")
		if strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   ") && strings.HasSuffix(line, ":") {
			id := strings.TrimSuffix(strings.TrimSpace(line), ":")
			b.WriteString("    token_sha256: \"" + roster.HashTokenHex("tok-"+id) + "\"\n")
		}
	}
	rego, err := filepath.Abs("../rego")
	if err != nil {
		t.Fatal(err)
	}
	allow := "  allowed_networks: [127.0.0.0/8]\n"
	if o.publicOnly {
		allow = ""
	}
	timeout, workers := o.timeout, o.workers
	if timeout == "" {
		timeout = "2s"
	}
	if workers == 0 {
		workers = 2
	}
	failMode := "closed"
	if o.failOpen {
		failMode = "open"
	}
	gw := `listen: "127.0.0.1:0"
upstreams:
  - {name: mock, type: mock, models: ["*"]}
policy:
  dir: ` + rego + `
audit:
  dir: ` + filepath.Join(dir, "audit") + `
  fail_mode: ` + failMode + `
messaging:
  retry_backoff: 5ms
  timeout: ` + timeout + `
  workers: ` + fmt.Sprint(workers) + `
` + allow + o.messagingExtra
	attempts := o.attempts
	if attempts == 0 {
		attempts = 3
	}
	reg := []byte(o.registry)
	if o.registry == "" {
		if reg, err = os.ReadFile("../config/registry.yaml"); err != nil {
			t.Fatal(err)
		}
	}
	files := map[string]string{
		config.GatewayFile:  gw,
		config.AgentsFile:   b.String(),
		config.ProtocolFile: fmt.Sprintf("protocol:\n  limits:\n    max_retry_attempts: %d\n", attempts) + o.protocolExtra,
		config.RegistryFile: string(reg),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load(dir)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	return cfg
}

// engine is the repository's policies, compiled once for the package's
// tests (the engine is safe for concurrent use).
var engine = sync.OnceValues(func() (*policy.Engine, error) {
	return policy.New(policy.Options{Dir: "../rego", NoWatch: true, Logger: slog.New(slog.DiscardHandler), Timeout: 5 * time.Second})
})

func policies(t testing.TB) *policy.Engine {
	t.Helper()
	e, err := engine()
	if err != nil {
		t.Fatalf("policies: %v", err)
	}
	return e
}

func newHarness(t *testing.T, o harnessOpts) *harness {
	t.Helper()
	h := &harness{t: t, dir: t.TempDir(), peers: map[string]*testkit.Peer{}, trail: &testkit.Trail{}, esc: &escalator{}, logs: &testkit.LogBuffer{}}
	for _, id := range append(slices.Clone(peerIDs), o.peers...) {
		h.peers[id] = newPeer(t)
	}
	h.opts = o
	h.cfg = writeConfig(t, h.dir, h.peers, o)
	log := slog.New(slog.NewTextHandler(h.logs, nil))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("service log:\n%s", h.logs.String())
		}
	})
	rbac, err := policy.RBACFor(h.cfg.Dir, h.cfg.Agents, h.cfg.Gateway.Admin.ReviewerNames())
	if err != nil {
		t.Fatal(err)
	}
	if h.reg, err = registry.New(h.cfg, registry.NewMemoryStore()); err != nil {
		t.Fatal(err)
	}
	m := h.cfg.Gateway.Messaging
	if o.redis {
		h.redis = testredis.Start(t)
		q, err := mailbox.NewRedisQueue(h.redis.Client(t), mailbox.RedisQueueOptions{Prefix: "{" + t.Name() + "}", Consumer: "replica-1",
			MaxLen: int64(m.QueueCapacity), ClaimIdle: o.claimIdle, Block: 50 * time.Millisecond, MaxDeliveries: o.maxDeliveries})
		if err != nil {
			t.Fatal(err)
		}
		h.queue = q
		h.history = mailbox.NewRedisHistory(h.redis.Client(t), mailbox.HistoryOptions{Prefix: "{" + t.Name() + "}", Retention: m.HistoryRetention.D()})
	} else {
		h.queue = mailbox.NewMemoryQueueWithOptions(mailbox.MemoryQueueOptions{Capacity: m.QueueCapacity, ClaimIdle: o.claimIdle, MaxDeliveries: o.maxDeliveries})
		h.history = mailbox.NewMemoryHistory(mailbox.HistoryOptions{Retention: m.HistoryRetention.D()})
	}
	if o.wrapHistory != nil {
		h.history = o.wrapHistory(h.history)
	}
	client, err := NewClient(m.TLS, egress.Policy{Allowed: m.AllowedPrefixes})
	if err != nil {
		t.Fatal(err)
	}
	d := Deps{
		Config: h.cfg, Registry: h.reg, RBAC: rbac, Policy: policies(t), Queue: h.queue, History: h.history,
		Audit:     &door.Recorder{Log: h.trail, FailClosed: h.cfg.Gateway.Audit.FailMode == "closed", Logger: log},
		Escalator: h.esc, Log: log, Client: client, Now: o.now,
	}
	if o.deps != nil {
		o.deps(&d)
	}
	h.deps = d
	if h.svc, err = New(d); err != nil {
		t.Fatal(err)
	}
	return h
}

// replica is a second gateway replica beside h's: the same configuration,
// registry, audit trail and escalator, its own Service, and its own queue
// and history instances on the same state (the same Redis keys). Only a
// redis harness has replicas: memory state is one process's.
func (h *harness) replica() *Service {
	h.t.Helper()
	if h.redis == nil {
		h.t.Fatal("replica: memory state is not shared between replicas")
	}
	d := h.deps
	m := h.cfg.Gateway.Messaging
	q, err := mailbox.NewRedisQueue(h.redis.Client(h.t), mailbox.RedisQueueOptions{Prefix: "{" + h.t.Name() + "}", Consumer: "replica-2",
		MaxLen: int64(m.QueueCapacity), ClaimIdle: h.opts.claimIdle, Block: 50 * time.Millisecond, MaxDeliveries: h.opts.maxDeliveries})
	if err != nil {
		h.t.Fatal(err)
	}
	d.Queue = q
	d.History = mailbox.NewRedisHistory(h.redis.Client(h.t), mailbox.HistoryOptions{Prefix: "{" + h.t.Name() + "}", Retention: m.HistoryRetention.D()})
	if h.opts.wrapHistory != nil {
		d.History = h.opts.wrapHistory(d.History)
	}
	svc, err := New(d)
	if err != nil {
		h.t.Fatal(err)
	}
	return svc
}

// sendTo posts envelope as agent to svc (h's service or a replica).
func (h *harness) sendTo(svc *Service, agent, envelope string) *httptest.ResponseRecorder {
	h.t.Helper()
	r, _ := h.request(http.MethodPost, Route, agent, envelope)
	w := httptest.NewRecorder()
	svc.Send(w, r)
	return w
}

// run starts the delivery workers until the test ends.
func (h *harness) run() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		h.svc.Run(ctx)
		close(done)
	}()
	h.t.Cleanup(func() {
		cancel()
		<-done
	})
}

// request is POST /relay/messages (or another method and path) as agent, the
// Exchange attached as the identify stage of the server attaches it.
func (h *harness) request(method, target, agent, body string) (*http.Request, *scope.Exchange) {
	h.t.Helper()
	r := httptest.NewRequest(method, target, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	ex := &scope.Exchange{RequestID: fmt.Sprintf("req_%d", h.reqSeq.Add(1)), SessionID: "sess_1", Start: time.Now()}
	if agent != "" {
		a := h.cfg.Agents[agent]
		if a == nil {
			h.t.Fatalf("no agent %q in the test config", agent)
		}
		ex.Agent = a
	}
	return scope.Attach(r, ex), ex
}

// send posts envelope as agent and returns the answer.
func (h *harness) send(agent, envelope string) *httptest.ResponseRecorder {
	h.t.Helper()
	return h.sendTo(h.svc, agent, envelope)
}

// historyOf is GET /relay/messages?query as agent.
func (h *harness) historyOf(agent, query string) *httptest.ResponseRecorder {
	h.t.Helper()
	r, _ := h.request(http.MethodGet, "/relay/messages?"+query, agent, "")
	w := httptest.NewRecorder()
	h.svc.History(w, r)
	return w
}

// records returns the audit records of kind, in order.
func (h *harness) records(kind string) []audit.Record { return h.trail.ByKind(kind) }

// waitRecords polls until the trail holds n records of kind.
func (h *harness) waitRecords(kind string, n int) []audit.Record {
	h.t.Helper()
	var rs []audit.Record
	if !eventually(func() bool { rs = h.records(kind); return len(rs) >= n }) {
		h.t.Fatalf("%d %s records, want %d (kinds: %v)", len(rs), kind, n, h.trail.Kinds())
	}
	return rs
}

// thread lists a thread straight from the history.
func (h *harness) thread(kind, id string) []mailbox.Entry {
	h.t.Helper()
	es, err := h.history.List(context.Background(), kind, id, 0)
	if err != nil {
		h.t.Fatal(err)
	}
	return es
}

// apiError is OpenAI's error shape.
type apiError struct {
	Error *struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Code    string  `json:"code"`
		Param   *string `json:"param"`
	} `json:"error"`
}

// decodeError checks that w is an error in OpenAI's shape with status and
// code, and returns it.
func decodeError(t *testing.T, w *httptest.ResponseRecorder, status int, code string) apiError {
	t.Helper()
	var e apiError
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil || e.Error == nil {
		t.Fatalf("answer %d is not an error in OpenAI's shape: %s", w.Code, w.Body)
	}
	if w.Code != status || e.Error.Code != code || e.Error.Type == "" || e.Error.Message == "" {
		t.Fatalf("got %d %s, want %d %s", w.Code, w.Body, status, code)
	}
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q", ct)
	}
	return e
}

func param(e apiError) string {
	if e.Error == nil || e.Error.Param == nil {
		return ""
	}
	return *e.Error.Param
}

// jsonBody decodes a JSON answer.
func jsonBody(t *testing.T, w *httptest.ResponseRecorder) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal(w.Body.Bytes(), &out); err != nil {
		t.Fatalf("answer %d is not JSON: %s", w.Code, w.Body)
	}
	return out
}

// decode decodes JSON bytes into a map.
func decode(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var out map[string]any
	if err := json.Unmarshal(b, &out); err != nil {
		t.Fatalf("not JSON: %s", b)
	}
	return out
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
