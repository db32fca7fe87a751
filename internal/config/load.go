package config

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
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
	"github.com/sacpgw/gateway/internal/team"
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
	// TeamsFile is optional: the teams agents.yaml's team: names, with
	// the limits their agents share (internal/team).
	TeamsFile = "teams.yaml"
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
	cfg.Teams = l.teams(ag, cfg.Agents)
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
		return ok, ok && (a.StandardProtocol() || a.A2A != nil)
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
			// A registry-driven node's agent, and so its default model,
			// is known only when its step runs.
			// An A2A agent's step is a message, no model call.
			if a := agents[node.Agent]; node.Model == "" && node.Pick == nil && (a == nil || a.A2A == nil) {
				// The default is filled in here, where the agents are known.
				if node.Model = agents[node.Agent].DefaultModel(); node.Model == "" {
					l.add(WorkflowsFile, node.Line, "workflow %s, node %s: set model: agent %s lists no model by name (only globs or none)", name, n, node.Agent)
				}
			}
		}
	}
	return set
}

// teams reads the optional teams.yaml and checks every agent's team
// against it (ag is agents.yaml's tree, nil when it did not parse).
func (l *loader) teams(ag *yaml.Node, agents map[string]*roster.Agent) map[string]*team.Team {
	var doc team.File
	if _, err := os.Stat(filepath.Join(l.dir, TeamsFile)); err == nil {
		tn := l.decode(TeamsFile, &doc)
		if tn == nil {
			// Its own problems say what to fix; every agent's team would
			// be reported missing too.
			return nil
		}
		team.Check(l.section(TeamsFile, tn, "teams"), doc.Teams)
	}
	if ag != nil {
		r := l.section(AgentsFile, ag, "agents")
		for _, id := range roster.IDs(agents) {
			team.CheckMember(r, r.Line(id, "team"), id, agents[id].Team, doc.Teams)
		}
	}
	return doc.Teams
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
	l.policyBundle(at, &g.Policy)
	upstream.Check(l.section(f, n, "upstreams"), g.Upstreams)
	pricing.Check(l.section(f, n, "pricing"), g.Pricing)
	g.Responses.Check(l.section(f, n, "responses"))
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
	g.Log.check(l.section(f, n, "log"))
	g.Admin.check(l.section(f, n, "admin"))
	g.TLS.Check(l.section(f, n, "tls"))
	g.Approval.Check(l.section(f, n, "approval"))
	g.Tracing.Check(l.section(f, n, "tracing"))
	g.Audit.Check(l.section(f, n, "audit"))
	g.People.Check(l.section(f, n, "people"))
	if g.MCPClients != nil {
		g.MCPClients.Check(l.section(f, n, "mcp_clients"), g.Approval.BaseURL, g.People.OIDC != nil)
	}
	if o := g.Audit.OTLP; o != nil {
		l.resolve(&o.CAFile)
		l.fileExists(f, at("audit", "otlp", "ca_file"), "audit.otlp.ca_file", o.CAFile)
		for _, p := range o.Check() {
			l.add(f, at(append([]string{"audit", "otlp"}, p.Key...)...), "%s", p.Msg)
		}
	}
	if s := g.Audit.Ship; s != nil {
		for _, p := range s.Validate() {
			l.add(f, at(append([]string{"audit", "ship"}, p.Key...)...), "%s", p.Msg)
		}
	}
	g.State.Check(l.section(f, n, "state"))
	g.Messaging.Check(l.section(f, n, "messaging"))
	g.HTTP.Check(l.section(f, n, "http"))
	g.MCP.Check(l.section(f, n, "mcp"))
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
		l.registryName(at("verbs", idx, "name"), "verbs", i, "name", v.Name, verbs)
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
		l.registryName(at("tools", idx, "id"), "tools", i, "id", t.ID, tools)
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

// registryName checks the name of registry.yaml's list[i] (a verb's name,
// a tool's id), at line: a symbol, and not one seen before in the list;
// it adds the name to seen.
func (l *loader) registryName(line int, list string, i int, field, name string, seen map[string]bool) {
	switch {
	case !names.Symbol(name):
		l.add(RegistryFile, line, "registry.%s[%d].%s %q: want 1-64 letters, digits, '_', '-', '.' or ':'", list, i, field, name)
	case seen[name]:
		l.add(RegistryFile, line, "registry: %s %q is defined twice", strings.TrimSuffix(list, "s"), name)
	}
	seen[name] = true
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
