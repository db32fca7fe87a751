package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
)

// toolServer is an MCP server made with the official Go SDK, served over
// Streamable HTTP (events at /mcp, JSON answers at /json), that records
// the headers and arguments it was sent.
type toolServer struct {
	srv *httptest.Server
	mu  sync.Mutex
	// headers are those of every request the server got.
	headers []http.Header
	// args are the arguments of every call, by tool.
	args map[string][]map[string]any
	// down makes the server answer 503 to everything.
	down atomic.Bool
	// sdk is the server itself (a test may change its tools).
	sdk *sdk.Server
}

func (ts *toolServer) record(tool string, args map[string]any) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	ts.args[tool] = append(ts.args[tool], args)
}

func (ts *toolServer) calls(tool string) []map[string]any {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return slices.Clone(ts.args[tool])
}

func (ts *toolServer) seen() []http.Header {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return slices.Clone(ts.headers)
}

type pathArgs struct {
	Path string `json:"path"`
}

type textArgs struct {
	Text string `json:"text"`
}

func newToolServer(t testing.TB) *toolServer {
	ts := &toolServer{args: map[string][]map[string]any{}}
	text := func(s string) *sdk.CallToolResult {
		return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: s}}}
	}
	yes := true
	no := false
	build := func() *sdk.Server {
		s := sdk.NewServer(&sdk.Implementation{Name: "files", Version: "1"}, nil)
		sdk.AddTool(s, &sdk.Tool{Name: "read_file", Description: "Reads a file.", Annotations: &sdk.ToolAnnotations{ReadOnlyHint: true}},
			func(_ context.Context, _ *sdk.CallToolRequest, in pathArgs) (*sdk.CallToolResult, any, error) {
				ts.record("read_file", map[string]any{"path": in.Path})
				return text("contents of " + in.Path + ": written by alice@example.com"), nil, nil
			})
		sdk.AddTool(s, &sdk.Tool{Name: "delete_file", Description: "Deletes a file.", Annotations: &sdk.ToolAnnotations{DestructiveHint: &yes}},
			func(_ context.Context, _ *sdk.CallToolRequest, in pathArgs) (*sdk.CallToolResult, any, error) {
				ts.record("delete_file", map[string]any{"path": in.Path})
				return text("deleted " + in.Path), nil, nil
			})
		sdk.AddTool(s, &sdk.Tool{Name: "write_note", Description: "Keeps a note.", Annotations: &sdk.ToolAnnotations{DestructiveHint: &no}},
			func(_ context.Context, _ *sdk.CallToolRequest, in textArgs) (*sdk.CallToolResult, any, error) {
				ts.record("write_note", map[string]any{"text": in.Text})
				return text("noted: " + in.Text), nil, nil
			})
		sdk.AddTool(s, &sdk.Tool{Name: "read_card", Description: "Reads the company card."},
			func(_ context.Context, _ *sdk.CallToolRequest, _ pathArgs) (*sdk.CallToolResult, any, error) {
				return text("card 4111 1111 1111 1111"), nil, nil
			})
		sdk.AddTool(s, &sdk.Tool{Name: "read_clock", Description: "Reads the clock."},
			func(_ context.Context, _ *sdk.CallToolRequest, _ pathArgs) (*sdk.CallToolResult, any, error) {
				return text("noon"), nil, nil
			})
		sdk.AddTool(s, &sdk.Tool{Name: "admin_reset", Description: "Resets everything."},
			func(_ context.Context, _ *sdk.CallToolRequest, _ pathArgs) (*sdk.CallToolResult, any, error) {
				ts.record("admin_reset", nil)
				return text("reset"), nil, nil
			})
		return s
	}
	server := build()
	ts.sdk = server
	events := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, nil)
	jsonAnswers := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return server }, &sdk.StreamableHTTPOptions{JSONResponse: true})
	ts.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ts.mu.Lock()
		ts.headers = append(ts.headers, r.Header.Clone())
		ts.mu.Unlock()
		if ts.down.Load() {
			http.Error(w, "down", http.StatusServiceUnavailable)
			return
		}
		if r.URL.Path == "/json" {
			jsonAnswers.ServeHTTP(w, r)
			return
		}
		events.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.srv.Close)
	return ts
}

// mcpGateway is the whole gateway (Build, as the command builds it) in
// front of ts: server "files" (events), "files_json" (JSON answers), and
// agents coder (tools of both), intern (files, no tools), outsider (no
// MCP at all) and flooder (files' read_* tools, rate_limit 50/hour).
// Every token is "tok-" + the agent's id.
func newMCPGateway(t testing.TB, ts *toolServer) *a2a { return newMCPGatewayAudit(t, ts, "closed") }

// newMCPGatewayAudit is newMCPGateway with audit.fail_mode failMode.
func newMCPGatewayAudit(t testing.TB, ts *toolServer, failMode string) *a2a {
	t.Helper()
	dir := t.TempDir()
	auditDir := filepath.Join(dir, "audit")
	gw := agentGatewayYAML(auditDir, "mcp") + `  fail_mode: ` + failMode + `
mcp:
  servers:
    - name: files
      url: ` + ts.srv.URL + `/mcp
      headers:
        Authorization: "Bearer up-secret"
      tool_limits:
        read_clock: 1/hour
    - name: files_json
      url: ` + ts.srv.URL + `/json
      headers:
        Authorization: "Bearer up-secret"
    - name: files_held                   # an escalated call waits for a person
      url: ` + ts.srv.URL + `/mcp
      hold: 30s
      tool_hold: {write_note: 0s}
    - name: files_brief
      url: ` + ts.srv.URL + `/mcp
      hold: 1s
`
	var agents strings.Builder
	agents.WriteString("agents:\n")
	for id, tools := range map[string]string{
		"coder":    `{files: ["read_*", "write_*", delete_file], files_json: ["read_*"], files_held: [delete_file], files_brief: [delete_file]}`,
		"intern":   `{files: []}`,
		"outsider": `{}`,
	} {
		fmt.Fprintf(&agents, "  %s:\n    type: coder\n    token_sha256: %q\n    mcp_tools: %s\n", id, roster.HashTokenHex("tok-"+id), tools)
	}
	fmt.Fprintf(&agents, "  flooder:\n    type: coder\n    token_sha256: %q\n    mcp_tools: {files: [\"read_*\"]}\n    rate_limit: 50/hour\n", roster.HashTokenHex("tok-flooder"))
	return serveApp(t, dir, auditDir, map[string]string{
		config.GatewayFile:  gw,
		config.AgentsFile:   agents.String(),
		config.ProtocolFile: "protocol:\n  redaction:\n    block: [credit_card]\n",
	})
}

// bearer adds an agent's gateway token to every request.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.Header.Set("Authorization", "Bearer "+b.token)
	return b.next.RoundTrip(r)
}

// connect is an agent's MCP client session through the gateway.
func connect(ctx context.Context, g *a2a, server, token string) (*sdk.ClientSession, error) {
	client := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "1"}, nil)
	return client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: g.srv.URL + "/mcp/" + server,
		HTTPClient: &http.Client{Transport: bearer{token, http.DefaultTransport}}}, nil)
}

func mustConnect(t *testing.T, ctx context.Context, g *a2a, server, token string) *sdk.ClientSession {
	t.Helper()
	cs, err := connect(ctx, g, server, token)
	if err != nil {
		t.Fatalf("connect to %s as %s: %v", server, token, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	return cs
}

// rpcError is the JSON-RPC error of a failed call.
func rpcError(t *testing.T, err error) *jsonrpc.Error {
	t.Helper()
	var e *jsonrpc.Error
	if !errors.As(err, &e) {
		t.Fatalf("want a JSON-RPC error, got %v", err)
	}
	return e
}

func toolText(res *sdk.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*sdk.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// TestMCPThroughTheGateway: an agent using the official Go SDK reaches an
// MCP server (the SDK too) through the gateway and is governed: it sees
// only its tools, calls the harmless ones, is denied the others, waits for
// a person for a destructive one (whose approval lets that exact call
// through once), has its arguments and results redacted, and every call
// is in the audit trail, which verifies; the server never sees the
// agent's token, only the gateway's credential.
func TestMCPThroughTheGateway(t *testing.T) {
	ts := newToolServer(t)
	g := newMCPGateway(t, ts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := mustConnect(t, ctx, g, "files", "tok-coder")

	t.Run("the tool list shows the agent's tools only", func(t *testing.T) {
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		slices.Sort(names)
		if want := []string{"delete_file", "read_card", "read_clock", "read_file", "write_note"}; !slices.Equal(names, want) {
			t.Errorf("tools %v, want %v (admin_reset is outside mcp_tools)", names, want)
		}
	})

	t.Run("an allowed call passes, its result redacted", func(t *testing.T) {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "notes.txt"}})
		if err != nil {
			t.Fatal(err)
		}
		if got := toolText(res); got != "contents of notes.txt: written by [REDACTED:email]" {
			t.Errorf("result %q", got)
		}
	})

	t.Run("a tool outside mcp_tools is denied and never called", func(t *testing.T) {
		_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "admin_reset", Arguments: map[string]any{"path": "/"}})
		if e := rpcError(t, err); e.Code != -32060 || !strings.Contains(e.Message, `"admin_reset"`) {
			t.Errorf("error %d %q", e.Code, e.Message)
		}
		if n := len(ts.calls("admin_reset")); n != 0 {
			t.Errorf("the server ran admin_reset %d times", n)
		}
	})

	t.Run("arguments are redacted before they leave", func(t *testing.T) {
		if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "write_note", Arguments: map[string]any{"text": "call bob@example.com"}}); err != nil {
			t.Fatal(err)
		}
		got := ts.calls("write_note")
		if len(got) != 1 || got[0]["text"] != "call [REDACTED:email]" {
			t.Errorf("the server got %v", got)
		}
	})

	t.Run("a blocking detector refuses the result", func(t *testing.T) {
		_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "read_card", Arguments: map[string]any{"path": "x"}})
		if e := rpcError(t, err); e.Code != -32063 || strings.Contains(e.Message, "4111") {
			t.Errorf("error %d %q", e.Code, e.Message)
		}
	})

	t.Run("a blocking detector refuses the arguments", func(t *testing.T) {
		_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "write_note", Arguments: map[string]any{"text": "pay with 4111 1111 1111 1111"}})
		if e := rpcError(t, err); e.Code != -32063 {
			t.Errorf("error %d %q", e.Code, e.Message)
		}
		if n := len(ts.calls("write_note")); n != 1 {
			t.Errorf("the server got %d notes, want only the earlier one", n)
		}
	})

	t.Run("the tool's own limit", func(t *testing.T) {
		if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "read_clock", Arguments: map[string]any{}}); err != nil {
			t.Fatal(err)
		}
		_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "read_clock", Arguments: map[string]any{}})
		if e := rpcError(t, err); e.Code != -32062 {
			t.Errorf("error %d %q", e.Code, e.Message)
		}
	})

	t.Run("a destructive call waits for a person, then passes once", func(t *testing.T) {
		args := map[string]any{"path": "old.txt"}
		escalated := func() (id, url string) {
			t.Helper()
			_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "delete_file", Arguments: args})
			e := rpcError(t, err)
			var data struct {
				ID  string `json:"escalation_id"`
				URL string `json:"human_review_url"`
			}
			if e.Code != -32061 || json.Unmarshal(e.Data, &data) != nil || data.ID == "" || !strings.HasSuffix(data.URL, "/review/"+data.ID) {
				t.Fatalf("error %d %q %s", e.Code, e.Message, e.Data)
			}
			return data.ID, data.URL
		}
		id, _ := escalated()
		if n := len(ts.calls("delete_file")); n != 0 {
			t.Fatalf("the server deleted before anyone approved (%d)", n)
		}
		status, body, _ := g.do(http.MethodGet, "/admin/escalations", "tok-admin", "")
		if status != http.StatusOK || !strings.Contains(string(body), `\"tool\":\"delete_file\"`) || !strings.Contains(string(body), `\"path\":\"old.txt\"`) {
			t.Errorf("the reviewer's queue (%d) does not show the call: %s", status, body)
		}
		if status, body, _ := g.do(http.MethodPost, "/admin/escalations/"+id+"/decision", "tok-admin", `{"decision":"approve","reviewer":"ops","comment":"ok"}`); status != http.StatusOK {
			t.Fatalf("approve: %d %s", status, body)
		}
		args = map[string]any{"path": "other.txt"}
		if other, _ := escalated(); other == id {
			t.Error("another argument passed on the approval")
		}
		args = map[string]any{"path": "old.txt"}
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "delete_file", Arguments: args})
		if err != nil || toolText(res) != "deleted old.txt" {
			t.Fatalf("the approved call: %v %v", res, err)
		}
		if again, _ := escalated(); again == id {
			t.Error("the approval let the call through twice")
		}
		if n := len(ts.calls("delete_file")); n != 1 {
			t.Errorf("the server deleted %d times, want once", n)
		}
	})

	t.Run("the server never sees the agent's token", func(t *testing.T) {
		hs := ts.seen()
		if len(hs) == 0 {
			t.Fatal("no request reached the server")
		}
		for _, h := range hs {
			if got := h.Get("Authorization"); got != "Bearer up-secret" {
				t.Errorf("the server got Authorization %q", got)
			}
			for k, vs := range h {
				for _, v := range vs {
					if strings.Contains(v, "tok-coder") {
						t.Errorf("the server got the agent's token in %s", k)
					}
				}
			}
		}
	})

	t.Run("the calls are in the audit trail, which verifies", func(t *testing.T) {
		decisions := map[string]int{}
		for _, e := range g.entries("mcp.call") {
			var s map[string]any
			_ = json.Unmarshal(e.Summary, &s)
			if e.AgentID != "coder" || s["server"] != "files" || e.RequestID == "" {
				t.Errorf("entry %+v", e)
			}
			decisions[str(s["decision"])]++
			if s["tool"] == "delete_file" && s["decision"] == "escalate" && str(s["escalation_id"]) == "" {
				t.Errorf("an escalated call without its escalation id: %s", e.Summary)
			}
		}
		want := map[string]int{"allow": 4, "deny": 1, "escalate": 3, "approved": 1, "limited": 1, "blocked": 1}
		if fmt.Sprint(decisions) != fmt.Sprint(want) {
			t.Errorf("decisions %v, want %v", decisions, want)
		}
		results := g.entries("mcp.result")
		isError := map[any]int{}
		for _, e := range results {
			var s map[string]any
			_ = json.Unmarshal(e.Summary, &s)
			if len(str(s["result_sha256"])) != 64 {
				t.Errorf("result entry %s", e.Summary)
			}
			isError[s["is_error"]]++
		}
		// read_clock without its path argument: the tool's own error.
		if len(results) != 5 || isError[true] != 1 || isError[false] != 4 {
			t.Errorf("%d mcp.result entries, is_error %v", len(results), isError)
		}
		rep, err := audit.Verify(g.auditDir)
		if err != nil || len(rep.Failures) > 0 {
			t.Errorf("verify: %v %+v", err, rep.Failures)
		}
	})
}

// TestMCPIdentityAndSessions: a wrong token, an agent without the server
// and another agent's session are refused; an agent's session is its own.
func TestMCPIdentityAndSessions(t *testing.T) {
	ts := newToolServer(t)
	g := newMCPGateway(t, ts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		note, server, token string
	}{
		{"a wrong token", "files", "tok-nobody"},
		{"an agent without the server", "files", "tok-outsider"},
		{"an unknown server", "nope", "tok-coder"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			if cs, err := connect(ctx, g, tc.server, tc.token); err == nil {
				_ = cs.Close()
				t.Fatal("connected")
			}
		})
	}
	t.Run("an agent without tools sees none and calls none", func(t *testing.T) {
		cs := mustConnect(t, ctx, g, "files", "tok-intern")
		res, err := cs.ListTools(ctx, nil)
		if err != nil || len(res.Tools) != 0 {
			t.Fatalf("tools %v %v", res, err)
		}
		_, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "a"}})
		if e := rpcError(t, err); e.Code != -32060 {
			t.Errorf("error %d %q", e.Code, e.Message)
		}
	})
	t.Run("another agent's session id is not found", func(t *testing.T) {
		cs := mustConnect(t, ctx, g, "files", "tok-coder")
		id := cs.ID()
		if !strings.HasPrefix(id, "mcp-") {
			t.Fatalf("session id %q is not the gateway's", id)
		}
		req, _ := http.NewRequest(http.MethodPost, g.srv.URL+"/mcp/files", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"ping"}`))
		req.Header.Set("Authorization", "Bearer tok-intern")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", id)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("another agent's session: %d", resp.StatusCode)
		}
	})
}

// TestMCPAnswersAsTheServerDoes: a request is answered with an event
// stream when the server streams, with JSON when it answers JSON.
func TestMCPAnswersAsTheServerDoes(t *testing.T) {
	ts := newToolServer(t)
	g := newMCPGateway(t, ts)
	for _, tc := range []struct{ server, want string }{{"files", "text/event-stream"}, {"files_json", "application/json"}} {
		t.Run(tc.server, func(t *testing.T) {
			post := func(session, body string) *http.Response {
				req, _ := http.NewRequest(http.MethodPost, g.srv.URL+"/mcp/"+tc.server, strings.NewReader(body))
				req.Header.Set("Authorization", "Bearer tok-coder")
				req.Header.Set("Content-Type", "application/json")
				req.Header.Set("Accept", "application/json, text/event-stream")
				if session != "" {
					req.Header.Set("Mcp-Session-Id", session)
					req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
				}
				resp, err := http.DefaultClient.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				return resp
			}
			resp := post("", `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"raw","version":"1"}}}`)
			resp.Body.Close()
			session := resp.Header.Get("Mcp-Session-Id")
			if resp.StatusCode != http.StatusOK || session == "" {
				t.Fatalf("initialize: %d, session %q", resp.StatusCode, session)
			}
			post(session, `{"jsonrpc":"2.0","method":"notifications/initialized"}`).Body.Close()
			resp = post(session, `{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"a"}}}`)
			defer resp.Body.Close()
			if ct := resp.Header.Get("Content-Type"); !strings.HasPrefix(ct, tc.want) {
				t.Errorf("answered %q, want %q", ct, tc.want)
			}
		})
	}
}

// BenchmarkMCPToolCall is one tools/call of the official Go SDK client to
// an SDK server (events), direct and through the gateway (identify, the
// strict reading, the tool list from cache, the policy, the redaction of
// arguments and result, mcp.call and mcp.result with fail_mode closed,
// the relay; gateway_audit_open writes the entries off the call's path).
// cpu-µs/op is the whole process's CPU (client, gateway and
// server share it): the difference is the gateway's.
func BenchmarkMCPToolCall(b *testing.B) {
	ts := newToolServer(b)
	g := newMCPGateway(b, ts)
	open := newMCPGatewayAudit(b, ts, "open")
	for _, bc := range []struct{ name, endpoint, token string }{
		{"direct", ts.srv.URL + "/mcp", ""},
		{"gateway", g.srv.URL + "/mcp/files", "tok-coder"},
		{"gateway_audit_open", open.srv.URL + "/mcp/files", "tok-coder"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			var rt http.RoundTripper = http.DefaultTransport
			if bc.token != "" {
				rt = bearer{bc.token, rt}
			}
			cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx,
				&sdk.StreamableClientTransport{Endpoint: bc.endpoint, HTTPClient: &http.Client{Transport: rt}}, nil)
			if err != nil {
				b.Fatal(err)
			}
			defer cs.Close()
			params := &sdk.CallToolParams{Name: "write_note", Arguments: map[string]any{"text": "a short note"}}
			b.ReportAllocs()
			start := cpuTime(b)
			for b.Loop() {
				if _, err := cs.CallTool(ctx, params); err != nil {
					b.Fatal(err)
				}
			}
			reportCPU(b, start)
		})
	}
	// Under load: 16 agents' sessions call at once, as a fleet of agents
	// does; the audit trail's group commit then shares its fsyncs among the
	// calls in flight, which one serial client never lets it do.
	for _, bc := range []struct{ name, endpoint, token string }{
		{"parallel/direct", ts.srv.URL + "/mcp", ""},
		{"parallel/gateway", g.srv.URL + "/mcp/files", "tok-coder"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ctx := context.Background()
			var rt http.RoundTripper = http.DefaultTransport
			if bc.token != "" {
				rt = bearer{bc.token, rt}
			}
			const clients = 16
			sessions := make(chan *sdk.ClientSession, clients)
			for range clients {
				cs, err := sdk.NewClient(&sdk.Implementation{Name: "bench", Version: "1"}, nil).Connect(ctx,
					&sdk.StreamableClientTransport{Endpoint: bc.endpoint, HTTPClient: &http.Client{Transport: rt}}, nil)
				if err != nil {
					b.Fatal(err)
				}
				defer cs.Close()
				sessions <- cs
			}
			params := &sdk.CallToolParams{Name: "write_note", Arguments: map[string]any{"text": "a short note"}}
			b.ReportAllocs()
			b.SetParallelism(clients / runtime.GOMAXPROCS(0))
			start := cpuTime(b)
			b.RunParallel(func(pb *testing.PB) {
				cs := <-sessions
				defer func() { sessions <- cs }()
				for pb.Next() {
					if _, err := cs.CallTool(ctx, params); err != nil {
						b.Error(err)
						return
					}
				}
			})
			reportCPU(b, start)
		})
	}
}

// TestMCPReloadAndHealth: a reload that narrows an agent's mcp_tools
// applies to the next request of the same session; a server that stops
// answering is named in /readyz's detail, and the gateway stays ready.
func TestMCPReloadAndHealth(t *testing.T) {
	ts := newToolServer(t)
	g := newMCPGateway(t, ts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := mustConnect(t, ctx, g, "files", "tok-coder")
	listed := func() []string {
		t.Helper()
		res, err := cs.ListTools(ctx, nil)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, tool := range res.Tools {
			names = append(names, tool.Name)
		}
		slices.Sort(names)
		return names
	}
	if !slices.Contains(listed(), "write_note") {
		t.Fatal("write_note is not listed before the reload")
	}
	cfg, err := config.Load(g.dir)
	if err != nil {
		t.Fatal(err)
	}
	agents, _ := os.ReadFile(filepath.Join(g.dir, config.AgentsFile))
	narrowed := strings.Replace(string(agents), `"write_*", `, "", 1)
	if narrowed == string(agents) {
		t.Fatal("the test's agents.yaml changed shape")
	}
	if err := os.WriteFile(filepath.Join(g.dir, config.AgentsFile), []byte(narrowed), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := g.app.Reload(g.dir, cfg); got == cfg {
		t.Fatal("the reload was refused")
	}
	if names := listed(); !slices.Equal(names, []string{"delete_file", "read_card", "read_clock", "read_file"}) {
		t.Errorf("after the reload: %v", names)
	}
	_, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "write_note", Arguments: map[string]any{"text": "x"}})
	if e := rpcError(t, err); e.Code != -32060 {
		t.Errorf("write_note after the reload: %d %q", e.Code, e.Message)
	}

	ts.down.Store(true)
	_, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "a"}})
	if e := rpcError(t, err); e.Code != -32064 {
		t.Errorf("with the server down: %d %q", e.Code, e.Message)
	}
	status, body, _ := g.do(http.MethodGet, "/readyz", "", "")
	var ready struct {
		Checks map[string]string `json:"checks"`
	}
	_ = json.Unmarshal(body, &ready)
	if status != http.StatusOK || !strings.HasPrefix(ready.Checks["mcp"], "ok; MCP server files failed") {
		t.Errorf("/readyz %d %s", status, body)
	}
}
