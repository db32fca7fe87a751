package mcp

import (
	"context"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/policy"
)

// recordingPolicy denies the tools named in deny, allows the rest, and
// keeps the server and tool of every input it decided.
type recordingPolicy struct {
	mu   sync.Mutex
	deny map[string]bool
	seen []string // "method server/tool"
}

func (p *recordingPolicy) MCP(_ context.Context, in map[string]any) (policy.MCPDecision, error) {
	tool, _ := in["tool"].(map[string]any)
	name, _ := tool["name"].(string)
	p.mu.Lock()
	p.seen = append(p.seen, in["method"].(string)+" "+in["server"].(string)+"/"+name)
	p.mu.Unlock()
	if p.deny[name] {
		return policy.MCPDecision{Decision: policy.MCPDeny, Reason: "no " + name}, nil
	}
	return policy.MCPDecision{Decision: policy.MCPAllow}, nil
}

func (p *recordingPolicy) decided(s string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Contains(p.seen, s)
}

// filesSDKServer is a Streamable HTTP server of the Go SDK with tools
// read_file and delete_file.
func filesSDKServer(t *testing.T) string {
	s := sdk.NewServer(&sdk.Implementation{Name: "files", Version: "1"}, nil)
	for _, name := range []string{"read_file", "delete_file"} {
		sdk.AddTool(s, &sdk.Tool{Name: name, Description: name + " does it."}, func(context.Context, *sdk.CallToolRequest, stdioArgs) (*sdk.CallToolResult, any, error) {
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "files ran " + name}}}, nil, nil
		})
	}
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestVirtualServer: one endpoint combines an HTTP server and a stdio
// server under prefixes, for the official SDK client. The tool list shows
// each server's tools the agent's mcp_tools for that server name and the
// policy does not deny there; each call reaches its own server under its
// own name, decided by the policy for that server and tool; a tool of
// another server's globs, a denied one and an unknown prefix are refused.
func TestVirtualServer(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	t.Setenv(stdioServerEnv, "")
	agent := &roster.Agent{ID: "a1", MaxRequestSize: 1 << 20, MCPTools: map[string][]string{"files": {"read_*"}, "local": {"echo", "pid"}}}
	cfg := &config.Config{Agents: map[string]*roster.Agent{"a1": agent}}
	cfg.Gateway.MCP.Servers = []config.MCPServer{
		{Name: "files", URL: filesSDKServer(t), Timeout: config.Duration(10 * time.Second)},
		{Name: "local", Command: stdioCommand(t), Env: config.Env{stdioServerEnv: "1"}, Timeout: config.Duration(10 * time.Second)},
		{Name: "all", Servers: []config.MCPMember{{Name: "files", Prefix: "fs_"}, {Name: "local", Prefix: "local_"}}},
	}
	pol := &recordingPolicy{deny: map[string]bool{"pid": true}}
	d, err := New(Deps{Config: cfg, Policy: pol, Limiter: limit.NewMemory(), Log: discard()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	cs := sdkConnect(t, ctx, serveAgent(t, d, agent)+"/mcp/all")
	list, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
	}
	if want := []string{"fs_read_file", "local_echo"}; !slices.Equal(names, want) {
		t.Errorf("tools = %v, want %v", names, want)
	}
	if got, err := callText(t, ctx, cs, "fs_read_file", "x"); err != nil || got != "files ran read_file" {
		t.Errorf("fs_read_file = %q, %v", got, err)
	}
	if got, err := callText(t, ctx, cs, "local_echo", "hi"); err != nil || got != "hi" {
		t.Errorf("local_echo = %q, %v", got, err)
	}
	if !pol.decided("tools/call files/read_file") || !pol.decided("tools/call local/echo") {
		t.Errorf("the policy decided %v; want each call as its own server's", pol.seen)
	}
	for _, tool := range []string{"fs_delete_file", "local_pid", "other_echo", "fs_"} {
		if got, err := callText(t, ctx, cs, tool, "x"); err == nil {
			t.Errorf("%s ran: %q", tool, got)
		}
	}
}
