package app

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sacpgw/gateway/approval"
)

// decideHeld waits for the review of a call of delete_file on path to
// open, then decides it through the approval API as a person would.
func decideHeld(t *testing.T, ctx context.Context, g *a2a, path, decision string) {
	t.Helper()
	for ctx.Err() == nil {
		status, body, _ := g.do(http.MethodGet, "/admin/escalations", "tok-admin", "")
		var list approval.EscalationList
		if status == http.StatusOK && json.Unmarshal(body, &list) == nil {
			for _, it := range list.Escalations {
				if strings.Contains(it.Request.Content, `"path":"`+path+`"`) {
					if status, body, _ := g.do(http.MethodPost, "/admin/escalations/"+it.RequestID+"/decision", "tok-admin",
						`{"decision":"`+decision+`","reviewer":"ops","comment":"seen"}`); status != http.StatusOK {
						t.Errorf("%s: %d %s", decision, status, body)
					}
					return
				}
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("no review of %s opened", path)
}

// TestMCPHeldCalls: on a server with hold, an escalated call waits open
// for the person (the SDK client told of it by progress notifications):
// approved through the approval API, the call runs, once, and its result
// reaches the waiting client; rejected, it fails naming the rejection and
// never runs; undecided past the hold, it fails naming that, and never
// runs.
func TestMCPHeldCalls(t *testing.T) {
	ts := newToolServer(t)
	g := newMCPGateway(t, ts)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var mu sync.Mutex
	var progress []string
	client := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			mu.Lock()
			progress = append(progress, req.Params.Message)
			mu.Unlock()
		}})
	open := func(server string) *sdk.ClientSession {
		cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: g.srv.URL + "/mcp/" + server,
			HTTPClient: &http.Client{Transport: bearer{"tok-coder", http.DefaultTransport}}}, nil)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cs.Close() })
		return cs
	}
	call := func(cs *sdk.ClientSession, path string) (*sdk.CallToolResult, error) {
		p := &sdk.CallToolParams{Name: "delete_file", Arguments: map[string]any{"path": path}}
		p.SetProgressToken("p-" + path)
		return cs.CallTool(ctx, p)
	}
	held := open("files_held")

	t.Run("approved: the waiting call runs and its result arrives", func(t *testing.T) {
		decided := make(chan struct{})
		go func() { defer close(decided); decideHeld(t, ctx, g, "held.txt", "approve") }()
		res, err := call(held, "held.txt")
		<-decided
		if err != nil || toolText(res) != "deleted held.txt" {
			t.Fatalf("the held call: %v %v", res, err)
		}
		if n := len(ts.calls("delete_file")); n != 1 {
			t.Errorf("the server ran %d deletes, want 1", n)
		}
		mu.Lock()
		defer mu.Unlock()
		if !slices.ContainsFunc(progress, func(s string) bool { return strings.HasPrefix(s, "Waiting for a person to approve this call") }) {
			t.Errorf("progress = %q, want the wait announced", progress)
		}
	})
	t.Run("rejected: the call fails naming the rejection and never runs", func(t *testing.T) {
		decided := make(chan struct{})
		go func() { defer close(decided); decideHeld(t, ctx, g, "keep.txt", "reject") }()
		_, err := call(held, "keep.txt")
		<-decided
		if e := rpcError(t, err); e.Code != -32060 || !strings.Contains(e.Message, "rejected") || !strings.Contains(string(e.Data), `"decision":"rejected"`) {
			t.Errorf("error %d %q %s", e.Code, e.Message, e.Data)
		}
	})
	t.Run("undecided past the hold: the call fails naming that and never runs", func(t *testing.T) {
		start := time.Now()
		_, err := call(open("files_brief"), "late.txt")
		if e := rpcError(t, err); e.Code != -32061 || !strings.Contains(e.Message, "No person decided within 1s") ||
			!strings.Contains(string(e.Data), `"decision":"undecided"`) {
			t.Errorf("error %d %q %s", e.Code, e.Message, e.Data)
		}
		if d := time.Since(start); d < time.Second || d > 10*time.Second {
			t.Errorf("held %s, want about the 1s hold", d)
		}
	})
	decisions := map[string]string{}
	for _, e := range g.entries("mcp.call") {
		var sum map[string]any
		_ = json.Unmarshal(e.Summary, &sum)
		if sum["server"] != "files" {
			decisions[str(sum["server"])+" "+str(sum["decision"])] = str(sum["held"])
		}
	}
	for _, want := range []string{"files_held approved", "files_held rejected", "files_brief undecided"} {
		if _, ok := decisions[want]; !ok {
			t.Errorf("the trail's held calls %v lack %q", decisions, want)
		}
	}
	for _, c := range ts.calls("delete_file") {
		if c["path"] != "held.txt" {
			t.Errorf("the server ran a call no one approved: %v", c)
		}
	}
}
