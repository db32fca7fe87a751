package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sacpgw/gateway/internal/browsertest"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
)

// newHeldMCPGateway is the whole gateway (Build) in front of the MCP
// server at url twice: "drive", whose escalated calls are held open for a
// person up to a minute, and "drive_brief", held 2 seconds; agent coder
// (tok-coder) may call delete_file on both, reviewer ops-lead signs in
// with tok-ops-lead.
func newHeldMCPGateway(t *testing.T, url string) *a2a {
	t.Helper()
	dir := t.TempDir()
	auditDir := filepath.Join(dir, "audit")
	gw := reviewedGatewayYAML(auditDir, "mcp") + `  fail_mode: closed
mcp:
  servers:
    - name: drive
      url: ` + url + `
      hold: 60s
    - name: drive_brief
      url: ` + url + `
      hold: 2s
`
	agents := fmt.Sprintf("agents:\n  coder:\n    type: coder\n    token_sha256: %q\n    mcp_tools: {drive: [delete_file], drive_brief: [delete_file]}\n",
		roster.HashTokenHex("tok-coder"))
	return serveApp(t, dir, auditDir, map[string]string{
		config.GatewayFile:  gw,
		config.AgentsFile:   agents,
		config.ProtocolFile: "protocol:\n  redaction:\n    block: [credit_card]\n",
	})
}

// heldCall is a tools/call of delete_file the agent made and still waits
// for, with the progress messages the gateway sent it meanwhile.
type heldCall struct {
	progress chan string
	done     chan heldResult
}

type heldResult struct {
	res *sdk.CallToolResult
	err error
}

// callHeld connects the agent to server (the official SDK's client) and
// starts a delete_file of path with a progress token; it returns at once.
func callHeld(t *testing.T, ctx context.Context, g *a2a, server, path string) *heldCall {
	t.Helper()
	h := &heldCall{progress: make(chan string, 64), done: make(chan heldResult, 1)}
	client := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "1"}, &sdk.ClientOptions{
		ProgressNotificationHandler: func(_ context.Context, req *sdk.ProgressNotificationClientRequest) {
			select {
			case h.progress <- req.Params.Message:
			default:
			}
		}})
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: g.srv.URL + "/mcp/" + server,
		HTTPClient: &http.Client{Transport: bearer{"tok-coder", http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatalf("connect to %s: %v", server, err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	p := &sdk.CallToolParams{Name: "delete_file", Arguments: map[string]any{"path": path, "recursive": false, "reason": "asked by bob@example.com"}}
	p.SetProgressToken("p-" + path)
	go func() {
		res, err := cs.CallTool(ctx, p)
		h.done <- heldResult{res, err}
	}()
	return h
}

// reviewPath waits for the first progress notification of the held call
// and returns the review page it names (the gateway has no base_url, so a
// path on it).
func (h *heldCall) reviewPath(t *testing.T, ctx context.Context) string {
	t.Helper()
	select {
	case msg := <-h.progress:
		i := strings.LastIndex(msg, "/review/")
		if !strings.HasPrefix(msg, "Waiting for a person to approve this call") || i < 0 {
			t.Fatalf("progress %q names no review page", msg)
		}
		return msg[i:]
	case r := <-h.done:
		t.Fatalf("the call ended before any progress: %v %v", r.res, r.err)
	case <-ctx.Done():
		t.Fatal("no progress notification while the call waits")
	}
	return ""
}

// result waits for the call's answer.
func (h *heldCall) result(t *testing.T, ctx context.Context) heldResult {
	t.Helper()
	select {
	case r := <-h.done:
		return r
	case <-ctx.Done():
		t.Fatal("the held call never ended")
	}
	return heldResult{}
}

// TestMCPHeldCallDecidedInChromium: an agent (the official SDK's client)
// calls a destructive tool on a server whose escalated calls are held;
// its call stays open, told by progress notifications where a person
// decides. A reviewer opens that page in headless Chromium on a 390 px
// phone without JavaScript, sees who waits and how long is left, the
// server, the tool and the arguments as redacted, and approves: the
// waiting call gets the tool's result. A second call is rejected on the
// page and fails naming the rejection; a third, on a server that holds
// 2 seconds, fails naming the expired hold, and its page then says the
// agent no longer waits. The server ran only the approved call; the
// trail says what was decided for each, and by whom.
func TestMCPHeldCallDecidedInChromium(t *testing.T) {
	b := browsertest.Start(t, browsertest.Skip(t, "a held MCP call decided on the review page"))
	upstream, ran := deleteServer(t)
	g := newHeldMCPGateway(t, upstream.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	b.ScriptsOff(t)
	signedIn := false
	open := func(path string) {
		t.Helper()
		steps := []chromedp.Action[chromedp.Void]{chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile), chromedp.Navigate(g.srv.URL + path)}
		if !signedIn {
			steps = append(steps, chromedp.WaitVisible(chromedp.ID("token")), chromedp.SendKeys(chromedp.ID("token"), "tok-ops-lead"), chromedp.Click(chromedp.ID("signin")))
			signedIn = true
		}
		steps = append(steps, chromedp.WaitVisible(chromedp.ID("mcp-server")))
		for i, step := range steps {
			if err := chromedp.Do(b.Ctx, step); err != nil {
				t.Fatalf("open %s: step %d: %v", path, i, err)
			}
		}
	}
	decide := func(button, comment string) {
		t.Helper()
		if err := chromedp.Do(b.Ctx,
			chromedp.SendKeys(chromedp.ID("comment"), comment),
			chromedp.Click(chromedp.ID(button)),
			chromedp.WaitVisible(chromedp.ID("closed")),
		); err != nil {
			t.Fatalf("%s: %v", button, err)
		}
	}

	// Approved on the page while the agent waits.
	approved := callHeld(t, ctx, g, "drive", "reports/q3.xlsx")
	reviewURL := approved.reviewPath(t, ctx)
	open(reviewURL)
	for el, want := range map[string]string{"mcp-server": "drive", "mcp-tool": "delete_file", "agent": "coder"} {
		if got := b.Text(t, el); got != want {
			t.Errorf("#%s %q, want %q", el, got, want)
		}
	}
	if got := b.Text(t, "mcp-held"); !strings.Contains(got, "The agent coder is waiting for this decision") {
		t.Errorf("#mcp-held %q", got)
	}
	if got := b.Text(t, "mcp-held-left"); !strings.HasSuffix(got, " left") || got == "0 s left" {
		t.Errorf("time left %q", got)
	}
	if got := b.Text(t, "outcomes"); !strings.Contains(got, "the call runs now and its result goes to the waiting agent") {
		t.Errorf("outcomes %q", got)
	}
	if got := b.Text(t, "mcp-arguments"); !strings.Contains(got, "[REDACTED:email]") || strings.Contains(got, "bob@example.com") {
		t.Errorf("arguments shown %q, want them redacted", got)
	}
	b.FitsPhone(t, "the held call's review page")
	if n := len(ran()); n != 0 {
		t.Fatalf("the server ran %d deletes before anyone decided", n)
	}
	decide("approve", "Checked: superseded.")
	r := approved.result(t, ctx)
	if r.err != nil || toolText(r.res) != "deleted reports/q3.xlsx" {
		t.Fatalf("the approved held call: %q %v", toolText(r.res), r.err)
	}
	approvedID := strings.TrimPrefix(reviewURL, "/review/")

	// Rejected on the page: the waiting agent is told at once.
	rejected := callHeld(t, ctx, g, "drive", "reports/keep.xlsx")
	rejectedURL := rejected.reviewPath(t, ctx)
	open(rejectedURL)
	decide("reject", "Keep it.")
	r = rejected.result(t, ctx)
	if e := rpcError(t, r.err); e.Code != -32060 || !strings.Contains(e.Message, "rejected") || !strings.Contains(string(e.Data), `"decision":"rejected"`) {
		t.Errorf("rejected: error %d %q %s", e.Code, e.Message, e.Data)
	}

	// Past the hold: the agent is told the hold expired; the page then
	// says it no longer waits.
	late := callHeld(t, ctx, g, "drive_brief", "reports/late.xlsx")
	lateURL := late.reviewPath(t, ctx)
	r = late.result(t, ctx)
	if e := rpcError(t, r.err); e.Code != -32061 || !strings.Contains(e.Message, "hold expired") || !strings.Contains(string(e.Data), `"decision":"undecided"`) {
		t.Errorf("past the hold: error %d %q %s", e.Code, e.Message, e.Data)
	}
	open(lateURL)
	if got := b.Text(t, "mcp-held"); !strings.Contains(got, "it no longer waits") {
		t.Errorf("after the hold, #mcp-held %q", got)
	}
	if p := b.Problems(); len(p) > 0 {
		t.Errorf("the pages reported problems:\n%s", strings.Join(p, "\n"))
	}

	if got := ran(); len(got) != 1 || got[0].Path != "reports/q3.xlsx" {
		t.Errorf("the server ran %+v, want only the approved call", got)
	}
	checkHeldTrail(t, g, map[string]string{
		approvedID: "approved",
		strings.TrimPrefix(rejectedURL, "/review/"): "rejected",
		strings.TrimPrefix(lateURL, "/review/"):     "undecided",
	})
}

// checkHeldTrail checks the audit trail of held calls: each escalation's
// mcp.call entry holds the decision want names for it and how long it was
// held; the people's decisions are escalation.decision entries by
// ops-lead on the review page; only the approved call has an mcp.result.
func checkHeldTrail(t *testing.T, g *a2a, want map[string]string) {
	t.Helper()
	got := map[string]string{}
	for _, e := range g.entries("mcp.call") {
		var sum map[string]any
		_ = json.Unmarshal(e.Summary, &sum)
		if id := str(sum["escalation_id"]); id != "" && str(sum["held"]) != "" {
			got[id] = str(sum["decision"])
		}
	}
	for id, decision := range want {
		if got[id] != decision {
			t.Errorf("mcp.call of escalation %s: decision %q, want %q (all: %v)", id, got[id], decision, got)
		}
	}
	reviewed := map[string]string{}
	for _, e := range g.entries("escalation.decision") {
		var sum map[string]any
		_ = json.Unmarshal(e.Summary, &sum)
		if str(sum["reviewer"]) == "reviewer:ops-lead" && str(sum["via"]) == "review_page" {
			reviewed[e.RequestID] = str(sum["decision"])
		}
	}
	results := g.entries("mcp.result")
	for id, decision := range want {
		if decision == "undecided" {
			if _, ok := reviewed[id]; ok {
				t.Errorf("escalation %s: a person's decision in the trail, want none", id)
			}
			continue
		}
		if verb := map[string]string{"approved": "approve", "rejected": "reject"}[decision]; reviewed[id] != verb {
			t.Errorf("escalation %s: ops-lead's decision on the review page %q in the trail, want %q", id, reviewed[id], verb)
		}
	}
	if len(results) != 1 {
		t.Errorf("%d mcp.result entries, want 1 (the approved call's)", len(results))
	}
}
