package config

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func noEnv(string) (string, bool) { return "", false }

// TestShippedConfigLoads guards the quickstart: the files in this directory
// are what `go run ./cmd/gateway` serves.
func TestShippedConfigLoads(t *testing.T) {
	cfg, err := Load(shippedDir, Options{LookupEnv: noEnv})
	if err != nil {
		t.Fatalf("shipped config does not load:\n%v", err)
	}
	if len(cfg.Agents) != 5 || cfg.Agents["claude-3"].RateLimit != (Rate{N: 100, Period: time.Hour}) {
		t.Errorf("agents = %+v", cfg.Agents)
	}
	if cfg.Agents["claude-3"].MaxRequestSize != 50*1024 || !cfg.Agents["claude-3"].StandardProtocol() {
		t.Errorf("claude-3 = %+v", cfg.Agents["claude-3"])
	}
	if cfg.Protocol.Timeouts.Escalation.D() != 24*time.Hour || cfg.Protocol.Limits.MaxRetryAttempts != 3 {
		t.Errorf("protocol = %+v", cfg.Protocol)
	}
	wf := cfg.Workflows.Get("find-ceo-email")
	if wf == nil || wf.Start != "research" || wf.Nodes["validate"].Model != "mock-1" {
		t.Errorf("workflows = %+v: the demo workflow, its nodes' model defaulted from the agent", cfg.Workflows)
	}
	if got := cfg.DemoCredentials(); len(got) != 5 {
		t.Errorf("demo credentials = %v, want all five published tokens flagged", got)
	}
}

// TestEveryProblemReportedAtOnce loads a fixture with many mistakes across
// the three files and wants each one, with its file and line, in one pass.
func TestEveryProblemReportedAtOnce(t *testing.T) {
	_, err := Load("testdata/multi", Options{LookupEnv: noEnv})
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("want Problems, got %v", err)
	}
	want, _ := os.ReadFile("testdata/multi/want.txt")
	if got := err.Error() + "\n"; got != string(want) {
		t.Errorf("problems:\n%s\nwant:\n%s", got, want)
	}
}

const (
	okGateway  = "upstreams:\n  - name: mock\n    type: mock\n    models: [\"*\"]\n"
	okAgents   = "agents:\n  a1:\n    token_sha256: \"" + "61b89502ba471149636931e887f65a4f785d47e646b2c8521cfd02dbfed43722" + "\"\n"
	okProtocol = "protocol:\n  version: \"1.0\"\n"
)

func loadFiles(t *testing.T, gw, ag, pr string, env map[string]string) (*Config, error) {
	t.Helper()
	dir := t.TempDir()
	for name, content := range map[string]string{GatewayFile: gw, AgentsFile: ag, ProtocolFile: pr} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return Load(dir, Options{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
}

func TestLoadProblems(t *testing.T) {
	cases := []struct {
		note       string
		gw, ag, pr string
		want       string // "file:line: substring"
	}{
		{"duplicate agent", okGateway, okAgents + "  a1:\n    token_sha256: \"" + strings.Repeat("b", 64) + "\"\n", okProtocol, `agents.yaml:4: duplicate entry "a1" in agents (first at line 2)`},
		{"duplicate key", okGateway, okAgents + "    token_sha256: \"" + strings.Repeat("b", 64) + "\"\n", okProtocol, `agents.yaml:4: duplicate key "token_sha256" in agents.a1 (first at line 3)`},
		{"shared token", okGateway, okAgents + "  a2:\n    token_sha256: \"" + "61b89502ba471149636931e887f65a4f785d47e646b2c8521cfd02dbfed43722" + "\"\n", okProtocol, `agents.yaml:5: agent "a2": token_sha256 is also agent "a1"'s`},
		{"no identity", okGateway, "agents:\n  a1:\n    type: x\n", okProtocol, `agents.yaml:2: agent "a1": token_sha256 or spiffe_id is required`},
		{"no upstreams", "listen: \":1\"\n", okAgents, okProtocol, "gateway.yaml:1: upstreams: at least one upstream is required"},
		{"bad response format", okGateway, okAgents + "    response_format: xml\n", okProtocol, `agents.yaml:4: agent "a1": response_format "xml"`},
		{"contradiction", okGateway, okAgents + "    response_format: sacp_compact\n    use_standard_protocol: true\n", okProtocol, `agents.yaml:5: agent "a1": use_standard_protocol: true contradicts`},
		{"redis without url", okGateway + "state:\n  backend: redis\n", okAgents, okProtocol, "gateway.yaml:5: state.redis_url is required"},
		{"redis url and block", okGateway + "state:\n  backend: redis\n  redis_url: redis://r:6379\n  redis:\n    url: redis://r:6379\n", okAgents, okProtocol, "gateway.yaml:8: state: give redis_url or the redis block, not both"},
		{"redis two kinds", okGateway + "state:\n  backend: redis\n  redis:\n    url: redis://r:6379\n    cluster: {addrs: [\"r:7000\"]}\n", okAgents, okProtocol, "gateway.yaml:7: state.redis: give exactly one of url"},
		{"redis sentinel without master", okGateway + "state:\n  backend: redis\n  redis:\n    sentinel:\n      addrs: [\"s1:26379\"]\n", okAgents, okProtocol, "gateway.yaml:8: state.redis.sentinel.master: the primary's name is required"},
		{"redis sentinel bad addr", okGateway + "state:\n  backend: redis\n  redis:\n    sentinel:\n      master: m\n      addrs:\n        - s1:26379\n        - s2\n", okAgents, okProtocol, `gateway.yaml:12: state.redis.sentinel.addrs[1] "s2": want host:port`},
		{"redis cluster no addrs", okGateway + "state:\n  backend: redis\n  redis:\n    cluster: {}\n", okAgents, okProtocol, "gateway.yaml:8: state.redis.cluster.addrs: at least one host:port is required"},
		{"redis cluster db", okGateway + "state:\n  backend: redis\n  redis:\n    cluster: {addrs: [\"r:7000\"]}\n    db: 2\n", okAgents, okProtocol, "gateway.yaml:9: state.redis.db: a Cluster has only database 0"},
		{"redis tls on redis://", okGateway + "state:\n  backend: redis\n  redis:\n    url: redis://r:6379\n    tls: {}\n", okAgents, okProtocol, "gateway.yaml:9: state.redis.tls: the url must then be rediss://"},
		{"redis credentials twice", okGateway + "state:\n  backend: redis\n  redis:\n    url: redis://u:p@r:6379\n    password: p\n", okAgents, okProtocol, "gateway.yaml:8: state.redis.url: credentials in the URL and in username/password"},
		{"redis unknown key", okGateway + "state:\n  backend: redis\n  redis:\n    sentinel:\n      master_name: m\n", okAgents, okProtocol, `gateway.yaml:9: unknown key "master_name" in state.redis.sentinel`},
		{"tls half", okGateway + "tls:\n  cert_file: c.pem\n", okAgents, okProtocol, "gateway.yaml:5: tls: cert_file and key_file must be set together"},
		{"yaml syntax", okGateway + "listen: [\n", okAgents, okProtocol, "gateway.yaml:"},
		{"empty file", okGateway, "", okProtocol, "agents.yaml: file is empty"},
		{"unknown protocol key", okGateway, okAgents, "protocol:\n  timeouts:\n    responce: 5s\n", `protocol.yaml:3: unknown key "responce" in protocol.timeouts`},
		{"bad spiffe", okGateway, okAgents + "    spiffe_id: https://x\n", okProtocol, `agents.yaml:4: agent "a1": spiffe_id "https://x"`},
		{"apply_to unknown field", okGateway, okAgents, "protocol:\n  redaction:\n    apply_to: [message, secrets]\n", `protocol.yaml:3: protocol.redaction.apply_to: unknown SACP field "secrets"`},
		{"empty env in unit", okGateway, okAgents + "    rate_limit: ${RATE}\n", okProtocol, `agents.yaml:4: invalid rate ""`},
		{"reserved agent id", okGateway, "agents:\n  gateway:\n    token_sha256: \"" + strings.Repeat("c", 64) + "\"\n", okProtocol, `agents.yaml:2: agents: "gateway" is reserved`},
		{"markup in an agent id", okGateway, "agents:\n  \"<b>x</b>\":\n    token_sha256: \"" + strings.Repeat("c", 64) + "\"\n", okProtocol, `agents.yaml:2: agents: "<b>x</b>" is not a valid agent name`},
		{"empty role", okGateway, okAgents + "    roles: [initiator, \"\"]\n", okProtocol, `agents.yaml:4: agent "a1": roles: an empty role`},
		{"blank role", okGateway, okAgents + "    roles:\n      - \" \"\n", okProtocol, `agents.yaml:5: agent "a1": roles: an empty role`},
		{"duplicate role", okGateway, okAgents + "    roles:\n      - initiator\n      - validator\n      - initiator\n", okProtocol, `agents.yaml:7: agent "a1": roles: duplicate role "initiator"`},
		{"roles not a list", okGateway, okAgents + "    roles: initiator\n", okProtocol, `agents.yaml:4:`},
		{"commit delay too long", okGateway + "audit:\n  commit_delay: 2s\n", okAgents, okProtocol, `gateway.yaml:6: audit.commit_delay 2s: want between 0s and 1s`},
		{"bad messaging network", okGateway + "messaging:\n  allowed_networks: [10.0.0.0/33]\n", okAgents, okProtocol, `gateway.yaml:6: messaging.allowed_networks: "10.0.0.0/33" is not a CIDR`},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			_, err := loadFiles(t, tc.gw, tc.ag, tc.pr, nil)
			if err == nil {
				t.Fatalf("loaded; want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("problems:\n%v\nwant one containing %q", err, tc.want)
			}
		})
	}
}

// TestAgentRoles: the roles an agent declares are loaded as given.
func TestAgentRoles(t *testing.T) {
	cfg, err := loadFiles(t, okGateway, okAgents+"    roles: [initiator, validator]\n", okProtocol, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Agents["a1"].Roles; !slices.Equal(got, []string{"initiator", "validator"}) {
		t.Errorf("roles = %q", got)
	}
}

func TestEnvExpansion(t *testing.T) {
	gw := okGateway + "  - name: o\n    type: openai\n    base_url: ${BASE:-https://api.openai.com/v1}\n    api_key: ${KEY}\n    models: [gpt-4o]\n"
	cfg, err := loadFiles(t, gw, okAgents+"    rate_limit: ${RATE}\n", okProtocol, map[string]string{"KEY": "sk-1: {not yaml}", "RATE": "5/minute"})
	if err != nil {
		t.Fatal(err)
	}
	u := cfg.Gateway.Upstreams[1]
	if u.BaseURL != "https://api.openai.com/v1" || u.APIKey != "sk-1: {not yaml}" {
		t.Errorf("expanded upstream = %+v", u)
	}
	if cfg.Agents["a1"].RateLimit != (Rate{N: 5, Period: time.Minute}) {
		t.Errorf("rate = %v", cfg.Agents["a1"].RateLimit)
	}
}

func TestDefaults(t *testing.T) {
	cfg, err := loadFiles(t, okGateway, okAgents, okProtocol, map[string]string{"POD_NAME": "gw-0"})
	if err != nil {
		t.Fatal(err)
	}
	g, a, p := cfg.Gateway, cfg.Agents["a1"], cfg.Protocol
	checks := map[string]bool{
		"listen":        g.Listen == ":8080",
		"chain":         g.Audit.Chain == "gw-0",
		"fail mode":     g.Audit.FailMode == "closed",
		"backend":       g.State.Backend == "memory",
		"max size":      a.MaxRequestSize == 1<<20,
		"format":        a.ResponseFormat == "none",
		"timeout":       p.Timeouts.Response.D() == 10*time.Second,
		"detectors":     len(p.Redaction.Detectors) == 8,
		"replacement":   p.Redaction.Replacement == "[REDACTED:{detector}]",
		"reask":         p.SACP.ReaskEnabled(),
		"retries":       g.Upstreams[0].Retries() == 2,
		"tls min":       g.TLS.MinVersion == "1.3",
		"policy dir":    g.Policy.Dir == filepath.Join(cfg.Dir, "rego") && g.Policy.DirDefaulted,
		"audit dir":     g.Audit.Dir == filepath.Join(cfg.Dir, "data", "audit"),
		"commit delay":  g.Audit.CommitDelay != nil && *g.Audit.CommitDelay == Duration(time.Millisecond),
		"catalogue dir": g.Approval.CatalogueDir == filepath.Join(cfg.Dir, "specs"),
		"no rate limit": a.RateLimit.IsZero(),
		"strict":        p.Compliance.StrictMode && p.Compliance.RequireRationale && p.Compliance.EnforceReferences && !p.Compliance.AllowDeviations,
	}
	for name, ok := range checks {
		if !ok {
			t.Errorf("default %s not applied: %+v", name, cfg)
		}
	}
}

// TestRegistryAndMessagingProblems: registry.yaml, the agents' compact SACP
// registry fields and their message rules are checked at load, every problem at
// once.
func TestRegistryAndMessagingProblems(t *testing.T) {
	_, err := Load("testdata/a2a", Options{LookupEnv: noEnv})
	if err == nil {
		t.Fatal("loaded a broken registry")
	}
	want, _ := os.ReadFile("testdata/a2a/want.txt")
	if got := err.Error() + "\n"; got != string(want) {
		t.Errorf("problems:\n%s\nwant:\n%s", got, want)
	}
}

// TestRegistryLibraryRefusalIsAConfigError: what the compact library
// refuses (a reserved verb name) is reported by config check, not at
// startup.
func TestRegistryLibraryRefusalIsAConfigError(t *testing.T) {
	_, err := Load("testdata/reserved", Options{LookupEnv: noEnv})
	if err == nil || !strings.Contains(err.Error(), "testdata/reserved/registry.yaml:") || !strings.Contains(err.Error(), "define") {
		t.Fatalf("got %v", err)
	}
}

// TestWorkflowsFile: workflows.yaml is optional, its problems come with
// the file and line, and it is checked against the agents.
func TestWorkflowsFile(t *testing.T) {
	cases := []struct {
		name, workflows string
		want            []string // "line: substring"; none: loads
		loaded          int      // the workflows that load
	}{
		{name: "absent"},
		// An A2A agent's step is a message: no protocol, no model.
		{name: "a node of an A2A agent", workflows: "workflows:\n  w:\n    callers: [claude-3]\n    start: a\n    nodes:\n      a:\n        agent: helper\n        input: hi\n",
			loaded: 1},
		{name: "a node of an agent without the protocol", workflows: "workflows:\n  w:\n    callers: [claude-3]\n    start: a\n    nodes:\n      a:\n        agent: copilot-2\n        input: hi\n",
			want: []string{"7: "}},
		{name: "an unknown caller", workflows: "workflows:\n  w:\n    callers: [nobody]\n    start: a\n    nodes:\n      a:\n        agent: claude-3\n        input: hi\n",
			want: []string{"3: "}},
		{name: "a node whose model cannot be known", workflows: "workflows:\n  w:\n    callers: [claude-3]\n    start: a\n    nodes:\n      a:\n        agent: gemini-pro\n        input: hi\n",
			want: []string{"6: "}},
		{name: "a step_limit that is not a rate", workflows: "step_limit: 5/fortnight\nworkflows: {}\n", want: []string{"1: "}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range []string{GatewayFile, AgentsFile, ProtocolFile, RegistryFile} {
				b, err := os.ReadFile(filepath.Join(shippedDir, f))
				if err != nil {
					t.Fatal(err)
				}
				if f == AgentsFile {
					// gemini-pro speaks the protocol here but names no model.
					b = []byte(strings.Replace(string(b), "  gemini-pro:\n", "  gemini-pro:\n    response_format: json_standard\n", 1) +
						"  helper:\n    type: worker\n    token_sha256: \"" + strings.Repeat("ab", 32) + "\"\n    a2a: {url: \"https://helper.internal:9000\"}\n")
				}
				if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Symlink(filepath.Join(mustAbs(t, shippedDir), "schemas"), filepath.Join(dir, "schemas")); err != nil {
				t.Fatal(err)
			}
			if err := os.Symlink(filepath.Join(mustAbs(t, shippedDir), "specs"), filepath.Join(dir, "specs")); err != nil {
				t.Fatal(err)
			}
			if c.workflows != "" {
				if err := os.WriteFile(filepath.Join(dir, WorkflowsFile), []byte(c.workflows), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cfg, err := Load(dir, Options{LookupEnv: noEnv})
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("load: %v", err)
				}
				if len(cfg.Workflows.Names()) != c.loaded {
					t.Errorf("workflows %v, want %d", cfg.Workflows.Names(), c.loaded)
				}
				return
			}
			var ps Problems
			if !errors.As(err, &ps) {
				t.Fatalf("load: %v, want problems", err)
			}
			for _, w := range c.want {
				line, _ := strconv.Atoi(strings.TrimSuffix(strings.SplitN(w, ":", 2)[0], ":"))
				found := false
				for _, p := range ps {
					if strings.HasSuffix(p.File, WorkflowsFile) && p.Line == line {
						found = true
					}
				}
				if !found {
					t.Errorf("no problem at %s:%d in %v", WorkflowsFile, line, ps)
				}
			}
		})
	}
}

func mustAbs(t *testing.T, p string) string {
	t.Helper()
	a, err := filepath.Abs(p)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

// shippedDir is the configuration directory the repository ships: data
// only, beside the code that reads it.
const shippedDir = "../../config"

// TestSectionDurationDefaults: an unset duration of the http and
// messaging sections takes its documented default, and one that is set
// stays as written.
func TestSectionDurationDefaults(t *testing.T) {
	gw := okGateway + "http:\n  idle_timeout: 30s\nmessaging:\n  max_timeout: 2m\n"
	cfg, err := loadFiles(t, gw, okAgents, okProtocol, nil)
	if err != nil {
		t.Fatal(err)
	}
	h, m := cfg.Gateway.HTTP, cfg.Gateway.Messaging
	for _, c := range []struct {
		name      string
		got, want time.Duration
	}{
		{"http.read_header_timeout", h.ReadHeaderTimeout.D(), 5 * time.Second},
		{"http.body_idle_timeout", h.BodyIdleTimeout.D(), 15 * time.Second},
		{"http.write_idle_timeout", h.WriteIdleTimeout.D(), time.Minute},
		{"http.idle_timeout", h.IdleTimeout.D(), 30 * time.Second},
		{"http.unauthenticated.audit_window", h.Unauthenticated.AuditWindow.D(), time.Minute},
		{"messaging.timeout", m.Timeout.D(), 10 * time.Second},
		{"messaging.max_timeout", m.MaxTimeout.D(), 2 * time.Minute},
		{"messaging.retry_backoff", m.RetryBackoff.D(), 200 * time.Millisecond},
		{"messaging.history_retention", m.HistoryRetention.D(), 7 * 24 * time.Hour},
		{"messaging.max_clock_skew", m.MaxClockSkew.D(), 5 * time.Minute},
	} {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}
