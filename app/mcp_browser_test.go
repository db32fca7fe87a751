package app

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sacpgw/gateway/config"
)

// The approval package's headless-Chromium helpers live in its test files,
// which another package cannot import; these are the few this test needs,
// the same way round: find the binary, skip loudly without one, collect
// what the pages report to the console.

// mcpChromium finds a Chromium binary: $CHROMIUM, Debian's
// /usr/bin/chromium, or one on PATH.
func mcpChromium() string {
	if p := os.Getenv("CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"/usr/bin/chromium", "chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// mcpBrowser is a headless Chromium for one test, with its console's
// errors, exceptions and Content-Security-Policy reports.
type mcpBrowser struct {
	ctx context.Context
	mu  sync.Mutex
	log []chromedp.ConsoleMessage
}

func startMCPBrowser(t *testing.T) *mcpBrowser {
	t.Helper()
	path := mcpChromium()
	if path == "" {
		t.Skip("SKIPPED: no Chromium binary found, so the MCP review page was NOT tested in a browser " +
			"(install Debian's chromium: apt-get install -y chromium, or set $CHROMIUM)")
	}
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	// Not t.TempDir: Chromium's helpers may write to the profile for a
	// moment after the browser closed, so removal is retried instead.
	profile, err := os.MkdirTemp("", "app-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for range 50 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("left Chromium profile %s behind", profile)
	})
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
		chromedp.ExecPath(path), chromedp.Flag("headless", true), chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true), chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true), chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true), chromedp.UserDataDir(profile))
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	b := &mcpBrowser{}
	messages := chromedp.Console(bctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for m, err := range messages {
			if err != nil {
				return
			}
			b.mu.Lock()
			b.log = append(b.log, m)
			b.mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		_ = chromedp.Cancel(bctx)
		<-done
	})
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	t.Cleanup(cancel)
	b.ctx = ctx
	return b
}

func (b *mcpBrowser) problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, m := range b.log {
		if m.Type == chromedp.ConsoleError || m.IsException() || strings.Contains(m.Text, "Content Security Policy") {
			out = append(out, m.String())
		}
	}
	return out
}

func (b *mcpBrowser) text(t *testing.T, id string) string {
	t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.ID(id), chromedp.NodeVisible))
	if err != nil {
		t.Fatalf("read #%s: %v", id, err)
	}
	return v
}

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
	gw := `listen: "127.0.0.1:0"
admin:
  token_sha256: "` + config.HashTokenHex("tok-admin") + `"
  reviewers:
    - name: ops-lead
      token_sha256: "` + config.HashTokenHex("tok-ops-lead") + `"
upstreams:
  - {name: mock, type: mock, models: ["*"]}
policy:
  dir: ` + policyDir(a2aOpts{}) + `
audit:
  dir: ` + auditDir + `
  chain: mcp
mcp:
  servers:
    - name: files
      url: ` + url + `
`
	agents := fmt.Sprintf("agents:\n  coder:\n    type: coder\n    token_sha256: %q\n    mcp_tools: {files: [delete_file]}\n", config.HashTokenHex("tok-coder"))
	_, a, auditLog := buildFromFiles(t, dir, map[string]string{
		config.GatewayFile:  gw,
		config.AgentsFile:   agents,
		config.ProtocolFile: "protocol:\n  redaction:\n    block: [credit_card]\n",
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	srv := httptest.NewServer(a.server.Handler())
	t.Cleanup(func() {
		srv.Close()
		cancel()
		<-done
		a.Close()
		auditLog.Close()
	})
	return &a2a{t: t, srv: srv, app: a, auditDir: auditDir, dir: dir}
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
	b := startMCPBrowser(t)
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
		if err := chromedp.Do(b.ctx, step); err != nil {
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
		if got := b.text(t, el); got != want {
			t.Errorf("#%s %q, want %q", el, got, want)
		}
	}
	if got := b.text(t, "escalation-reason"); !strings.Contains(got, "destructiveHint") {
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
	s, err := chromedp.Run(b.ctx, chromedp.Evaluate[shown](`(() => {
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
	if !strings.Contains(s.Grant, "exactly this call (agent coder, the same tool and the same arguments) through once") {
		t.Errorf("grant line %q", s.Grant)
	}
	if s.Scripts != 0 {
		t.Errorf("%d scripts on the page", s.Scripts)
	}
	if os.Getenv("UPDATE_SCREENSHOTS") == "1" {
		// The decision and the whole tool call down to the arguments'
		// hash: the window is made just tall enough, then restored.
		bottom, err := chromedp.Run(b.ctx, chromedp.Evaluate[float64](`document.getElementById("mcp-args-sha").getBoundingClientRect().bottom + window.scrollY + 16`))
		if err != nil {
			t.Fatalf("measure the page: %v", err)
		}
		if err := chromedp.Do(b.ctx, chromedp.EmulateViewport(1280, int64(bottom))); err != nil {
			t.Fatal(err)
		}
		png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
		if err != nil {
			t.Fatalf("screenshot: %v", err)
		}
		if err := chromedp.Do(b.ctx, chromedp.EmulateViewport(1280, 900)); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile("../docs/img/review-mcp.png", png, 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote docs/img/review-mcp.png (%d bytes)", len(png))
	}

	if err := chromedp.Do(b.ctx,
		chromedp.SendKeys(chromedp.ID("comment"), "Checked: q3-final replaces it."),
		chromedp.Click(chromedp.ID("approve")),
		chromedp.WaitVisible(chromedp.ID("closed")),
	); err != nil {
		t.Fatalf("approve: %v", err)
	}
	if st, rv := b.text(t, "state"), b.text(t, "review"); st != "APPROVED" || !strings.Contains(rv, "ops-lead") {
		t.Errorf("after approving: state %q, review %q", st, rv)
	}
	if got := b.text(t, "mcp-grant"); !strings.Contains(got, "through once, until ") {
		t.Errorf("after approving, grant line %q", got)
	}
	if p := b.problems(); len(p) > 0 {
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
