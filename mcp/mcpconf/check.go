package mcpconf

import (
	"maps"
	"net/textproto"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/sacpgw/gateway/internal/confkit"
)

// reservedHeaders are the headers the gateway itself sets on a request to
// an MCP server: a configured header may not replace them.
var reservedHeaders = map[string]bool{"Accept": true, "Content-Type": true, "Content-Length": true, "Host": true,
	"Mcp-Session-Id": true, "Mcp-Protocol-Version": true, "Last-Event-Id": true, "Connection": true, "Transfer-Encoding": true}

// Check checks the mcp section (r is the loader's view of it) and fills in
// the servers' defaults.
func (m *Settings) Check(r confkit.Reporter) {
	seen := map[string]bool{}
	for i := range m.Servers {
		s := &m.Servers[i]
		sc := check{r: confkit.Sub(r, "servers", strconv.Itoa(i)), i: i}
		switch {
		case !serverName(s.Name):
			sc.add("name", "mcp.servers[%d].name %q: want 1-64 of a-z, 0-9, '_' and '-' (it is the path /mcp/{name})", i, s.Name)
		case seen[s.Name]:
			sc.add("name", "mcp.servers: duplicate server %q", s.Name)
		}
		seen[s.Name] = true
		switch {
		case (s.URL != "") && (s.Command != nil) || (s.URL != "" || s.Command != nil) && s.Servers != nil:
			sc.add("name", "mcp.servers[%d]: give one of url (a Streamable HTTP server), command (a stdio server) or servers (a virtual server)", i)
		case s.Virtual():
			sc.virtual(s, m)
		case s.Command != nil:
			sc.stdio(s)
		default:
			sc.url(s)
		}
		sc.common(s)
		sc.oauth(s)
	}
	m.checkKeys(r)
}

// check is the checking of one server, servers[i] of the section.
type check struct {
	r confkit.Reporter
	i int
}

// add reports a problem at the server's key at path.
func (c check) add(path, format string, args ...any) { c.r.Add(c.r.Line(path), format, args...) }

// common checks what every kind of server may have.
func (c check) common(s *Server) {
	i := c.i
	if s.Timeout == 0 {
		s.Timeout = defaultTimeout
	}
	if s.Timeout < 0 {
		c.add("timeout", "mcp.servers[%d].timeout: must be positive", i)
	}
	for _, name := range slices.Sorted(maps.Keys(s.Headers)) {
		// Neither the name nor the value is quoted back: a value
		// is a credential, and a name is as good as the line.
		if reservedHeaders[textproto.CanonicalMIMEHeaderKey(name)] {
			c.r.Add(c.r.Line("headers", name), "mcp.servers[%d].headers: %s is set by the gateway itself", i, textproto.CanonicalMIMEHeaderKey(name))
		}
	}
	if s.Hold < 0 || s.Hold.D() > maxHold {
		c.add("hold", "mcp.servers[%d].hold: want a duration up to %s", i, maxHold)
	}
	for _, tool := range slices.Sorted(maps.Keys(s.ToolHold)) {
		if h := s.ToolHold[tool]; tool == "" || h < 0 || h.D() > maxHold {
			c.r.Add(c.r.Line("tool_hold", tool), "mcp.servers[%d].tool_hold: want a tool name and a duration up to %s", i, maxHold)
		}
	}
	for _, tool := range slices.Sorted(maps.Keys(s.Pins)) {
		if h := s.Pins[tool]; tool == "" || len(h) != 64 || strings.Trim(h, "0123456789abcdef") != "" {
			c.r.Add(c.r.Line("pins", tool), "mcp.servers[%d].pins: want a tool name and a SHA-256 in lowercase hex", i)
		}
	}
	for _, tool := range slices.Sorted(maps.Keys(s.ToolLimits)) {
		if tool == "" || s.ToolLimits[tool].IsZero() {
			c.r.Add(c.r.Line("tool_limits", tool), "mcp.servers[%d].tool_limits: want a tool name and a rate such as 10/hour", i)
		}
	}
}

// notSet reports each key of keys that is set, with why it may not be.
func (c check) notSet(why string, keys ...key) {
	for _, k := range keys {
		if k.set {
			c.add(k.name, "mcp.servers[%d].%s: %s", c.i, k.name, why)
		}
	}
}

type key struct {
	name string
	set  bool
}

// url checks a Streamable HTTP server.
func (c check) url(s *Server) {
	if u, err := url.Parse(s.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.Fragment != "" {
		// Credentials in the URL would travel into logs with it:
		// they belong in headers.
		c.add("url", "mcp.servers[%d].url: want an http(s) URL without credentials or fragment, such as https://files.internal/mcp", c.i)
	}
	c.notSet("only a stdio server (command) has one", key{"env", s.Env != nil}, key{"dir", s.Dir != ""}, key{"max_memory", s.MaxMemory != 0})
}

// virtual checks a virtual server: servers that are configured and not
// virtual, each once, under prefixes none of which begins another (a
// tool's name must lead to one server).
func (c check) virtual(s *Server, m *Settings) {
	i := c.i
	if len(s.Servers) == 0 {
		c.add("servers", "mcp.servers[%d].servers: want the names of the servers it combines", i)
	}
	names, _ := m.Names()
	seen := map[string]bool{}
	for j := range s.Servers {
		mb := &s.Servers[j]
		line := c.r.Line("servers", strconv.Itoa(j))
		switch {
		case !slices.Contains(names, mb.Name):
			c.r.Add(line, "mcp.servers[%d].servers: %q is not a configured server (a virtual one cannot be combined)%s", i, mb.Name, confkit.DidYouMean(mb.Name, names))
		case seen[mb.Name]:
			c.r.Add(line, "mcp.servers[%d].servers: %q is given twice", i, mb.Name)
		}
		seen[mb.Name] = true
		if mb.Prefix == "" {
			mb.Prefix = mb.Name + "_"
		}
		if !toolPrefix(mb.Prefix) {
			c.r.Add(line, "mcp.servers[%d].servers: prefix %q: want 1-32 of A-Z, a-z, 0-9, '_', '-' and '.'", i, mb.Prefix)
		}
	}
	for j, a := range s.Servers {
		for k, b := range s.Servers {
			if j != k && strings.HasPrefix(b.Prefix, a.Prefix) && (j < k || a.Prefix != b.Prefix) {
				c.r.Add(c.r.Line("servers", strconv.Itoa(k)), "mcp.servers[%d].servers: prefix %q begins with %q (of %s): a tool's name would not tell the server", i, b.Prefix, a.Prefix, a.Name)
			}
		}
	}
	c.notSet("a virtual server has none (each of its servers has its own)",
		key{"headers", s.Headers != nil}, key{"env", s.Env != nil}, key{"dir", s.Dir != ""}, key{"max_memory", s.MaxMemory != 0}, key{"tool_limits", s.ToolLimits != nil},
		key{"hold", s.Hold != 0}, key{"tool_hold", s.ToolHold != nil}, key{"pins", s.Pins != nil})
}

// stdio checks a stdio server: a program that is there, a directory that
// is one, no headers (there is no request to carry them).
func (c check) stdio(s *Server) {
	i := c.i
	if len(s.Command) == 0 || s.Command[0] == "" {
		c.add("command", "mcp.servers[%d].command: want the program and its arguments, such as [npx, -y, some-mcp-server]", i)
		return
	}
	if s.Dir != "" {
		if st, err := os.Stat(s.Dir); err != nil || !st.IsDir() {
			c.add("dir", "mcp.servers[%d].dir: %q is not a directory", i, s.Dir)
		}
	}
	prog := s.Command[0]
	if strings.Contains(prog, "/") {
		if !filepath.IsAbs(prog) && s.Dir != "" {
			prog = filepath.Join(s.Dir, prog)
		}
		if st, err := os.Stat(prog); err != nil || st.IsDir() {
			c.r.Add(c.r.Line("command", "0"), "mcp.servers[%d].command: no program %q", i, s.Command[0])
		}
	} else if _, err := exec.LookPath(prog); err != nil {
		c.r.Add(c.r.Line("command", "0"), "mcp.servers[%d].command: no program %q in PATH", i, prog)
	}
	if len(s.Headers) > 0 {
		c.add("headers", "mcp.servers[%d].headers: a stdio server takes its credentials in env", i)
	}
	if s.MaxMemory == 0 {
		s.MaxMemory = defaultStdioMemory
	}
}

// serverName is the rule for an MCP server's name: a path segment of
// /mcp/{name} that needs no escaping.
func serverName(s string) bool {
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
