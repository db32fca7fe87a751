package mcp

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/policy"
)

// fakeServer is a minimal MCP server answering JSON: initialize, the
// notifications, tools/list from tools, tools/call echoing the tool's
// name, and whatever answer overrides.
type fakeServer struct {
	mu    sync.Mutex
	tools string // the tools/list result's tools array
	// answer, when set, answers a tools/call in place of the echo.
	answer func(w http.ResponseWriter, id string)
	calls  int
	// lists counts the tools/list requests (the gateway's reads).
	lists int
	// got are the bodies of every request but initialize and tools/list,
	// as the server received them.
	got []string
}

func (f *fakeServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var m struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			Name string `json:"name"`
		} `json:"params"`
	}
	_ = json.Unmarshal(body, &m)
	f.mu.Lock()
	defer f.mu.Unlock()
	if m.Method != "initialize" && m.Method != "tools/list" {
		f.got = append(f.got, string(body))
	}
	w.Header().Set("Content-Type", "application/json")
	switch m.Method {
	case "initialize":
		w.Header().Set("Mcp-Session-Id", "up-1")
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"protocolVersion":"2025-06-18","capabilities":{},"serverInfo":{"name":"f","version":"1"}}}`)
	case "tools/list":
		f.lists++
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"tools":`+f.tools+`}}`)
	case "tools/call":
		f.calls++
		if f.answer != nil {
			f.answer(w, string(m.ID))
			return
		}
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"content":[{"type":"text","text":"ran `+m.Params.Name+`"}]}}`)
	default:
		w.WriteHeader(http.StatusAccepted)
	}
}

// fakePolicy answers every decision with d.
type fakePolicy struct{ d policy.MCPDecision }

func (p fakePolicy) MCP(context.Context, map[string]any) (policy.MCPDecision, error) { return p.d, nil }

type doorTest struct {
	t    *testing.T
	srv  *httptest.Server
	up   *fakeServer
	sess string
}

// newDoorTest is a door in front of a fake server "files", for agent
// "a1" whose mcp_tools are ["read_*"], under policy p.
func newDoorTest(t *testing.T, p Decider) *doorTest {
	up := &fakeServer{tools: `[{"name":"read_file","inputSchema":{"type":"object"}},{"name":"rm","annotations":{"destructiveHint":true}}]`}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	agent := &roster.Agent{ID: "a1", MaxRequestSize: 1 << 20, MCPTools: map[string][]string{"files": {"read_*"}}}
	cfg := &config.Config{Agents: map[string]*roster.Agent{"a1": agent}}
	cfg.Gateway.MCP.Servers = []config.MCPServer{{Name: "files", URL: upSrv.URL, Timeout: config.Duration(5e9)}}
	d, err := New(Deps{Config: cfg, Policy: p, Limiter: limit.NewMemory(), Log: discard()})
	if err != nil {
		t.Fatal(err)
	}
	dt := serveDoor(t, d, agent, up)
	return dt
}

// serveDoor serves d to agent (as the front door's identity stage would
// leave the request) and opens a session: the test harnesses' one start.
func serveDoor(t *testing.T, d *Door, agent *roster.Agent, up *fakeServer) *doorTest {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = scope.Attach(r, &scope.Exchange{RequestID: "req-1", Agent: agent})
		r.SetPathValue("server", strings.TrimPrefix(r.URL.Path, "/mcp/"))
		d.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	dt := &doorTest{t: t, srv: srv, up: up}
	status, body, h := dt.post(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if dt.sess = h.Get("Mcp-Session-Id"); status != http.StatusOK || dt.sess == "" {
		t.Fatalf("initialize: %d %s", status, body)
	}
	return dt
}

func (dt *doorTest) post(body string) (int, string, http.Header) {
	dt.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, dt.srv.URL+"/mcp/files", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if dt.sess != "" {
		req.Header.Set("Mcp-Session-Id", dt.sess)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		dt.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out), resp.Header
}

// code is the JSON-RPC error code of an answer, JSON or a stream (0:
// none).
func code(t *testing.T, body string) int {
	t.Helper()
	if strings.HasPrefix(body, "event: ") {
		// A stream: its last message is the response.
		i := strings.LastIndex(body, "data: ")
		body = strings.TrimSpace(body[i+len("data: "):])
	}
	var m struct {
		Error *struct{ Code int } `json:"error"`
	}
	if err := json.Unmarshal([]byte(body), &m); err != nil {
		t.Fatalf("answer %q: %v", body, err)
	}
	if m.Error == nil {
		return 0
	}
	return m.Error.Code
}

// TestBothMustAllow: a policy that allows everything opens no tool the
// agent's mcp_tools keep shut; a policy that fails closed, or escalates
// without an approval service, lets nothing through.
func TestBothMustAllow(t *testing.T) {
	cases := []struct {
		note string
		d    policy.MCPDecision
		tool string
		want int
	}{
		{"allowed by both", policy.MCPDecision{Decision: policy.MCPAllow}, "read_file", 0},
		{"outside mcp_tools, the policy allows", policy.MCPDecision{Decision: policy.MCPAllow}, "rm", codeDenied},
		{"outside mcp_tools, the policy escalates", policy.MCPDecision{Decision: policy.MCPEscalate}, "rm", codeDenied},
		{"the policy failed closed", policy.MCPDecision{Decision: policy.MCPDeny, FailClosed: true, Reason: "the MCP policy could not decide"}, "read_file", codeDenied},
		{"an escalation without approvals", policy.MCPDecision{Decision: policy.MCPEscalate}, "read_file", codeDenied},
		{"a tool the server does not list", policy.MCPDecision{Decision: policy.MCPAllow}, "read_nothing", codeInvalidParams},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			dt := newDoorTest(t, fakePolicy{tc.d})
			_, body, _ := dt.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"` + tc.tool + `","arguments":{}}}`)
			if got := code(t, body); got != tc.want {
				t.Errorf("code %d, want %d: %s", got, tc.want, body)
			}
			if want := map[bool]int{true: 1, false: 0}[tc.want == 0]; dt.up.calls != want {
				t.Errorf("the server ran %d calls, want %d", dt.up.calls, want)
			}
		})
	}
}

// TestRefusedShapes: what the door does not know is refused before any
// call, with the JSON-RPC error that says why.
func TestRefusedShapes(t *testing.T) {
	dt := newDoorTest(t, fakePolicy{policy.MCPDecision{Decision: policy.MCPAllow}})
	cases := []struct {
		note, body string
		status     int
		code       int
	}{
		{"a task would take the result past the gateway", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{},"task":{"ttl":1}}}`, 200, codeInvalidParams},
		{"arguments that are no object", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":[1]}}`, 200, codeInvalidParams},
		{"an unknown method", `{"jsonrpc":"2.0","id":1,"method":"sampling/createMessage","params":{}}`, 200, codeMethodNotFound},
		{"the stateless revision's discovery", `{"jsonrpc":"2.0","id":1,"method":"server/discover","params":{}}`, 200, codeMethodNotFound},
		{"unknown members of a read", `{"jsonrpc":"2.0","id":1,"method":"resources/read","params":{"uri":"f://a","extra":1}}`, 200, codeInvalidParams},
		{"an unknown notification", `{"jsonrpc":"2.0","method":"sampling/x"}`, 400, codeInvalidRequest},
		{"initialize in a batch", `[{"jsonrpc":"2.0","id":1,"method":"initialize","params":{}}]`, 400, codeInvalidRequest},
		{"a duplicate name", `{"jsonrpc":"2.0","id":1,"id":1,"method":"ping"}`, 400, codeParse},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			status, body, _ := dt.post(tc.body)
			if status != tc.status || code(t, body) != tc.code {
				t.Errorf("%d %s, want %d and code %d", status, body, tc.status, tc.code)
			}
		})
	}
	if dt.up.calls != 0 {
		t.Errorf("the server ran %d calls", dt.up.calls)
	}
}

// TestBatchAndNotifications: a batch is answered as one JSON array, in
// order, a gateway refusal among the server's answers; notifications
// alone are 202.
func TestBatchAndNotifications(t *testing.T) {
	dt := newDoorTest(t, fakePolicy{policy.MCPDecision{Decision: policy.MCPAllow}})
	status, body, _ := dt.post(`[{"jsonrpc":"2.0","id":"a","method":"tools/call","params":{"name":"read_file"}},` +
		`{"jsonrpc":"2.0","method":"notifications/progress","params":{}},{"jsonrpc":"2.0","id":"b","method":"tools/call","params":{"name":"rm"}}]`)
	var out []struct {
		ID    string
		Error *struct{ Code int }
	}
	if err := json.Unmarshal([]byte(body), &out); err != nil || status != 200 || len(out) != 2 ||
		out[0].ID != "a" || out[0].Error != nil || out[1].ID != "b" || out[1].Error == nil || out[1].Error.Code != codeDenied {
		t.Errorf("%d %s", status, body)
	}
	if status, _, _ := dt.post(`{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"a"}}`); status != http.StatusAccepted {
		t.Errorf("a notification: %d", status)
	}
}

// TestServerAnswersChecked: an answer the gateway cannot read, or that
// answers another request, is not passed on.
func TestServerAnswersChecked(t *testing.T) {
	for _, tc := range []struct{ note, answer string }{
		{"not JSON-RPC", `{"jsonrpc":"2.0","id":%s,"result":{"a":1,"a":2}}`},
		{"another request's answer", `{"jsonrpc":"2.0","id":"other","result":{}}`},
	} {
		t.Run(tc.note, func(t *testing.T) {
			dt := newDoorTest(t, fakePolicy{policy.MCPDecision{Decision: policy.MCPAllow}})
			dt.up.answer = func(w http.ResponseWriter, id string) {
				_, _ = io.WriteString(w, strings.ReplaceAll(tc.answer, "%s", id))
			}
			_, body, _ := dt.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file"}}`)
			if code(t, body) != codeUpstream || strings.Contains(body, `"a":2`) {
				t.Errorf("answer %s", body)
			}
		})
	}
}

// TestListChangedRereads: a server that says its tool list changed, on the
// stream of a call's answer, is read again before the next call is
// decided; without it, the list is kept.
func TestListChangedRereads(t *testing.T) {
	dt := newDoorTest(t, fakePolicy{policy.MCPDecision{Decision: policy.MCPAllow}})
	call := func() {
		t.Helper()
		if _, body, _ := dt.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file"}}`); code(t, body) != 0 {
			t.Fatalf("call: %s", body)
		}
	}
	call()
	call()
	if dt.up.lists != 1 {
		t.Fatalf("%d reads of the list for two calls", dt.up.lists)
	}
	dt.up.answer = func(w http.ResponseWriter, id string) {
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = io.WriteString(w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/tools/list_changed\"}\n\n"+
			"data: {\"jsonrpc\":\"2.0\",\"id\":"+id+",\"result\":{\"content\":[]}}\n\n")
	}
	call()
	dt.up.answer = nil
	call()
	if dt.up.lists != 2 {
		t.Errorf("%d reads of the list, want 2: list_changed must make the gateway read it again", dt.up.lists)
	}
}
