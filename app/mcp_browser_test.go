package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sacpgw/gateway/internal/browsertest"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
)

// deleteArgs are delete_file's arguments.
type deleteArgs struct {
	Path      string `json:"path"`
	Recursive bool   `json:"recursive"`
	Reason    string `json:"reason"`
}

// deleteServer is an MCP server made with the official Go SDK with one
// tool, delete_file, which its annotations call destructive; it records
// every call it runs.
func deleteServer(t *testing.T) (*httptest.Server, func() []deleteArgs) {
	var mu sync.Mutex
	var ran []deleteArgs
	yes, no := true, false
	s := sdk.NewServer(&sdk.Implementation{Name: "drive", Version: "1"}, nil)
	sdk.AddTool(s, &sdk.Tool{Name: "delete_file",
		Description: "Deletes a file from the shared drive, or with recursive a whole folder. It cannot be undone.",
		Annotations: &sdk.ToolAnnotations{Title: "Delete a file", DestructiveHint: &yes, IdempotentHint: true, OpenWorldHint: &no}},
		func(_ context.Context, _ *sdk.CallToolRequest, in deleteArgs) (*sdk.CallToolResult, any, error) {
			mu.Lock()
			ran = append(ran, in)
			mu.Unlock()
			return &sdk.CallToolResult{Content: []sdk.Content{&sdk.TextContent{Text: "deleted " + in.Path}}}, nil, nil
		})
	srv := httptest.NewServer(sdk.NewStreamableHTTPHandler(func(*http.Request) *sdk.Server { return s }, nil))
	t.Cleanup(srv.Close)
	return srv, func() []deleteArgs {
		mu.Lock()
		defer mu.Unlock()
		return append([]deleteArgs(nil), ran...)
	}
}

// newReviewMCPGateway is the whole gateway (Build) in front of the MCP
// server at url, as "files", with the project's policies (../rego), which
// send a destructive tool to a person; agent coder (token tok-coder) may
// call delete_file, and reviewer ops-lead signs in with tok-ops-lead.
func newReviewMCPGateway(t *testing.T, url string) *a2a {
	t.Helper()
	dir := t.TempDir()
	auditDir := filepath.Join(dir, "audit")
	gw := reviewedGatewayYAML(auditDir, "mcp") + `mcp:
  servers:
    - name: files
      url: ` + url + `
`
	agents := fmt.Sprintf("agents:\n  coder:\n    type: coder\n    token_sha256: %q\n    mcp_tools: {files: [delete_file]}\n", roster.HashTokenHex("tok-coder"))
	return serveApp(t, dir, auditDir, map[string]string{
		config.GatewayFile:  gw,
		config.AgentsFile:   agents,
		config.ProtocolFile: "protocol:\n  redaction:\n    block: [credit_card]\n",
	})
}

// TestMCPReviewPageInChromium: an agent (the official SDK's client) calls
// a tool its server annotates destructiveHint: true through the gateway
// (Build); the policy escalates it. A reviewer signs in on the review page
// in a real headless Chromium and sees the server, the tool, its
// description and annotations (destructiveHint flagged), the arguments as
// redacted (never the e-mail address the agent sent) and what an approval
// lets through, with no script and no console error or
// Content-Security-Policy report; the reviewer approves. Then the same
// call runs once; a second identical call escalates again, and so does a
// call with one argument changed. With UPDATE_SCREENSHOTS=1 it writes
// docs/img/review-mcp.png.
func TestMCPReviewPageInChromium(t *testing.T) {
	b := browsertest.Start(t, browsertest.Skip(t, "the MCP review page"))
	upstream, ran := deleteServer(t)
	g := newReviewMCPGateway(t, upstream.URL)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cs := mustConnect(t, ctx, g, "files", "tok-coder")

	args := map[string]any{"path": "reports/2025/q3-forecast.xlsx", "recursive": false, "reason": "superseded by q3-final; bob@example.com agreed"}
	call := func() (*sdk.CallToolResult, error) {
		return cs.CallTool(ctx, &sdk.CallToolParams{Name: "delete_file", Arguments: args})
	}
	escalated := func() (id, reviewURL string) {
		t.Helper()
		_, err := call()
		e := rpcError(t, err)
		var data struct {
			ID  string `json:"escalation_id"`
			URL string `json:"human_review_url"`
		}
		if e.Code != -32061 || json.Unmarshal(e.Data, &data) != nil || data.ID == "" || !strings.HasSuffix(data.URL, "/review/"+data.ID) {
			t.Fatalf("not escalated: %d %q %s", e.Code, e.Message, e.Data)
		}
		return data.ID, data.URL
	}
	id, reviewURL := escalated()
	if n := len(ran()); n != 0 {
		t.Fatalf("the server ran delete_file %d times before anyone approved", n)
	}

	// approval.base_url is not set, so human_review_url is a path on this
	// gateway; the reviewer follows it and is sent to sign in first.
	for i, step := range []chromedp.Action[chromedp.Void]{
		chromedp.EmulateViewport(1280, 900),
		chromedp.Navigate(g.srv.URL + reviewURL),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), "tok-ops-lead"),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.ID("mcp-server")),
	} {
		if err := chromedp.Do(b.Ctx, step); err != nil {
			t.Fatalf("sign in and open the review page: step %d: %v", i, err)
		}
	}
	for el, want := range map[string]string{
		"mcp-server":      "files",
		"mcp-tool":        "delete_file",
		"mcp-title":       "(Delete a file)",
		"mcp-description": "Deletes a file from the shared drive, or with recursive a whole folder. It cannot be undone.",
		"request-type":    "MCP_TOOL_CALL",
		"agent":           "coder",
	} {
		if got := b.Text(t, el); got != want {
			t.Errorf("#%s %q, want %q", el, got, want)
		}
	}
	if got := b.Text(t, "escalation-reason"); !strings.Contains(got, "destructiveHint") {
		t.Errorf("escalation reason %q", got)
	}

	// What the page shows, read as the browser laid it out.
	type shown struct {
		Flagged, FlaggedBg string
		Hints              []string
		Args               map[string]string
		Grant, Body        string
		Scripts            int
	}
	s, err := chromedp.Run(b.Ctx, chromedp.Evaluate[shown](`(() => {
		const warn = document.querySelectorAll("#mcp-annotations li.hint-warn");
		const args = {};
		for (const row of document.querySelectorAll("#mcp-arguments tr")) {
			args[row.querySelector("th").textContent] = row.querySelector("td").textContent;
		}
		return {
			flagged: warn.length === 1 ? warn[0].textContent : "(" + warn.length + " flagged)",
			flaggedBg: warn.length ? getComputedStyle(warn[0]).backgroundColor : "",
			hints: [...document.querySelectorAll("#mcp-annotations li")].map(li => li.textContent),
			args: args,
			grant: document.getElementById("mcp-grant").textContent,
			body: document.body.innerText,
			scripts: document.scripts.length,
		};
	})()`))
	if err != nil {
		t.Fatalf("read the page: %v", err)
	}
	if s.Flagged != "destructiveHint: truedestructive" || s.FlaggedBg != "rgb(253, 231, 230)" {
		t.Errorf("flagged annotation %q on %s", s.Flagged, s.FlaggedBg)
	}
	for _, want := range []string{"readOnlyHint: false", "idempotentHint: true", "openWorldHint: false"} {
		found := false
		for _, h := range s.Hints {
			found = found || h == want
		}
		if !found {
			t.Errorf("annotations %q lack %q", s.Hints, want)
		}
	}
	wantArgs := map[string]string{
		"path":      `"reports/2025/q3-forecast.xlsx"`,
		"recursive": "false",
		"reason":    `"superseded by q3-final; [REDACTED:email] agreed"`,
	}
	if fmt.Sprint(s.Args) != fmt.Sprint(wantArgs) {
		t.Errorf("arguments %q, want %q", s.Args, wantArgs)
	}
	if strings.Contains(s.Body, "bob@example.com") {
		t.Error("the review page shows the e-mail address the redaction removed")
	}
	if !strings.Contains(s.Grant, "exactly this call (agent coder, the same tool, the same arguments and _meta) through once") {
		t.Errorf("grant line %q", s.Grant)
	}
	if s.Scripts != 0 {
		t.Errorf("%d scripts on the page", s.Scripts)
	}
	if os.Getenv("UPDATE_SCREENSHOTS") == "1" {
		// The decision and the whole tool call down to the arguments'
		// hash: the window is made just tall enough, then restored.
		bottom, err := chromedp.Run(b.Ctx, chromedp.Evaluate[float64](`document.getElementById("mcp-args-sha").getBoundingClientRect().bottom + window.scrollY + 16`))
		if err != nil {
			t.Fatalf("measure the page: %v", err)
		}
		if err := chromedp.Do(b.Ctx, chromedp.EmulateViewport(1280, int64(bottom))); err != nil {
			t.Fatal(err)
		}
		png, err := chromedp.Run(b.Ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		if err := chromedp.Do(b.Ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("../docs/img/review-mcp.png", png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote docs/img/review-mcp.png (%d bytes)", len(png))
	}

	if err := chromedp.Do(b.Ctx,
		chromedp.SendKeys(chromedp.ID("comment"), "Checked: q3-final replaces it."),
		chromedp.Click(chromedp.ID("approve")),
		chromedp.WaitVisible(chromedp.ID("closed")),
	); err != nil {
		t.Fatalf("approve: %v", err)
	}
	if st, rv := b.Text(t, "state"), b.Text(t, "review"); st != "APPROVED" || !strings.Contains(rv, "ops-lead") {
		t.Errorf("after approving: state %q, review %q", st, rv)
	}
	if got := b.Text(t, "mcp-grant"); !strings.Contains(got, "through once, until ") {
		t.Errorf("after approving, grant line %q", got)
	}
	if p := b.Problems(); len(p) > 0 {
		t.Errorf("the pages reported problems:\n%s", strings.Join(p, "\n"))
	}

	// The approved call runs, once.
	res, err := call()
	if err != nil || toolText(res) != "deleted reports/2025/q3-forecast.xlsx" {
		t.Fatalf("the approved call: %v %v", res, err)
	}
	if again, _ := escalated(); again == id {
		t.Error("a second identical call passed on the same approval")
	}
	args["recursive"] = true
	if other, _ := escalated(); other == id {
		t.Error("a call with another argument passed on the approval")
	}
	if got := ran(); len(got) != 1 || got[0].Path != "reports/2025/q3-forecast.xlsx" || got[0].Recursive {
		t.Errorf("the server ran %+v, want the approved call once", got)
	}
}
