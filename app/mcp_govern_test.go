//lint:file-ignore SA1019 sampling is deprecated from MCP's 2026 revision on, but live in the versions the door serves (to 2025-11-25): the agent's answers to it must be governed.

package app

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
)

// talkServer is an MCP server made with the official Go SDK that hears
// what an agent sends besides its calls: its progress notifications, and
// its answers to the server's sampling requests (tool read_model asks the
// agent's model and returns what it answered); delete_file, destructive,
// records the arguments it ran with.
type talkServer struct {
	mu       sync.Mutex
	progress []string
	deleted  []map[string]any
}

func (s *talkServer) heard() (progress []string, deleted []map[string]any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.progress...), append([]map[string]any(nil), s.deleted...)
}

func newTalkServer(t *testing.T) (*talkServer, *toolServer) {
	ts := &talkServer{}
	srv := sdk.NewServer(&sdk.Implementation{Name: "talk", Version: "1"}, &sdk.ServerOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationServerRequest) {
			ts.mu.Lock()
			defer ts.mu.Unlock()
			ts.progress = append(ts.progress, req.Params.Message)
		},
	})
	yes := true
	sdk.AddTool(srv, &sdk.Tool{Name: "read_model", Description: "Asks the agent's model."},
		func(ctx context.Context, req *sdk.CallToolRequest, _ map[string]any) (*sdk.CallToolResult, any, error) {
			res, err := req.Session.CreateMessage(ctx, &sdk.CreateMessageParams{MaxTokens: 10,
				Messages: []*sdk.SamplingMessage{{Role: "user", Content: &sdk.TextContent{Text: "who?"}}}})
			if err != nil {
				return &sdk.CallToolResult{IsError: true, Content: []sdk.Content{&sdk.TextContent{Text: "no answer: " + err.Error()}}}, nil, nil
			}
			text, _ := res.Content.(*sdk.TextContent)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "the model said: " + text.Text}}}, nil, nil
		})
	sdk.AddTool(srv, &sdk.Tool{Name: "delete_file", Description: "Deletes a file.", Annotations: &sdk.ToolAnnotations{DestructiveHint: &yes}},
		func(_ context.Context, _ *sdk.CallToolRequest, in map[string]any) (*sdk.CallToolResult, any, error) {
			ts.mu.Lock()
			defer ts.mu.Unlock()
			ts.deleted = append(ts.deleted, in)
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "deleted"}}}, nil, nil
		})
	// The gateway's helper names the server "files" at URL/mcp (and
	// "files_json" at URL/json).
	h := sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return srv }, nil)
	mux := http.NewServeMux()
	mux.Handle("/mcp", h)
	mux.Handle("/json", h)
	hs := httptest.NewServer(mux)
	t.Cleanup(hs.Close)
	return ts, &toolServer{srv: hs, args: map[string][]map[string]any{}}
}

// TestMCPAgentMessagesGoverned: through the gateway, with the official Go
// SDK on both sides, what the agent sends besides its calls is redacted
// (a progress notification's message, its model's answer to the server's
// sampling request) and refused when a blocking detector matches; an
// approval lets through exactly the reviewed call: a number the canonical
// form would change is refused, a _meta added after the approval is
// another call.
func TestMCPAgentMessagesGoverned(t *testing.T) {
	talk, ts := newTalkServer(t)
	g := newMCPGateway(t, ts)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	answer := "mail eve@example.com"
	client := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "1"}, &sdk.ClientOptions{
		CreateMessageHandler: func(context.Context, *sdk.CreateMessageRequest) (*sdk.CreateMessageResult, error) {
			return &sdk.CreateMessageResult{Role: "assistant", Model: "m", Content: &sdk.TextContent{Text: answer}}, nil
		},
	})
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: g.srv.URL + "/mcp/files",
		HTTPClient: &http.Client{Transport: bearer{"tok-coder", http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cs.Close() })

	t.Run("a progress message is redacted, a blocked one refused", func(t *testing.T) {
		if err := cs.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: "p1", Progress: 1, Message: "sent to eve@example.com"}); err != nil {
			t.Fatal(err)
		}
		// A refused notification is an HTTP error (MCP's Streamable HTTP
		// has no other way to say so), on which the SDK ends its session:
		// another session of the agent sends it.
		other := mustConnect(t, ctx, g, "files", "tok-coder")
		if err := other.NotifyProgress(ctx, &sdk.ProgressNotificationParams{ProgressToken: "p1", Progress: 2, Message: "card 4111 1111 1111 1111"}); err == nil {
			t.Error("a progress message with a card number was taken")
		}
		deadline := time.Now().Add(5 * time.Second)
		for p, _ := talk.heard(); len(p) == 0 && time.Now().Before(deadline); p, _ = talk.heard() {
			time.Sleep(10 * time.Millisecond)
		}
		if p, _ := talk.heard(); len(p) != 1 || p[0] != "sent to [REDACTED:email]" {
			t.Errorf("the server heard %q", p)
		}
	})

	t.Run("the answer to the server's sampling request is redacted", func(t *testing.T) {
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "read_model", Arguments: map[string]any{}})
		if err != nil || toolText(res) != "the model said: mail [REDACTED:email]" {
			t.Fatalf("%v %v", res, err)
		}
		answer = "pay with 4111 1111 1111 1111"
		res, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "read_model", Arguments: map[string]any{}})
		if err != nil {
			t.Fatal(err)
		}
		if !res.IsError || strings.Contains(toolText(res), "4111") || !strings.Contains(toolText(res), "withheld by the gateway") {
			t.Errorf("a blocked answer: %q %v", toolText(res), err)
		}
	})

	t.Run("an approval binds the call the server receives", func(t *testing.T) {
		_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "delete_file", Arguments: map[string]any{"path": "a", "n": json.Number("9007199254740993")}})
		if e := rpcError(t, err); e.Code != -32602 || !strings.Contains(e.Message, "RFC 8785") {
			t.Errorf("a number the canonical form would change: %d %q", e.Code, e.Message)
		}
		args := map[string]any{"path": "a", "amount": json.Number("0.10")}
		_, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "delete_file", Arguments: args})
		e := rpcError(t, err)
		var data struct {
			ID string `json:"escalation_id"`
		}
		if e.Code != -32061 || json.Unmarshal(e.Data, &data) != nil {
			t.Fatalf("not escalated: %d %q", e.Code, e.Message)
		}
		if status, body, _ := g.do(http.MethodPost, "/admin/escalations/"+data.ID+"/decision", "tok-admin", `{"decision":"approve","reviewer":"ops"}`); status != http.StatusOK {
			t.Fatalf("approve: %d %s", status, body)
		}
		_, err = cs.CallTool(ctx, &sdk.CallToolParams{Name: "delete_file", Arguments: args, Meta: sdk.Meta{"run_as": "root"}})
		if e := rpcError(t, err); e.Code != -32061 {
			t.Errorf("a _meta added after the approval: %d %q", e.Code, e.Message)
		}
		if _, deleted := talk.heard(); len(deleted) != 0 {
			t.Fatalf("the server deleted %v", deleted)
		}
		if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "delete_file", Arguments: args}); err != nil {
			t.Fatal(err)
		}
		if _, deleted := talk.heard(); len(deleted) != 1 || deleted[0]["amount"] != 0.1 {
			t.Errorf("the server deleted %v", deleted)
		}
		invalid := 0
		for _, e := range g.entries("mcp.call") {
			var s map[string]any
			_ = json.Unmarshal(e.Summary, &s)
			if s["decision"] == "invalid" && s["tool"] == "delete_file" {
				invalid++
			}
		}
		if invalid != 1 {
			t.Errorf("%d mcp.call entries record the refused number, want 1", invalid)
		}
	})
}

// TestMCPNotificationFlood: 1,000 notifications of an agent whose
// rate_limit is 50/hour: the first ones pass, the rest are refused 429
// and never reach the server, and the audit trail holds a bounded number
// of mcp.message entries (the first of each outcome at once, the repeats
// as one counted entry each).
func TestMCPNotificationFlood(t *testing.T) {
	talk, ts := newTalkServer(t)
	g := newMCPGateway(t, ts)
	post := func(session, body string) (int, http.Header) {
		req, _ := http.NewRequest(http.MethodPost, g.srv.URL+"/mcp/files", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer tok-flooder")
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if session != "" {
			req.Header.Set("Mcp-Session-Id", session)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header
	}
	status, h := post("", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	sess := h.Get("Mcp-Session-Id")
	if status != http.StatusOK || sess == "" {
		t.Fatalf("initialize: %d", status)
	}
	counts := map[int]int{}
	for range 1000 {
		status, h := post(sess, `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1,"message":"working"}}`)
		counts[status]++
		if status == http.StatusTooManyRequests && h.Get("Retry-After") == "" {
			t.Fatal("a 429 without Retry-After")
		}
	}
	// initialize spent one of the 50.
	if counts[http.StatusAccepted] != 49 || counts[http.StatusTooManyRequests] != 951 {
		t.Errorf("answers %v, want 49 × 202 and 951 × 429", counts)
	}
	deadline := time.Now().Add(5 * time.Second)
	for p, _ := talk.heard(); len(p) < 49 && time.Now().Before(deadline); p, _ = talk.heard() {
		time.Sleep(10 * time.Millisecond)
	}
	if p, _ := talk.heard(); len(p) != 49 {
		t.Errorf("the server heard %d notifications, want 49", len(p))
	}
	if err := g.app.sources.Flush(context.Background(), true); err != nil {
		t.Fatal(err)
	}
	entries := g.entries("mcp.message")
	outcomes := map[string]float64{}
	for _, e := range entries {
		var s map[string]any
		_ = json.Unmarshal(e.Summary, &s)
		n, _ := s["count"].(float64)
		outcomes[str(s["outcome"])] += max(n, 1)
		if e.AgentID != "flooder" || s["mcp_session_id"] != sess {
			t.Errorf("entry %+v %s", e, e.Summary)
		}
	}
	if len(entries) != 4 || outcomes["passed"] != 49 || outcomes["limited"] != 951 {
		t.Errorf("%d mcp.message entries accounting for %v; want 4 entries for 49 passed and 951 limited", len(entries), outcomes)
	}
}
