package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go"
	"github.com/openai/openai-go/option"

	"github.com/sacpgw/gateway/app"
	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/metrics"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/testkit"
	"github.com/sacpgw/gateway/internal/tracing"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/proxy"
	"github.com/sacpgw/gateway/server"
	"github.com/sacpgw/gateway/upstream"
)

// upstreamKey is the provider key the gateway holds; agents never see it.
const upstreamKey = "sk-upstream-secret-key"

// testAgents are the agents of the test config; each token is "tok-" + id.
const testAgents = `agents:
  alpha:
    type: code-generator
    capabilities: [read, write]
    allowed_targets: [architecture, design, code]
    rate_limit: 1000/minute
    token_sha256: "%alpha%"
    spiffe_id: spiffe://example.org/agent/alpha
  small:
    type: code-completer
    max_request_size: 1KB
    token_sha256: "%small%"
  limited:
    type: reviewer
    rate_limit: 2/minute
    token_sha256: "%limited%"
  budget:
    type: reviewer
    token_limit: 100/hour
    token_sha256: "%budget%"
  restricted:
    type: reviewer
    models: ["gpt-4o-mini", "mock-*"]
    token_sha256: "%restricted%"
  proto:
    type: code-generator
    response_format: json_standard
    data_schema_file: schemas/proto.json
    token_sha256: "%proto%"
  bench:
    type: reviewer
    rate_limit: 1000000000/second
    token_limit: 1000000000000/hour
    token_sha256: "%bench%"
  compact:
    type: executor
    response_format: sacp_compact
    supported_verbs: [predict]
    supported_tools: [PRC_EST]
    token_sha256: "%compact%"
`

// testRegistry is the verb/tool library of the test config (compact SACP's
// library, as in config/registry.yaml).
const testRegistry = `registry:
  verbs:
    - name: predict
      description: Predicts future values from history.
      inputs: ["window:integer", "method:string"]
      outputs: predictions
    - name: search
      description: Finds items matching filters.
      inputs: ["query:string"]
      outputs: list
  tools:
    - id: PRC_EST
      description: Price estimator.
      supported_verbs: [predict]
    - id: H_API
      description: Hotel search API.
      supported_verbs: [search]
`

type stackOpts struct {
	// upstreamURL is the base of the OpenAI-compatible test upstream (…/v1).
	upstreamURL string
	maxRetries  int
	// responseTimeout is protocol.yaml timeouts.response (default 5000ms).
	responseTimeout string
	sidecar         string
	// discardLogs formats the access log but drops it (benchmarks).
	discardLogs bool
	// failMode is audit.fail_mode (default closed, as shipped).
	failMode string
	// brokenAudit hands the gateway an audit log that can no longer write.
	brokenAudit bool
	// protocolExtra is appended under "protocol:" in protocol.yaml.
	protocolExtra string
	// keepAlive is the SACP stream keep-alive interval (default 5s).
	keepAlive time.Duration
	// auditDir overrides the audit directory (benchmarks put it on tmpfs).
	auditDir string
	// core serves the proxy core only: auth and limits, no audit trail,
	// no policies, no redaction (a benchmark baseline).
	core bool
	// redisURL puts limits and approval states in Redis (state.backend redis).
	redisURL string
	// tlsYAML is gateway.yaml's tls section; set, the gateway is served by
	// server.Serve on a real listener with TLS.
	tlsYAML string
	// tracer exports the requests' spans.
	tracer *tracing.Tracer
	// connsPerSource is http.unauthenticated.conns_per_source (default 1024).
	connsPerSource int
	// listen serves through the gateway's own http.Server on a real
	// listener (connection hooks and timeouts included), as tlsYAML does.
	listen bool
}

// protoSchema is the proto agent's data schema: an amount is required.
const protoSchema = `{"type":"object","properties":{"amount":{"type":"number"}},"required":["amount"]}`

// stack is a whole gateway (config files → loader → proxy → server) served
// by httptest, as an agent would reach it.
type stack struct {
	t        testing.TB
	srv      *httptest.Server
	logs     *testkit.LogBuffer
	auditDir string
	audit    *audit.Log
}

func newStack(t testing.TB, o stackOpts) *stack {
	t.Helper()
	dir := t.TempDir()
	if o.upstreamURL == "" {
		o.upstreamURL = "http://127.0.0.1:1/v1"
	}
	if o.auditDir == "" {
		o.auditDir = filepath.Join(dir, "audit")
	}
	if o.failMode == "" {
		o.failMode = "closed"
	}
	if o.responseTimeout == "" {
		o.responseTimeout = "5000ms"
	}
	if o.connsPerSource == 0 {
		o.connsPerSource = 1024
	}
	gw := `listen: "127.0.0.1:0"
admin:
  token_sha256: "` + roster.HashTokenHex("tok-admin") + `"
  reviewers:
    - name: security-lead
      token_sha256: "` + roster.HashTokenHex("tok-reviewer") + `"
upstreams:
  - name: mock
    type: mock
    models: ["mock-1", "mock-*"]
  - name: test
    type: openai
    base_url: ` + o.upstreamURL + `
    api_key: ` + upstreamKey + `
    max_retries: ` + strconv.Itoa(o.maxRetries) + `
    models: ["*"]
` + o.tlsYAML + `
audit:
  dir: ` + o.auditDir + `
  chain: test
  fail_mode: ` + o.failMode + `
policy:
  dir: ` + policyDir(t) + `
approval:
  rate_limit: 1000000/minute
http:
  unauthenticated:
    rate_limit: 1000000/second
    conns_per_source: ` + strconv.Itoa(o.connsPerSource) + `
` + stateYAML(o.redisURL)
	agents := testAgents
	for _, id := range []string{"alpha", "small", "limited", "budget", "restricted", "bench", "proto", "compact"} {
		agents = strings.ReplaceAll(agents, "%"+id+"%", roster.HashTokenHex("tok-"+id))
	}
	if o.core {
		o.protocolExtra += "  redaction:\n    detectors: []\n"
	}
	proto := "protocol:\n  timeouts:\n    response: " + o.responseTimeout + "\n" + o.protocolExtra
	if err := os.MkdirAll(filepath.Join(dir, "schemas"), 0o700); err != nil {
		t.Fatal(err)
	}
	write(t, dir, "schemas/proto.json", protoSchema)
	write(t, dir, config.GatewayFile, gw)
	write(t, dir, config.AgentsFile, agents)
	write(t, dir, config.ProtocolFile, proto)
	write(t, dir, config.RegistryFile, testRegistry)
	// The shipped specification catalogue (approval references).
	if err := os.CopyFS(filepath.Join(dir, "specs"), os.DirFS("../config/specs")); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(dir)
	if err != nil {
		t.Fatalf("load test config: %v", err)
	}
	logs := &testkit.LogBuffer{}
	var sink io.Writer = logs
	if o.discardLogs {
		sink = io.Discard
	}
	log := server.NewJSONLogger(sink, &slog.HandlerOptions{Level: slog.LevelInfo}) // as app builds it
	auditLog, err := audit.Open(audit.Config{Dir: cfg.Gateway.Audit.Dir, Chain: cfg.Gateway.Audit.Chain, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	if o.brokenAudit {
		auditLog.Close()
	}
	t.Cleanup(func() {
		auditLog.Close()
		if t.Failed() {
			t.Logf("gateway log:\n%s", logs.String())
		}
	})
	var h http.Handler
	var serveOn func(context.Context, net.Listener) error
	if o.core {
		h, serveOn = coreGateway(t, cfg, log, o)
	} else {
		// The gateway as the command builds it.
		a, err := app.Build(cfg, app.Options{Sidecar: o.sidecar, Log: log, Audit: auditLog, KeepAlive: o.keepAlive, Tracer: o.tracer})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { a.Run(ctx); close(done) }()
		t.Cleanup(func() { cancel(); <-done; a.Close() })
		h, serveOn = a.Handler(), a.ServeListener
	}
	var hs *httptest.Server
	if o.tlsYAML != "" || o.listen {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { _ = serveOn(ctx, ln); close(done) }()
		t.Cleanup(func() { cancel(); <-done })
		scheme := "http://"
		if o.tlsYAML != "" {
			scheme = "https://"
		}
		hs = &httptest.Server{URL: scheme + ln.Addr().String()}
	} else {
		hs = httptest.NewServer(h)
		t.Cleanup(hs.Close)
	}
	return &stack{t: t, srv: hs, logs: logs, auditDir: cfg.Gateway.Audit.Dir, audit: auditLog}
}

// coreGateway is the benchmarks' baseline: the OpenAI pipeline with
// identity, size, model and limits only (no audit trail, no policies, no
// redaction), behind the same server shell.
func coreGateway(t testing.TB, cfg *config.Config, log *slog.Logger, o stackOpts) (http.Handler, func(context.Context, net.Listener) error) {
	ups, err := upstream.New(cfg.Gateway.Upstreams, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ups.Close)
	requests := limit.NewMemory()
	openai, err := proxy.NewDoor(proxy.Deps{Config: cfg, Upstreams: ups, Requests: requests, Tokens: limit.NewMemoryBudget(), Log: log,
		SidecarAgent: o.sidecar, KeepAlive: o.keepAlive}, nil)
	if err != nil {
		t.Fatal(err)
	}
	frame, err := door.NewFrame(cfg, door.GateDeps{Sidecar: o.sidecar, Requests: requests, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	s, err := server.New(server.Options{Frame: frame, Routes: openai.Routes(), Log: log, Metrics: metrics.New(metrics.Options{NoRuntime: true})})
	if err != nil {
		t.Fatal(err)
	}
	return s.Handler(), s.Serve
}

// policyDir is the repository's policies, as an absolute path.
func policyDir(t testing.TB) string {
	d, err := filepath.Abs("../rego")
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// stateYAML puts limits and approval states in Redis when url is set;
// a Redis failure is refused (on_failure closed), never served locally.
func stateYAML(url string) string {
	if url == "" {
		return ""
	}
	return "state:\n  backend: redis\n  redis_url: " + url + "\n  on_failure: closed\n"
}

// client returns the official OpenAI SDK pointed at the gateway, as an
// agent configures it: base URL and its gateway token, nothing else.
func (s *stack) client(token string, opts ...option.RequestOption) *openai.Client {
	base := []option.RequestOption{
		option.WithBaseURL(s.srv.URL + "/v1/"),
		option.WithAPIKey(token),
		option.WithMaxRetries(0),
	}
	c := openai.NewClient(append(base, opts...)...)
	return &c
}

// post sends a raw request, for what the SDK cannot send (malformed bodies).
func (s *stack) post(path, token, body string, hdr ...string) *http.Response {
	s.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, s.srv.URL+path, strings.NewReader(body))
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		s.t.Fatal(err)
	}
	s.t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// waitLog waits for the access log line, written once the handler returns
// (which can be just after the client has its answer).
func (s *stack) waitLog(substr string) bool {
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if strings.Contains(s.logs.String(), substr) {
			return true
		}
	}
	return false
}

func write(t testing.TB, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func readAll(t testing.TB, r io.Reader) string {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func stringsReader(s string) io.Reader { return strings.NewReader(s) }
