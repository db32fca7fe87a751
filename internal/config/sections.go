package config

import (
	"path"
	"strconv"

	"github.com/sacpgw/gateway/internal/confkit"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/mcp/mcpconf"
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

// agentMCP checks the agents' mcp_tools against the configured servers.
func (l *loader) agentMCP(n *yaml.Node, agents map[string]*roster.Agent, m mcpconf.Settings) {
	const f = AgentsFile
	servers, virtual := m.Names()
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
