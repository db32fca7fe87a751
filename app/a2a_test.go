package app

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/testkit"
)

// newPeer is an agent endpoint over plain HTTP; startPeer serves one
// over TLS with tc.
func newPeer(t testing.TB) *testkit.Peer { return testkit.NewPeer(t, nil) }

func startPeer(t testing.TB, tc *tls.Config) *testkit.Peer { return testkit.NewPeer(t, tc) }

// a2a is a whole gateway built by the real wiring (build), served by
// httptest, with real agent endpoints.
type a2a struct {
	t        testing.TB
	srv      *httptest.Server
	app      *App
	auditDir string
	peers    map[string]*testkit.Peer
	// dir and cfg are the config directory and what was loaded from it.
	dir string
	cfg *config.Config
	// stop shuts this gateway down (once; also at cleanup), as a restart
	// or a replica that goes away.
	stop func()
}

// a2aAgents: every agent's token is "tok-" + id; %endpoint:<id>% is
// replaced by the peer's URL.
const a2aAgents = `agents:
  orch_1:
    type: orchestrator
    capabilities: [read, spawn]
    endpoint: "%endpoint:orch_1%"
    messages:
      - to: ["*"]
        actions: ["*"]
      - to: [broadcast]
        actions: [workflow_complete, start_workflow]
  planner_1:
    type: planner
    endpoint: "%endpoint:planner_1%"
    # Not allowed the registry's embeddings model: its profile is embedded
    # by the gateway itself, so free-text queries stay semantic.
    models: [mock-1]
    supported_verbs: [predict]
    supported_tools: [PRC_EST]
    inputs: [ctx.history, method, window]
    outputs: [predictions]
    description: Plans workflows and predicts prices
    messages:
      - to: [orch_1]
        actions: [plan_complete, validation_result]
  executor_1:
    type: executor
    endpoint: "%endpoint:executor_1%"
    supported_verbs: [search, rank]
    supported_tools: [H_API, RANK]
    inputs: [c, p_max]
    outputs: [list]
    messages:
      - to: [orch_1]
        actions: ["*"]
      - to: [broadcast]
        actions: [task_completed]
  vendor_onboarding_agent:
    type: initiator
    endpoint: "%endpoint:vendor_onboarding_agent%"
    messages:
      - to: [compliance_agent]
        actions: [validate_vendor]
  compliance_agent:
    type: validator
    endpoint: "%endpoint:compliance_agent%"
    messages:
      - to: [vendor_onboarding_agent]
        actions: ["*"]
      - to: [finance_agent]
        actions: [setup_vendor_payments]
  requisition_agent:
    type: requisition
    endpoint: "%endpoint:requisition_agent%"
    messages:
      - to: [finance_agent]
        actions: [budget_check]
  finance_agent:
    type: finance
    endpoint: "%endpoint:finance_agent%"
  outsider:
    type: reviewer
    capabilities: [read]
    max_request_size: 1KB
    messages:
      - to: [orch_1]
        actions: [ping]
  silent:
    type: reviewer
`

type a2aOpts struct {
	// redisURL: state.backend redis.
	redisURL string
	// chain names this replica's audit chain (and Redis consumer).
	chain string
	// auditDir shares a directory between replicas.
	auditDir string
	// peers are reused (a second replica talks to the same agents).
	peers map[string]*testkit.Peer
	// workers is messaging.workers.
	workers int
	// failMode is audit.fail_mode (default closed).
	failMode string
	// messagingExtra is appended to gateway.yaml's messaging section.
	messagingExtra string
	// protocolExtra is appended under "protocol:" in protocol.yaml.
	protocolExtra string
	// policyDir replaces the repository's rego/ (relative to the config dir).
	policyDir string
	// policyYAML replaces gateway.yaml's whole policy block.
	policyYAML string
	// publicOnly leaves out messaging.allowed_networks: the loopback
	// endpoints of the test are then refused, as in a default install.
	publicOnly bool
	// registryExtra is appended under "registry:" in registry.yaml.
	registryExtra string
	// dir reuses a config directory (and so its state dir): the gateway
	// restarted on the same files.
	dir string
	// agents replaces a2aAgents; files are more config files by name
	// (registry.yaml's replacing the repository's).
	agents string
	files  map[string]string
}

func newA2A(t testing.TB, o a2aOpts) *a2a {
	t.Helper()
	dir := o.dir
	if dir == "" {
		dir = t.TempDir()
	}
	if o.auditDir == "" {
		o.auditDir = filepath.Join(dir, "audit")
	}
	if o.chain == "" {
		o.chain = "a2a"
	}
	if o.workers == 0 {
		o.workers = 2
	}
	if o.failMode == "" {
		o.failMode = "closed"
	}
	peers := o.peers
	if peers == nil {
		peers = map[string]*testkit.Peer{}
	}
	for _, id := range []string{"orch_1", "planner_1", "executor_1", "vendor_onboarding_agent", "compliance_agent", "requisition_agent", "finance_agent"} {
		if peers[id] == nil {
			peers[id] = newPeer(t)
		}
	}
	agents := a2aAgents
	if o.agents != "" {
		agents = o.agents
	}
	for id, p := range peers {
		agents = strings.ReplaceAll(agents, "%endpoint:"+id+"%", p.Srv.URL+"/messages")
	}
	var b strings.Builder
	for _, line := range strings.Split(agents, "\n") {
		b.WriteString(line + "\n")
		if strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   ") && strings.HasSuffix(line, ":") {
			id := strings.TrimSuffix(strings.TrimSpace(line), ":")
			b.WriteString("    token_sha256: \"" + roster.HashTokenHex("tok-"+id) + "\"\n")
		}
	}
	state := ""
	if o.redisURL != "" {
		// A 1s state deadline, not the 50ms default: these tests hold
		// what replicas share, not how fast Redis answers a loaded CI machine.
		state = "state:\n  backend: redis\n" + redisYAML(o.redisURL) + "  timeout: 1s\n"
	}
	gw := `listen: "127.0.0.1:0"
admin:
  token_sha256: "` + roster.HashTokenHex("tok-admin") + `"
  reviewers:
    - name: security-lead
      token_sha256: "` + roster.HashTokenHex("tok-reviewer") + `"
upstreams:
  - {name: mock, type: mock, models: ["*"]}
` + policyBlock(o) + `audit:
  dir: ` + o.auditDir + `
  chain: ` + o.chain + `
  fail_mode: ` + o.failMode + `
messaging:
  retry_backoff: 10ms
  timeout: 2s
  workers: ` + itoa(o.workers) + `
` + allowLoopback(o) + o.messagingExtra + state
	files := map[string]string{
		config.GatewayFile:  gw,
		config.AgentsFile:   b.String(),
		config.ProtocolFile: "protocol:\n  limits:\n    max_retry_attempts: 3\n" + o.protocolExtra,
	}
	reg, err := os.ReadFile("../config/registry.yaml")
	if err != nil {
		t.Fatal(err)
	}
	files[config.RegistryFile] = string(reg) + o.registryExtra
	maps.Copy(files, o.files)
	cfg, a, auditLog := buildFromFiles(t, dir, files)
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { a.approval.Run(ctx) })
	wg.Go(func() { a.messaging.Run(ctx) })
	srv := httptest.NewServer(a.server.Handler())
	var once sync.Once
	stop := func() {
		once.Do(func() {
			srv.Close()
			cancel()
			wg.Wait()
			a.Close()
			auditLog.Close()
		})
	}
	t.Cleanup(stop)
	return &a2a{t: t, srv: srv, app: a, auditDir: o.auditDir, peers: peers, dir: dir, cfg: cfg, stop: stop}
}

// buildFromFiles writes the config files into dir and builds the gateway
// from them with Build, on its own audit trail; the gateway's log is shown
// when the test fails.
// serveApp builds the gateway from files in dir, runs its background work
// and serves it until the test ends.
func serveApp(t testing.TB, dir, auditDir string, files map[string]string) *a2a {
	t.Helper()
	cfg, a, auditLog := buildFromFiles(t, dir, files)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	srv := httptest.NewServer(a.server.Handler())
	t.Cleanup(func() {
		srv.Close()
		cancel()
		<-done
		a.Close()
		auditLog.Close()
	})
	return &a2a{t: t, srv: srv, app: a, auditDir: auditDir, dir: dir, cfg: cfg}
}

func buildFromFiles(t testing.TB, dir string, files map[string]string) (*config.Config, *App, *audit.Log) {
	t.Helper()
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load(dir)
	if err != nil {
		t.Fatalf("config: %v", err)
	}
	logs := &testkit.LogBuffer{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs.String())
		}
	})
	auditLog, err := openAudit(cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Build(cfg, Options{Log: log, Audit: auditLog})
	if err == nil {
		checkSlots(t, a)
	}
	if err != nil {
		t.Fatal(err)
	}
	return cfg, a, auditLog
}

// policyDir is the policy directory of the test config: a path in a
// config file is relative to the file's directory, so the repository's
// policies are named absolutely.
func policyDir(o a2aOpts) string {
	if o.policyDir != "" {
		return o.policyDir
	}
	d, err := filepath.Abs("../rego")
	if err != nil {
		panic(err)
	}
	return d
}

// policyBlock is gateway.yaml's policy block.
func policyBlock(o a2aOpts) string {
	if o.policyYAML != "" {
		return o.policyYAML
	}
	return "policy:\n  dir: " + policyDir(o) + "\n"
}

// allowLoopback lets the gateway reach the test's endpoints on loopback.
func allowLoopback(o a2aOpts) string {
	if o.publicOnly {
		return ""
	}
	return "  allowed_networks: [127.0.0.0/8]\n"
}

func itoa(n int) string {
	b, _ := json.Marshal(n)
	return string(b)
}

// do sends a request as token and returns the status and body.
func (g *a2a) do(method, path, token, body string) (int, []byte, http.Header) {
	g.t.Helper()
	req, _ := http.NewRequest(method, g.srv.URL+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		g.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, out, resp.Header
}

func (g *a2a) send(agent, envelope string) (int, map[string]any) {
	g.t.Helper()
	status, body, _ := g.do(http.MethodPost, "/relay/messages", "tok-"+agent, envelope)
	var out map[string]any
	if err := json.Unmarshal(body, &out); err != nil {
		g.t.Fatalf("answer is not JSON (%d): %s", status, body)
	}
	return status, out
}

// history returns the message ids of a thread as agent sees it.
func (g *a2a) history(agent, query string) (int, []string, []map[string]any) {
	g.t.Helper()
	status, body, _ := g.do(http.MethodGet, "/relay/messages?"+query, "tok-"+agent, "")
	var out struct {
		Data []map[string]any `json:"data"`
	}
	_ = json.Unmarshal(body, &out)
	ids := make([]string, 0, len(out.Data))
	for _, e := range out.Data {
		ids = append(ids, e["message_id"].(string))
	}
	return status, ids, out.Data
}

// entries reads this gateway's audit chain (after a verify).
func (g *a2a) entries(kind string) []audit.Entry {
	g.t.Helper()
	var out []audit.Entry
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		out = out[:0]
		matches, _ := filepath.Glob(filepath.Join(g.auditDir, "*.jsonl"))
		for _, f := range matches {
			raw, _ := os.ReadFile(f)
			for _, line := range bytes.Split(raw, []byte("\n")) {
				var e audit.Entry
				if json.Unmarshal(line, &e) == nil && e.Kind == kind {
					out = append(out, e)
				}
			}
		}
		if len(out) > 0 || time.Now().After(deadline) {
			return out
		}
	}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}
