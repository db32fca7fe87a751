package config

import (
	"errors"
	"fmt"
	"net/textproto"
	"net/url"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/sacpgw/gateway/internal/confkit"
	"github.com/sacpgw/gateway/internal/roster"
	"gopkg.in/yaml.v3"
)

// The sections of gateway.yaml that belong to the gateway as a whole
// rather than to one part: the log, and the operators' and reviewers'
// tokens, which every people's page reads.

func (lg *Log) check(r confkit.Reporter) {
	if lg.Level == "" {
		lg.Level = "info"
	}
	logLevels := []string{"debug", "info", "warn", "error"}
	if !confkit.OneOf(lg.Level, logLevels...) {
		r.Add(r.Line("level"), "log.level %q: want debug, info, warn or error%s", lg.Level, confkit.DidYouMean(lg.Level, logLevels))
	}
	if lg.Format == "" {
		lg.Format = "json"
	}
	if !confkit.OneOf(lg.Format, "json", "text") {
		r.Add(r.Line("format"), "log.format %q: want json or text%s", lg.Format, confkit.DidYouMean(lg.Format, []string{"json", "text"}))
	}
}

func (a Admin) check(r confkit.Reporter) {
	if a.TokenSHA256 != "" {
		if _, err := roster.ParseHash(a.TokenSHA256); err != nil {
			r.Add(r.Line("token_sha256"), "admin.token_sha256: %v", err)
		}
	}
	names := map[string]bool{}
	for i, rv := range a.Reviewers {
		idx := strconv.Itoa(i)
		if rv.Name == "" {
			r.Add(r.Line("reviewers", idx), "admin.reviewers[%d]: name is required", i)
		} else if names[rv.Name] {
			r.Add(r.Line("reviewers", idx, "name"), "admin.reviewers: duplicate reviewer %q", rv.Name)
		}
		names[rv.Name] = true
		if _, err := roster.ParseHash(rv.TokenSHA256); err != nil {
			r.Add(r.Line("reviewers", idx, "token_sha256"), "admin.reviewers[%d].token_sha256: %v", i, err)
		}
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
		switch {
		case (s.URL != "") && (s.Command != nil) || (s.URL != "" || s.Command != nil) && s.Servers != nil:
			l.add(f, at("name"), "mcp.servers[%d]: give one of url (a Streamable HTTP server), command (a stdio server) or servers (a virtual server)", i)
		case s.Servers != nil:
			l.mcpVirtual(at, i, s, m)
		case s.Command != nil:
			l.mcpStdio(at, i, s)
		default:
			l.mcpURL(at, i, s)
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
		if s.Hold < 0 || s.Hold.D() > maxHold {
			l.add(f, at("hold"), "mcp.servers[%d].hold: want a duration up to %s", i, maxHold)
		}
		for _, tool := range sortedKeys(s.ToolHold) {
			if h := s.ToolHold[tool]; tool == "" || h < 0 || h.D() > maxHold {
				l.add(f, at("tool_hold", tool), "mcp.servers[%d].tool_hold: want a tool name and a duration up to %s", i, maxHold)
			}
		}
		for _, tool := range sortedKeys(s.Pins) {
			if h := s.Pins[tool]; tool == "" || len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
				l.add(f, at("pins", tool), "mcp.servers[%d].pins: want a tool name and a SHA-256 in lowercase hex", i)
			}
		}
		for _, tool := range sortedKeys(s.ToolLimits) {
			if tool == "" || s.ToolLimits[tool].IsZero() {
				l.add(f, at("tool_limits", tool), "mcp.servers[%d].tool_limits: want a tool name and a rate such as 10/hour", i)
			}
		}
	}
}

// mcpURL checks a Streamable HTTP server.
func (l *loader) mcpURL(at func(...string) int, i int, s *MCPServer) {
	const f = GatewayFile
	if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" {
		// Credentials in the URL would travel into logs with it:
		// they belong in headers.
		l.add(f, at("url"), "mcp.servers[%d].url: want an http(s) URL without credentials or fragment, such as https://files.internal/mcp", i)
	}
	for _, k := range []struct {
		name string
		set  bool
	}{{"env", s.Env != nil}, {"dir", s.Dir != ""}, {"max_memory", s.MaxMemory != 0}} {
		if k.set {
			l.add(f, at(k.name), "mcp.servers[%d].%s: only a stdio server (command) has one", i, k.name)
		}
	}
}

// mcpVirtual checks a virtual server: servers that are configured and
// not virtual, each once, under prefixes none of which begins another
// (a tool's name must lead to one server).
func (l *loader) mcpVirtual(at func(...string) int, i int, s *MCPServer, m *MCP) {
	const f = GatewayFile
	if len(s.Servers) == 0 {
		l.add(f, at("servers"), "mcp.servers[%d].servers: want the names of the servers it combines", i)
	}
	var names []string
	real := map[string]bool{}
	for _, o := range m.Servers {
		if o.Servers == nil {
			names = append(names, o.Name)
			real[o.Name] = true
		}
	}
	seen := map[string]bool{}
	for j := range s.Servers {
		mb := &s.Servers[j]
		line := at("servers", strconv.Itoa(j))
		switch {
		case !real[mb.Name]:
			l.add(f, line, "mcp.servers[%d].servers: %q is not a configured server (a virtual one cannot be combined)%s", i, mb.Name, confkit.DidYouMean(mb.Name, names))
		case seen[mb.Name]:
			l.add(f, line, "mcp.servers[%d].servers: %q is given twice", i, mb.Name)
		}
		seen[mb.Name] = true
		if mb.Prefix == "" {
			mb.Prefix = mb.Name + "_"
		}
		if !toolPrefix(mb.Prefix) {
			l.add(f, line, "mcp.servers[%d].servers: prefix %q: want 1-32 of A-Z, a-z, 0-9, '_', '-' and '.'", i, mb.Prefix)
		}
	}
	for j, a := range s.Servers {
		for k, b := range s.Servers {
			if j != k && strings.HasPrefix(b.Prefix, a.Prefix) && (j < k || a.Prefix != b.Prefix) {
				l.add(f, at("servers", strconv.Itoa(k)), "mcp.servers[%d].servers: prefix %q begins with %q (of %s): a tool's name would not tell the server", i, b.Prefix, a.Prefix, a.Name)
			}
		}
	}
	for _, k := range []struct {
		name string
		set  bool
	}{{"headers", s.Headers != nil}, {"env", s.Env != nil}, {"dir", s.Dir != ""}, {"max_memory", s.MaxMemory != 0}, {"tool_limits", s.ToolLimits != nil},
		{"hold", s.Hold != 0}, {"tool_hold", s.ToolHold != nil}, {"pins", s.Pins != nil}} {
		if k.set {
			l.add(f, at(k.name), "mcp.servers[%d].%s: a virtual server has none (each of its servers has its own)", i, k.name)
		}
	}
}

// toolPrefix is the rule for a virtual server's prefix: characters of a
// tool name (MCP's recommended set).
func toolPrefix(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return true
}

// defaultStdioMemory bounds a stdio server's address space by default:
// generous, as runtimes such as Node reserve far more than they use.
const defaultStdioMemory = 4 << 30

// mcpStdio checks a stdio server: a program that is there, a directory
// that is one, no headers (there is no request to carry them).
func (l *loader) mcpStdio(at func(...string) int, i int, s *MCPServer) {
	const f = GatewayFile
	if len(s.Command) == 0 || s.Command[0] == "" {
		l.add(f, at("command"), "mcp.servers[%d].command: want the program and its arguments, such as [npx, -y, some-mcp-server]", i)
		return
	}
	if s.Dir != "" {
		if st, err := os.Stat(s.Dir); err != nil || !st.IsDir() {
			l.add(f, at("dir"), "mcp.servers[%d].dir: %q is not a directory", i, s.Dir)
		}
	}
	prog := s.Command[0]
	if strings.Contains(prog, "/") {
		if !filepath.IsAbs(prog) && s.Dir != "" {
			prog = filepath.Join(s.Dir, prog)
		}
		if st, err := os.Stat(prog); err != nil || st.IsDir() {
			l.add(f, at("command", "0"), "mcp.servers[%d].command: no program %q", i, s.Command[0])
		}
	} else if _, err := exec.LookPath(prog); err != nil {
		l.add(f, at("command", "0"), "mcp.servers[%d].command: no program %q in PATH", i, prog)
	}
	if len(s.Headers) > 0 {
		l.add(f, at("headers"), "mcp.servers[%d].headers: a stdio server takes its credentials in env", i)
	}
	if s.MaxMemory == 0 {
		s.MaxMemory = defaultStdioMemory
	}
}

// maxHold bounds how long a held call may wait for a person: a client
// holds a request open that long.
const maxHold = time.Hour

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
	virtual := map[string]bool{}
	for _, s := range m.Servers {
		if s.Servers != nil {
			virtual[s.Name] = true
			continue
		}
		servers = append(servers, s.Name)
	}
	for _, id := range sortedKeys(agents) {
		a := agents[id]
		for _, server := range sortedKeys(a.MCPTools) {
			at := func(p ...string) int { return lineOf(n, append([]string{"agents", id, "mcp_tools", server}, p...)...) }
			if virtual[server] {
				l.add(f, at(), "agent %q: mcp_tools: %q is a virtual server: name its servers, whose entries govern their tools there", id, server)
				continue
			}
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

// UnmarshalYAML reads a virtual server's member: a name, or {name, prefix}.
func (mb *MCPMember) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		mb.Name = n.Value
		return nil
	}
	type plain MCPMember
	return n.Decode((*plain)(mb))
}

// UnmarshalYAML reads a mapping of environment variable names (letters,
// digits and '_', not first a digit) to values without NUL; the value is
// never quoted in a problem.
func (e *Env) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return confkit.ScalarError(n, errors.New("want a mapping of variable names to values"))
	}
	out := make(Env, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch {
		case k.Kind != yaml.ScalarNode || v.Kind != yaml.ScalarNode:
			return confkit.ScalarError(k, errors.New("want variable names with text values"))
		case !envName(k.Value):
			return confkit.ScalarError(k, fmt.Errorf("%q is not a variable name (letters, digits and _)", k.Value))
		case out[k.Value] != "" || k.Value == "PATH":
			return confkit.ScalarError(k, fmt.Errorf("variable %s is given twice (PATH is the gateway's)", k.Value))
		case strings.ContainsRune(v.Value, 0):
			return confkit.ScalarError(v, fmt.Errorf("the value of %s holds a NUL", k.Value))
		}
		out[k.Value] = v.Value
	}
	*e = out
	return nil
}

func envName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
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
