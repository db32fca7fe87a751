package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

const mcpGateway = okGateway + `mcp:
  servers:
    - name: files
      url: https://files.internal/mcp
      headers:
        Authorization: "Bearer ${FILES_TOKEN}"
      tool_limits:
        delete_file: 10/hour
    - name: search_2
      url: http://127.0.0.1:9000/mcp
      timeout: 5s
`

// TestMCPConfig: the servers and the agents' tools load with their
// defaults, the headers expanded from the environment.
func TestMCPConfig(t *testing.T) {
	cfg, err := loadFiles(t, mcpGateway, okAgents+"    mcp_tools:\n      files: [\"read_*\", delete_file]\n      search_2: []\n", okProtocol,
		map[string]string{"FILES_TOKEN": "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Gateway.MCP.Servers
	if len(s) != 2 || s[0].Name != "files" || s[0].Headers["Authorization"] != "Bearer s3cret" || s[0].Timeout.D() != 30*time.Second ||
		s[0].ToolLimits["delete_file"] != (Rate{N: 10, Period: time.Hour}) || s[1].Timeout.D() != 5*time.Second {
		t.Errorf("servers = %+v", s)
	}
	tools := cfg.Agents["a1"].MCPTools
	if len(tools["files"]) != 2 || tools["search_2"] == nil || len(tools["search_2"]) != 0 {
		t.Errorf("mcp_tools = %#v", tools)
	}
}

// TestMCPConfigProblems: each mistake is a problem at its file and line.
func TestMCPConfigProblems(t *testing.T) {
	server := func(fields string) string {
		return okGateway + "mcp:\n  servers:\n    - name: files\n      url: https://f/mcp\n" + fields
	}
	stdio := func(command string) string {
		return okGateway + "mcp:\n  servers:\n    - name: local\n      command: " + command
	}
	cases := []struct {
		note, gw, ag string
		env          map[string]string
		want         string
	}{
		{note: "bad name", gw: okGateway + "mcp:\n  servers:\n    - name: Files\n      url: https://f/mcp\n", want: `gateway.yaml:7: mcp.servers[0].name "Files": want 1-64 of a-z`},
		{note: "duplicate name", gw: server("    - name: files\n      url: https://g/mcp\n"), want: `gateway.yaml:9: mcp.servers: duplicate server "files"`},
		{note: "not http", gw: okGateway + "mcp:\n  servers:\n    - name: f\n      url: ftp://f/mcp\n", want: `gateway.yaml:8: mcp.servers[0].url: want an http(s) URL`},
		{note: "credentials in the url", gw: okGateway + "mcp:\n  servers:\n    - name: f\n      url: https://u:p@f/mcp\n", want: `gateway.yaml:8: mcp.servers[0].url: want an http(s) URL without credentials`},
		{note: "negative timeout", gw: server("      timeout: -1s\n"), want: `gateway.yaml:9: invalid duration "-1s"`},
		{note: "reserved header", gw: server("      headers:\n        mcp-session-id: x\n"), want: `gateway.yaml:10: mcp.servers[0].headers: Mcp-Session-Id is set by the gateway itself`},
		{note: "header twice", gw: server("      headers:\n        Authorization: a\n        authorization: b\n"), want: `gateway.yaml:11: header Authorization is given twice`},
		{note: "header value splits", gw: server("      headers:\n        X-Key: ${KEY}\n"), env: map[string]string{"KEY": "a\r\nX-Evil: 1"},
			want: `gateway.yaml:10: the value of header X-Key holds a line break`},
		{note: "not a header name", gw: server("      headers:\n        \"a b\": x\n"), want: `gateway.yaml:10: "a b" is not a header name`},
		{note: "unknown key", gw: server("      header:\n        a: b\n"), want: `gateway.yaml:9: unknown key "header" in mcp.servers.0 (did you mean "headers"?)`},
		{note: "bad tool limit", gw: server("      tool_limits:\n        delete: 10/fortnight\n"), want: `gateway.yaml:10: invalid rate`},
		{note: "unknown server", gw: server(""), ag: okAgents + "    mcp_tools:\n      filez: [\"*\"]\n", want: `agents.yaml:5: agent "a1": mcp_tools: unknown MCP server "filez" (want a name of gateway.yaml mcp.servers) (did you mean "files"?)`},
		{note: "bad glob", gw: server(""), ag: okAgents + "    mcp_tools:\n      files: [\"read_[\"]\n", want: `agents.yaml:5: agent "a1": mcp_tools.files: bad glob "read_["`},
		{note: "url and command", gw: server("      command: [cat]\n"), want: `gateway.yaml:7: mcp.servers[0]: give one of url (a Streamable HTTP server), command (a stdio server) or servers (a virtual server)`},
		{note: "no program", gw: stdio("[no-such-mcp-program-x]\n"), want: `gateway.yaml:8: mcp.servers[0].command: no program "no-such-mcp-program-x" in PATH`},
		{note: "empty command", gw: stdio("[]\n"), want: `gateway.yaml:8: mcp.servers[0].command: want the program and its arguments`},
		{note: "headers on stdio", gw: stdio("[cat]\n      headers:\n        X-Key: a\n"), want: `gateway.yaml:9: mcp.servers[0].headers: a stdio server takes its credentials in env`},
		{note: "env on http", gw: server("      env:\n        KEY: a\n"), want: `gateway.yaml:9: mcp.servers[0].env: only a stdio server (command) has one`},
		{note: "bad env name", gw: stdio("[cat]\n      env:\n        \"A=B\": x\n"), want: `gateway.yaml:10: "A=B" is not a variable name`},
		{note: "no dir", gw: stdio("[cat]\n      dir: /no/such/dir\n"), want: `gateway.yaml:9: mcp.servers[0].dir: "/no/such/dir" is not a directory`},
		{note: "virtual of unknown", gw: server("    - name: all\n      servers: [filez]\n"), want: `gateway.yaml:10: mcp.servers[1].servers: "filez" is not a configured server (a virtual one cannot be combined) (did you mean "files"?)`},
		{note: "virtual of virtual", gw: server("    - name: all\n      servers: [files]\n    - name: more\n      servers: [all]\n"), want: `mcp.servers[2].servers: "all" is not a configured server`},
		{note: "virtual with url", gw: server("    - name: all\n      url: https://g/mcp\n      servers: [files]\n"), want: `gateway.yaml:9: mcp.servers[1]: give one of url`},
		{note: "prefix begins another", gw: server("    - name: g\n      url: https://g/mcp\n    - name: all\n      servers: [{name: files, prefix: a_}, {name: g, prefix: a_b_}]\n"),
			want: `mcp.servers[2].servers: prefix "a_b_" begins with "a_" (of files)`},
		{note: "mcp_tools of a virtual", gw: server("    - name: all\n      servers: [files]\n"), ag: okAgents + "    mcp_tools:\n      all: [\"*\"]\n",
			want: `agent "a1": mcp_tools: "all" is a virtual server`},
		{note: "hold too long", gw: server("      hold: 2h\n"), want: `gateway.yaml:9: mcp.servers[0].hold: want a duration up to 1h0m0s`},
		{note: "tool hold negative", gw: server("      tool_hold:\n        rm: -1s\n"), want: `gateway.yaml:10: invalid duration "-1s"`},
		{note: "no servers", gw: okGateway, ag: okAgents + "    mcp_tools:\n      files: []\n", want: `agents.yaml:5: agent "a1": mcp_tools: unknown MCP server "files"`},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			ag := tc.ag
			if ag == "" {
				ag = okAgents
			}
			_, err := loadFiles(t, tc.gw, ag, okProtocol, tc.env)
			if err == nil {
				t.Fatalf("loaded; want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("problems:\n%v\nwant one containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "X-Evil") {
				t.Errorf("a header value is quoted back:\n%v", err)
			}
		})
	}
}

// TestMCPStdioConfig: a stdio server loads with its environment expanded
// and its memory bound's default; explained, its env shows names only.
func TestMCPStdioConfig(t *testing.T) {
	gw := okGateway + "mcp:\n  servers:\n    - name: local\n      command: [cat, -u]\n      env:\n        API_KEY: ${LOCAL_KEY}\n      dir: /\n"
	cfg, err := loadFiles(t, gw, okAgents, okProtocol, map[string]string{"LOCAL_KEY": "s3cret"})
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Gateway.MCP.Servers[0]
	if len(s.Command) != 2 || s.Env["API_KEY"] != "s3cret" || s.Dir != "/" || s.MaxMemory != 4<<30 || s.Timeout.D() != 30*time.Second {
		t.Errorf("server = %+v", s)
	}
	if got := s.Env.String(); got != "{API_KEY: [set]}" {
		t.Errorf("env printed as %q", got)
	}
}

// TestMCPVirtualConfig: a virtual server's members, by name alone or with
// a prefix; the default prefix is the name and "_".
func TestMCPVirtualConfig(t *testing.T) {
	gw := mcpGateway + "    - name: all\n      servers: [files, {name: search_2, prefix: s.}]\n"
	cfg, err := loadFiles(t, gw, okAgents, okProtocol, map[string]string{"FILES_TOKEN": "x"})
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Gateway.MCP.Servers[2].Servers
	if want := []MCPMember{{Name: "files", Prefix: "files_"}, {Name: "search_2", Prefix: "s."}}; len(got) != 2 || got[0] != want[0] || got[1] != want[1] {
		t.Errorf("members = %+v, want %+v", got, want)
	}
}

// TestMCPHeadersNeverExplained: config check --explain names the headers,
// never their values.
func TestMCPHeadersNeverExplained(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{GatewayFile: mcpGateway, AgentsFile: okAgents, ProtocolFile: okProtocol} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, settings, err := Explain(dir, Options{LookupEnv: func(k string) (string, bool) { return "s3cret", k == "FILES_TOKEN" }})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteSettings(&b, settings); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "s3cret") || !strings.Contains(b.String(), "mcp.servers[0].headers = {Authorization: [set]}") {
		t.Errorf("explained:\n%s", b.String())
	}
}
