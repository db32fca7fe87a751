package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"net/textproto"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sacpgw/gateway/upstream"
	"github.com/sacpgw/gateway/workflow/definition"

	"github.com/sacpgw/gateway/compact"
	"github.com/sacpgw/gateway/internal/confkit"
	"github.com/sacpgw/gateway/internal/names"
	"github.com/sacpgw/gateway/internal/pricing"
	"github.com/sacpgw/gateway/internal/protocol"
	"github.com/sacpgw/gateway/internal/roster"
)

// File names inside the config directory.
const (
	GatewayFile  = "gateway.yaml"
	AgentsFile   = "agents.yaml"
	ProtocolFile = "protocol.yaml"
	// RegistryFile is optional: without it the verb and tool library is
	// empty and compact SACP plans name no known verb.
	RegistryFile = "registry.yaml"
	// WorkflowsFile is optional: the workflow definitions
	// (docs/workflows.md), read by workflow/definition.
	WorkflowsFile = "workflows.yaml"
)

// Problem is one configuration error, located in a file.
type Problem struct {
	File string
	Line int
	Msg  string
}

func (p Problem) String() string {
	if p.Line > 0 {
		return fmt.Sprintf("%s:%d: %s", p.File, p.Line, p.Msg)
	}
	return fmt.Sprintf("%s: %s", p.File, p.Msg)
}

// Problems is every error found while loading; it is returned as the error of
// Load so that an operator fixes them all in one pass.
type Problems []Problem

func (ps Problems) Error() string {
	lines := make([]string, len(ps))
	for i, p := range ps {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}

// Options change how Load reads its inputs; the zero value uses the process
// environment.
type Options struct {
	// LookupEnv resolves ${VAR}. Nil: os.LookupEnv.
	LookupEnv func(string) (string, bool)
}

// Load reads and validates dir/gateway.yaml, dir/agents.yaml and
// dir/protocol.yaml. On any problem it returns a nil Config and Problems.
func Load(dir string, opts ...Options) (*Config, error) {
	cfg, _, err := load(dir, opts...)
	return cfg, err
}

// load is Load, also returning the loader: its parsed trees say where each
// value came from (Explain).
func load(dir string, opts ...Options) (*Config, *loader, error) {
	var o Options
	if len(opts) > 0 {
		o = opts[0]
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	base, err := filepath.Abs(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("config dir %s: %w", dir, err)
	}
	l := &loader{dir: dir, base: base, env: o.LookupEnv, roots: map[string]*yaml.Node{}, envRefs: map[*yaml.Node]string{}}
	cfg := &Config{Dir: dir}
	var agentsDoc struct {
		Agents map[string]*roster.Agent `yaml:"agents"`
	}
	var protocolDoc struct {
		Protocol protocol.Config `yaml:"protocol"`
	}
	var registryDoc struct {
		Registry Registry `yaml:"registry"`
	}
	gw := l.decode(GatewayFile, &cfg.Gateway)
	ag := l.decode(AgentsFile, &agentsDoc)
	pr := l.decode(ProtocolFile, &protocolDoc)
	var rg *yaml.Node
	_, err = os.Stat(filepath.Join(dir, RegistryFile))
	hasRegistry := err == nil
	if hasRegistry {
		rg = l.decode(RegistryFile, &registryDoc)
	}
	cfg.Agents = agentsDoc.Agents
	cfg.Protocol = protocolDoc.Protocol
	cfg.Registry = registryDoc.Registry
	if gw != nil {
		l.gateway(gw, &cfg.Gateway)
	}
	if ag != nil {
		roster.Check(l.section(AgentsFile, ag, "agents"), cfg.Agents)
		if gw != nil {
			l.unroutedModels(ag, cfg.Agents, cfg.Gateway.Upstreams)
		}
	}
	if pr != nil {
		cfg.Protocol.Check(l.section(ProtocolFile, pr, "protocol"))
	}
	verbs, tools := l.registry(rg, &cfg.Registry)
	if hasRegistry && rg == nil {
		// registry.yaml did not parse: its problems are reported, and
		// every agent's verb and tool would be reported missing too.
		verbs, tools = nil, nil
	}
	l.registryEmbeddings(rg, &cfg.Registry, cfg.Gateway.Upstreams)
	if cfg.Registry.Spawn.TTL == 0 {
		cfg.Registry.Spawn.TTL = Duration(7 * 24 * time.Hour)
	}
	if cfg.Registry.Spawn.TTL < 0 {
		l.add(RegistryFile, lineOf(rg, "registry", "spawn", "ttl"), "registry.spawn.ttl: must be positive")
	}
	if ag != nil {
		l.agentRegistry(ag, cfg.Agents, verbs, tools)
		if gw != nil {
			l.agentMCP(ag, cfg.Agents, cfg.Gateway.MCP)
		}
	}
	// Without a parsed agents.yaml, every workflow's agents would be
	// reported missing: its own problems say what to fix.
	cfg.Workflows = l.workflows(cfg.Agents, ag != nil)
	if len(l.problems) > 0 {
		sort.SliceStable(l.problems, func(i, j int) bool {
			a, b := l.problems[i], l.problems[j]
			if a.File != b.File {
				return a.File < b.File
			}
			return a.Line < b.Line
		})
		return nil, l, l.problems
	}
	return cfg, l, nil
}

type loader struct {
	dir string
	// base is dir made absolute: the anchor of relative paths, so that
	// they mean the same if the process changes directory later.
	base     string
	env      func(string) (string, bool)
	problems Problems
	// roots are the files' parsed trees, by file name, and envRefs the
	// scalars that named the environment (${VAR}), with their text as
	// written: Explain's sources.
	roots   map[string]*yaml.Node
	envRefs map[*yaml.Node]string
}

// workflows reads the optional workflows.yaml against the agents: every
// problem the definitions have, plus a node whose model cannot be known.
// workflows parses workflows.yaml; its agents are checked against agents
// when agentsKnown (agents.yaml parsed).
func (l *loader) workflows(agents map[string]*roster.Agent, agentsKnown bool) *definition.Set {
	raw, err := os.ReadFile(filepath.Join(l.dir, WorkflowsFile))
	if errors.Is(err, fs.ErrNotExist) {
		return &definition.Set{}
	}
	if err != nil {
		l.add(WorkflowsFile, 0, "cannot read: %v", errors.Unwrap(err))
		return &definition.Set{}
	}
	set, err := definition.Parse(raw, func(id string) (bool, bool) {
		if !agentsKnown {
			return true, true
		}
		a, ok := agents[id]
		return ok, ok && a.StandardProtocol()
	})
	var probs definition.Problems
	if errors.As(err, &probs) {
		for _, p := range probs {
			l.add(WorkflowsFile, p.Line, "%s", p.Msg)
		}
		return &definition.Set{}
	}
	if err != nil {
		l.add(WorkflowsFile, 0, "%v", err)
		return &definition.Set{}
	}
	if t := set.StepLimit.Text; t != "" {
		r, err := confkit.ParseRate(t)
		if err != nil {
			l.add(WorkflowsFile, set.StepLimit.Line, "step_limit: %v", err)
		}
		set.StepLimit.N, set.StepLimit.Period = r.N, r.Period
	}
	for _, name := range set.Names() {
		wf := set.Get(name)
		for _, n := range wf.NodeOrder {
			if !agentsKnown {
				break
			}
			node := wf.Nodes[n]
			if node.Model == "" {
				// The default is filled in here, where the agents are known.
				if node.Model = agents[node.Agent].DefaultModel(); node.Model == "" {
					l.add(WorkflowsFile, node.Line, "workflow %s, node %s: set model: agent %s lists no model by name (only globs or none)", name, n, node.Agent)
				}
			}
		}
	}
	return set
}

func (l *loader) add(file string, line int, format string, args ...any) {
	l.problems = append(l.problems, Problem{File: filepath.Join(l.dir, file), Line: line, Msg: fmt.Sprintf(format, args...)})
}

// decode reads one file into out, recording every syntax, key and type
// problem. It returns the parsed tree for line lookups, or nil when the file
// could not be read or parsed at all.
func (l *loader) decode(file string, out any) *yaml.Node {
	raw, err := os.ReadFile(filepath.Join(l.dir, file))
	if err != nil {
		l.add(file, 0, "cannot read: %v", errors.Unwrap(err))
		return nil
	}
	var root yaml.Node
	if err := yaml.Unmarshal(raw, &root); err != nil {
		for _, m := range splitYAMLError(err) {
			line, _ := strconv.Atoi(m[0])
			l.add(file, line, "%s", m[1])
		}
		return nil
	}
	if root.Kind == 0 {
		l.add(file, 0, "file is empty")
		return nil
	}
	noteEnvRefs(&root, l.envRefs)
	expandEnv(&root, l.env)
	l.roots[file] = &root
	checkKeys(&root, reflectTypeOf(out), "", func(line int, msg string) { l.add(file, line, "%s", msg) })
	if err := root.Decode(out); err != nil {
		for _, m := range splitYAMLError(err) {
			line, _ := strconv.Atoi(m[0])
			l.add(file, line, "%s", m[1])
		}
	}
	return &root
}

func (l *loader) gateway(n *yaml.Node, g *Gateway) {
	const f = GatewayFile
	at := func(p ...string) int { return lineOf(n, p...) }
	g.Policy.Check(l.section(f, n, "policy"))
	if g.State.Dir == "" {
		g.State.Dir = "data/state"
	}
	for _, p := range []*string{&g.TLS.CertFile, &g.TLS.KeyFile, &g.TLS.ClientCAFile,
		&g.State.Dir, &g.Messaging.TLS.CAFile, &g.Messaging.TLS.CertFile, &g.Messaging.TLS.KeyFile} {
		l.resolve(p)
	}
	upstream.Check(l.section(f, n, "upstreams"), g.Upstreams)
	pricing.Check(l.section(f, n, "pricing"), g.Pricing)
	if g.Responses.StoreTTL == 0 {
		g.Responses.StoreTTL = Duration(24 * time.Hour)
	}
	if g.Responses.MaxStoredSize == 0 {
		g.Responses.MaxStoredSize = 1 << 20
	}
	if g.Responses.StoreTTL < 0 || g.Responses.MaxStoredSize < 0 {
		l.add(f, at("responses"), "responses: store_ttl and max_stored_size must be positive")
	}
	if g.HealthListen != "" {
		if _, _, err := net.SplitHostPort(g.HealthListen); err != nil {
			l.add(f, at("health_listen"), "health_listen %q: want host:port (e.g. :8081): %v", g.HealthListen, err)
		}
	}
	if g.Listen == "" {
		g.Listen = ":8080"
	}
	if g.ShutdownTimeout == 0 {
		g.ShutdownTimeout = Duration(30 * time.Second)
	}
	if g.Log.Level == "" {
		g.Log.Level = "info"
	}
	logLevels := []string{"debug", "info", "warn", "error"}
	if !confkit.OneOf(g.Log.Level, logLevels...) {
		l.add(f, at("log", "level"), "log.level %q: want debug, info, warn or error%s", g.Log.Level, confkit.DidYouMean(g.Log.Level, logLevels))
	}
	if g.Log.Format == "" {
		g.Log.Format = "json"
	}
	if !confkit.OneOf(g.Log.Format, "json", "text") {
		l.add(f, at("log", "format"), "log.format %q: want json or text%s", g.Log.Format, confkit.DidYouMean(g.Log.Format, []string{"json", "text"}))
	}
	if g.Admin.TokenSHA256 != "" {
		if _, err := roster.ParseHash(g.Admin.TokenSHA256); err != nil {
			l.add(f, at("admin", "token_sha256"), "admin.token_sha256: %v", err)
		}
	}
	names := map[string]bool{}
	for i, r := range g.Admin.Reviewers {
		idx := strconv.Itoa(i)
		if r.Name == "" {
			l.add(f, at("admin", "reviewers", idx), "admin.reviewers[%d]: name is required", i)
		} else if names[r.Name] {
			l.add(f, at("admin", "reviewers", idx, "name"), "admin.reviewers: duplicate reviewer %q", r.Name)
		}
		names[r.Name] = true
		if _, err := roster.ParseHash(r.TokenSHA256); err != nil {
			l.add(f, at("admin", "reviewers", idx, "token_sha256"), "admin.reviewers[%d].token_sha256: %v", i, err)
		}
	}
	if (g.TLS.CertFile == "") != (g.TLS.KeyFile == "") {
		l.add(f, at("tls"), "tls: cert_file and key_file must be set together")
	}
	if g.TLS.ClientCAFile != "" && g.TLS.CertFile == "" {
		l.add(f, at("tls", "client_ca_file"), "tls.client_ca_file needs cert_file and key_file (mTLS requires TLS)")
	}
	l.fileExists(f, at("tls", "cert_file"), "tls.cert_file", g.TLS.CertFile)
	l.fileExists(f, at("tls", "key_file"), "tls.key_file", g.TLS.KeyFile)
	l.fileExists(f, at("tls", "client_ca_file"), "tls.client_ca_file", g.TLS.ClientCAFile)
	if g.TLS.MinVersion == "" {
		g.TLS.MinVersion = "1.3"
	}
	if !confkit.OneOf(g.TLS.MinVersion, "1.2", "1.3") {
		l.add(f, at("tls", "min_version"), "tls.min_version %q: want 1.2 or 1.3%s", g.TLS.MinVersion, confkit.DidYouMean(g.TLS.MinVersion, []string{"1.2", "1.3"}))
	}
	if g.Approval.CatalogueDir == "" {
		// The default may be absent (an empty catalogue); a configured one must exist.
		g.Approval.CatalogueDir = filepath.Join(l.base, "specs")
	} else {
		l.resolve(&g.Approval.CatalogueDir)
		l.fileExists(f, at("approval", "catalogue_dir"), "approval.catalogue_dir", g.Approval.CatalogueDir)
	}
	if g.Approval.RateLimit.IsZero() {
		g.Approval.RateLimit = Rate{N: 60, Period: time.Minute}
	}
	for name, u := range map[string]string{"base_url": g.Approval.BaseURL, "webhook": g.Approval.Webhook} {
		if u == "" {
			continue
		}
		if pu, err := url.Parse(u); err != nil || (pu.Scheme != "http" && pu.Scheme != "https") || pu.Host == "" {
			l.add(f, at("approval", name), "approval.%s %q: want an http(s) URL", name, u)
		}
	}
	g.Tracing.Check(l.section(f, n, "tracing"))
	g.Audit.Check(l.section(f, n, "audit"))
	if g.State.Backend == "" {
		g.State.Backend = "memory"
	}
	if !confkit.OneOf(g.State.Backend, "memory", "redis") {
		l.add(f, at("state", "backend"), "state.backend %q: want memory or redis%s", g.State.Backend, confkit.DidYouMean(g.State.Backend, []string{"memory", "redis"}))
	}
	if g.State.Backend == "redis" && g.State.RedisURL == "" {
		l.add(f, at("state", "redis_url"), "state.redis_url is required with backend redis (is REDIS_URL set?)")
	}
	if g.State.OnFailure == "" {
		g.State.OnFailure = "local"
	}
	if !confkit.OneOf(g.State.OnFailure, "closed", "local") {
		l.add(f, at("state", "on_failure"), "state.on_failure %q: want closed or local%s", g.State.OnFailure, confkit.DidYouMean(g.State.OnFailure, []string{"closed", "local"}))
	}
	if g.State.Timeout == 0 {
		g.State.Timeout = Duration(50 * time.Millisecond)
	}
	if g.State.Timeout < 0 {
		l.add(f, at("state", "timeout"), "state.timeout: must be positive")
	}
	l.messaging(n, &g.Messaging)
	l.http(n, &g.HTTP)
	l.mcp(n, &g.MCP)
}

func (l *loader) http(n *yaml.Node, h *HTTP) {
	const f = GatewayFile
	at := func(p ...string) int { return lineOf(n, append([]string{"http"}, p...)...) }
	for _, d := range []struct {
		key string
		v   *Duration
		def time.Duration
	}{
		{"read_header_timeout", &h.ReadHeaderTimeout, 5 * time.Second},
		{"body_idle_timeout", &h.BodyIdleTimeout, 15 * time.Second},
		{"write_idle_timeout", &h.WriteIdleTimeout, time.Minute},
		{"idle_timeout", &h.IdleTimeout, 2 * time.Minute},
		{"unauthenticated.audit_window", &h.Unauthenticated.AuditWindow, time.Minute},
	} {
		if *d.v == 0 {
			*d.v = Duration(d.def)
		}
		if *d.v < 0 {
			l.add(f, at(strings.Split(d.key, ".")...), "http.%s: must be positive", d.key)
		}
	}
	u := &h.Unauthenticated
	if u.ConnsPerSource == 0 {
		u.ConnsPerSource = 4096
	}
	if u.ConnsPerSource < 0 {
		l.add(f, at("unauthenticated", "conns_per_source"), "http.unauthenticated.conns_per_source: must be positive")
	}
	if u.RateLimit.IsZero() {
		u.RateLimit = Rate{N: 10, Period: time.Second}
	}
}

func (l *loader) messaging(n *yaml.Node, m *Messaging) {
	const f = GatewayFile
	at := func(p ...string) int { return lineOf(n, append([]string{"messaging"}, p...)...) }
	for _, d := range []struct {
		key string
		v   *Duration
		def time.Duration
	}{
		{"timeout", &m.Timeout, 10 * time.Second},
		{"max_timeout", &m.MaxTimeout, time.Minute},
		{"retry_backoff", &m.RetryBackoff, 200 * time.Millisecond},
		{"history_retention", &m.HistoryRetention, 7 * 24 * time.Hour},
		{"max_clock_skew", &m.MaxClockSkew, 5 * time.Minute},
	} {
		if *d.v == 0 {
			*d.v = Duration(d.def)
		}
		if *d.v < 0 {
			l.add(f, at(d.key), "messaging.%s: must be positive", d.key)
		}
	}
	if m.Timeout > m.MaxTimeout {
		l.add(f, at("timeout"), "messaging.timeout %s exceeds messaging.max_timeout %s", m.Timeout.D(), m.MaxTimeout.D())
	}
	if (m.TLS.CertFile == "") != (m.TLS.KeyFile == "") {
		l.add(f, at("tls"), "messaging.tls: cert_file and key_file go together")
	}
	l.fileExists(f, at("tls", "ca_file"), "messaging.tls.ca_file", m.TLS.CAFile)
	l.fileExists(f, at("tls", "cert_file"), "messaging.tls.cert_file", m.TLS.CertFile)
	l.fileExists(f, at("tls", "key_file"), "messaging.tls.key_file", m.TLS.KeyFile)
	if m.Workers == 0 {
		m.Workers = 4
	}
	if m.QueueCapacity == 0 {
		m.QueueCapacity = 10000
	}
	if m.Workers < 0 || m.Workers > 256 {
		l.add(f, at("workers"), "messaging.workers %d: want 1..256", m.Workers)
	}
	if m.QueueCapacity < 0 {
		l.add(f, at("queue_capacity"), "messaging.queue_capacity: must be positive")
	}
	m.AllowedPrefixes = nil
	for i, c := range m.AllowedNetworks {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			l.add(f, at("allowed_networks", strconv.Itoa(i)), "messaging.allowed_networks: %q is not a CIDR such as 10.0.0.0/8", c)
			continue
		}
		m.AllowedPrefixes = append(m.AllowedPrefixes, p.Masked())
	}
}

// mcpReservedHeaders are the headers the gateway itself sets on a request
// to an MCP server: a configured header may not replace them.
var mcpReservedHeaders = map[string]bool{"Accept": true, "Content-Type": true, "Content-Length": true, "Host": true,
	"Mcp-Session-Id": true, "Mcp-Protocol-Version": true, "Last-Event-Id": true, "Connection": true, "Transfer-Encoding": true}

// mcp checks gateway.yaml's mcp.servers and fills in their defaults.
func (l *loader) mcp(n *yaml.Node, m *MCP) {
	const f = GatewayFile
	seen := map[string]bool{}
	for i := range m.Servers {
		s := &m.Servers[i]
		idx := strconv.Itoa(i)
		at := func(p ...string) int { return lineOf(n, append([]string{"mcp", "servers", idx}, p...)...) }
		switch {
		case !mcpName(s.Name):
			l.add(f, at("name"), "mcp.servers[%d].name %q: want 1-64 of a-z, 0-9, '_' and '-' (it is the path /mcp/{name})", i, s.Name)
		case seen[s.Name]:
			l.add(f, at("name"), "mcp.servers: duplicate server %q", s.Name)
		}
		seen[s.Name] = true
		if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" {
			// Credentials in the URL would travel into logs with it:
			// they belong in headers.
			l.add(f, at("url"), "mcp.servers[%d].url: want an http(s) URL without credentials or fragment, such as https://files.internal/mcp", i)
		}
		if s.Timeout == 0 {
			s.Timeout = Duration(30 * time.Second)
		}
		if s.Timeout < 0 {
			l.add(f, at("timeout"), "mcp.servers[%d].timeout: must be positive", i)
		}
		for _, name := range sortedKeys(s.Headers) {
			// Neither the name nor the value is quoted back: a value
			// is a credential, and a name is as good as the line.
			if mcpReservedHeaders[textproto.CanonicalMIMEHeaderKey(name)] {
				l.add(f, at("headers", name), "mcp.servers[%d].headers: %s is set by the gateway itself", i, textproto.CanonicalMIMEHeaderKey(name))
			}
		}
		for _, tool := range sortedKeys(s.ToolLimits) {
			if tool == "" || s.ToolLimits[tool].IsZero() {
				l.add(f, at("tool_limits", tool), "mcp.servers[%d].tool_limits: want a tool name and a rate such as 10/hour", i)
			}
		}
	}
}

// mcpName is the rule for an MCP server's name: a path segment of
// /mcp/{name} that needs no escaping.
func mcpName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return true
}

// agentMCP checks the agents' mcp_tools against the configured servers.
func (l *loader) agentMCP(n *yaml.Node, agents map[string]*roster.Agent, m MCP) {
	const f = AgentsFile
	servers := make([]string, 0, len(m.Servers))
	for _, s := range m.Servers {
		servers = append(servers, s.Name)
	}
	for _, id := range sortedKeys(agents) {
		a := agents[id]
		for _, server := range sortedKeys(a.MCPTools) {
			at := func(p ...string) int { return lineOf(n, append([]string{"agents", id, "mcp_tools", server}, p...)...) }
			if !confkit.OneOf(server, servers...) {
				l.add(f, at(), "agent %q: mcp_tools: unknown MCP server %q (want a name of %s mcp.servers)%s", id, server, GatewayFile, confkit.DidYouMean(server, servers))
			}
			for i, g := range a.MCPTools[server] {
				if _, err := path.Match(g, ""); err != nil || g == "" {
					l.add(f, at(strconv.Itoa(i)), "agent %q: mcp_tools.%s: bad glob %q", id, server, g)
				}
			}
		}
	}
}

// UnmarshalYAML reads a mapping of header names to values. A name given
// twice (HTTP names ignore case) or that is not a header name, and a value
// that could split the header, are refused; the value is never quoted in
// the problem.
func (s *Secrets) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return confkit.ScalarError(n, errors.New("want a mapping of header names to values"))
	}
	out := make(Secrets, len(n.Content)/2)
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		canon := textproto.CanonicalMIMEHeaderKey(k.Value)
		switch {
		case k.Kind != yaml.ScalarNode || v.Kind != yaml.ScalarNode:
			return confkit.ScalarError(k, errors.New("want header names with text values"))
		case !headerName(k.Value):
			return confkit.ScalarError(k, fmt.Errorf("%q is not a header name", k.Value))
		case seen[canon]:
			return confkit.ScalarError(k, fmt.Errorf("header %s is given twice (names ignore case)", canon))
		case strings.ContainsAny(v.Value, "\r\n\x00"):
			return confkit.ScalarError(v, fmt.Errorf("the value of header %s holds a line break or NUL", canon))
		}
		seen[canon] = true
		out[k.Value] = v.Value
	}
	*s = out
	return nil
}

// headerName reports whether s is an HTTP field name (RFC 9110 token).
func headerName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}

// verbInputTypes are the types a verb input may declare ("name:type").
var verbInputTypes = []string{"string", "number", "integer", "boolean", "array", "object", "any"}

// registry checks registry.yaml (n is nil when the file is absent) and
// returns the known verb and tool names for the agents' checks.
func (l *loader) registry(n *yaml.Node, r *Registry) (verbs, tools map[string]bool) {
	const f = RegistryFile
	verbs, tools = map[string]bool{}, map[string]bool{}
	if n == nil {
		return verbs, tools
	}
	at := func(p ...string) int { return lineOf(n, append([]string{"registry"}, p...)...) }
	before := len(l.problems)
	for i, v := range r.Verbs {
		idx := strconv.Itoa(i)
		switch {
		case !names.Symbol(v.Name):
			l.add(f, at("verbs", idx, "name"), "registry.verbs[%d].name %q: want 1-64 letters, digits, '_', '-', '.' or ':'", i, v.Name)
		case verbs[v.Name]:
			l.add(f, at("verbs", idx, "name"), "registry: verb %q is defined twice", v.Name)
		}
		verbs[v.Name] = true
		for j, in := range v.Inputs {
			name, typ, typed := strings.Cut(in, ":")
			if name == "" || (typed && !confkit.OneOf(typ, verbInputTypes...)) {
				l.add(f, at("verbs", idx, "inputs", strconv.Itoa(j)), "registry: verb %q: input %q: want name or name:type with type one of %s%s", v.Name, in, strings.Join(verbInputTypes, ", "), confkit.DidYouMean(typ, verbInputTypes))
			}
		}
	}
	aliases := l.verbAliases(r, verbs, at)
	for i, t := range r.Tools {
		idx := strconv.Itoa(i)
		switch {
		case !names.Symbol(t.ID):
			l.add(f, at("tools", idx, "id"), "registry.tools[%d].id %q: want 1-64 letters, digits, '_', '-', '.' or ':'", i, t.ID)
		case tools[t.ID]:
			l.add(f, at("tools", idx, "id"), "registry: tool %q is defined twice", t.ID)
		}
		tools[t.ID] = true
		if len(t.SupportedVerbs) == 0 {
			l.add(f, at("tools", idx, "id"), "registry: tool %q: supported_verbs is required", t.ID)
		}
		for j, v := range t.SupportedVerbs {
			switch {
			case verbs[v]:
			case aliases[v] != "":
				l.add(f, at("tools", idx, "supported_verbs", strconv.Itoa(j)), "registry: tool %q names %q, an alias of verb %q: supported_verbs takes the verb's name", t.ID, v, aliases[v])
			default:
				l.add(f, at("tools", idx, "supported_verbs", strconv.Itoa(j)), "registry: tool %q names unknown verb %q%s", t.ID, v, confkit.DidYouMean(v, sortedKeys(verbs)))
			}
		}
	}
	if len(l.problems) == before {
		// The library the gateway builds from this file must accept it too
		// (reserved verb names and the like): config check says so now
		// rather than the server at startup.
		if _, err := compactLibrary(*r); err != nil {
			l.add(f, at(), "%v", err)
		}
	}
	return verbs, tools
}

func compactLibrary(r Registry) (*compact.Library, error) {
	verbs := make([]compact.Verb, 0, len(r.Verbs))
	for _, v := range r.Verbs {
		verbs = append(verbs, compact.Verb{Name: v.Name, Aliases: v.Aliases, Description: v.Description, Inputs: v.Inputs, Outputs: v.Outputs})
	}
	tools := make([]compact.Tool, 0, len(r.Tools))
	for _, t := range r.Tools {
		tools = append(tools, compact.Tool{ID: t.ID, Description: t.Description, Interface: t.Interface, SupportedVerbs: t.SupportedVerbs})
	}
	return compact.NewLibrary(verbs, tools)
}

// Library is the compact SACP verb and tool library of registry.yaml.
func (r Registry) Library() (*compact.Library, error) { return compactLibrary(r) }

// agentRegistry checks the verbs and tools the agents name against the
// registry (nil when registry.yaml did not parse).
func (l *loader) agentRegistry(n *yaml.Node, agents map[string]*roster.Agent, verbs, tools map[string]bool) {
	const f = AgentsFile
	for _, id := range sortedKeys(agents) {
		a := agents[id]
		at := func(p ...string) int { return lineOf(n, append([]string{"agents", id}, p...)...) }
		for i, v := range a.SupportedVerbs {
			if verbs != nil && !verbs[v] {
				l.add(f, at("supported_verbs", strconv.Itoa(i)), "agent %q: supported_verbs: verb %q is not in %s%s", id, v, RegistryFile, confkit.DidYouMean(v, sortedKeys(verbs)))
			}
		}
		for i, t := range a.SupportedTools {
			if tools != nil && !tools[t] {
				l.add(f, at("supported_tools", strconv.Itoa(i)), "agent %q: supported_tools: tool %q is not in %s%s", id, t, RegistryFile, confkit.DidYouMean(t, sortedKeys(tools)))
			}
		}
	}
}

// resolve makes a path of a config file absolute-or-anchored: a relative
// path is relative to the directory of the file that holds it (every
// config file sits in l.dir), never to the process's working directory;
// an absolute path stays as it is; empty means "not set". Defaults go
// through it too. Everything after the loader uses the paths as they are.
func (l *loader) resolve(p *string) {
	if *p == "" || filepath.IsAbs(*p) {
		return
	}
	*p = filepath.Join(l.base, *p)
}

// shown is how a path of a config file appears in a problem: joined to
// the config dir as given (so messages read like the operator's own
// command line), not made absolute.
func (l *loader) shown(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(l.dir, p)
}

func (l *loader) fileExists(file string, line int, field, p string) {
	if p == "" {
		return
	}
	if _, err := os.Stat(p); err != nil {
		l.add(file, line, "%s %s: %v", field, p, errors.Unwrap(err))
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
