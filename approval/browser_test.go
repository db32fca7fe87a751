package approval

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"
)

// chromium finds a Chromium binary: $CHROMIUM, Debian's /usr/bin/chromium,
// or one on PATH.
func chromium() string {
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

// profile returns a fresh --user-data-dir. Not t.TempDir: Chromium's helper
// processes may still write to it for a moment after the browser is
// closed, so removal is retried instead of failing the test.
func profile(t *testing.T) string {
	dir, err := os.MkdirTemp("", "approval-chromium-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for range 50 {
			if os.RemoveAll(dir) == nil {
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Logf("left Chromium profile %s behind", dir)
	})
	return dir
}

// TestReviewPageInChromium drives the review page in a real headless
// Chromium: sign in with a reviewer token, open the escalation, read the
// content and violations, type a comment, approve, see the new state.
func TestReviewPageInChromium(t *testing.T) {
	path := chromium()
	if path == "" {
		t.Skip("SKIPPED: no Chromium binary found, so the review page was NOT tested in a browser " +
			"(install Debian's chromium: apt-get install -y chromium, or set $CHROMIUM)")
	}
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	h := newHarness(t, func(d *Deps) { d.BaseURL = "" })
	content := "Remove docs/architecture/legacy.md <superseded by arch-001>"
	id := escalate(t, h, content)

	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(path),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.UserDataDir(profile(t)),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	bctx, cancelBrowser := chromedp.NewContext(actx)
	defer cancelBrowser()
	// Close the browser gracefully before the allocator kills it.
	defer func() { _ = chromedp.Cancel(bctx) }()
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	defer cancel()

	// text reads an element's text, waiting until it is visible.
	text := func(id string) string {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Text(chromedp.ID(id), chromedp.NodeVisible))
		if err != nil {
			t.Fatalf("read #%s: %v", id, err)
		}
		return v
	}

	// Unauthenticated, the page sends the browser to the sign-in form.
	for i, step := range []chromedp.Action[chromedp.Void]{
		chromedp.Navigate(h.srv.URL + "/review/" + id),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), tokReviewer),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.ID("content")),
	} {
		if err := chromedp.Do(ctx, step); err != nil {
			t.Fatalf("sign in and open the review page: step %d: %v", i, err)
		}
	}
	if got := text("content"); got != content {
		t.Errorf("content %q, want %q", got, content)
	}
	if v := text("violations"); !strings.Contains(v, "risk.escalate") {
		t.Errorf("violations %q", v)
	}
	if r := text("escalation-reason"); !strings.Contains(r, "Risky change") {
		t.Errorf("escalation reason %q", r)
	}
	if s := text("state"); s != "ESCALATED" {
		t.Errorf("state %q", s)
	}

	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{h.srv.URL + "/review/" + id}})
	if err != nil {
		t.Fatalf("read cookies: %v", err)
	}
	cookies := res.Cookies
	if len(cookies) != 1 || cookies[0].Name != cookieName || !cookies[0].HTTPOnly || cookies[0].SameSite != network.CookieSameSiteStrict {
		t.Fatalf("cookies %+v", cookies)
	}
	if strings.Contains(cookies[0].Value, tokReviewer) {
		t.Fatal("the session cookie holds the token")
	}

	err = chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("comment"), "Checked with the owners: safe to remove."),
		chromedp.Click(chromedp.ID("approve")),
		chromedp.WaitVisible(chromedp.ID("closed")),
	)
	if err != nil {
		t.Fatalf("approve: %v", err)
	}
	if s, r := text("state"), text("review"); s != "APPROVED" || !strings.Contains(r, "security-lead") || !strings.Contains(r, "safe to remove") {
		t.Errorf("after approving: state %q review %q", s, r)
	}
	_, st := h.status(tokClaude, id)
	if st.State != StateApproved || st.History[len(st.History)-1].By != "reviewer:security-lead" {
		t.Fatalf("stored state %+v", st)
	}
}
