package app

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/sacpgw/gateway/internal/browsertest"
)

// TestConsoleKeysInChromium: the admin signs in on the review site, opens
// an agent's console page at 390 px wide, issues a key (shown once, on the
// page the form answers with), the agent calls a model with it, and the
// admin revokes it from the page; the key is refused at once. The pages
// run no script, report no Content-Security-Policy violation and need no
// horizontal scrolling. With UPDATE_SCREENSHOTS=1 it writes
// docs/img/console-keys.png.
func TestConsoleKeysInChromium(t *testing.T) {
	b := browsertest.Start(t, browsertest.Skip(t, "the admin console"))
	g := newA2A(t, a2aOpts{})
	if st, body, _ := g.do(http.MethodPost, "/admin/agents", "tok-admin", `{"name":"page-bot","type":"coder"}`); st != http.StatusCreated {
		t.Fatalf("create: %d %s", st, body)
	}
	steps := []chromedp.Action[chromedp.Void]{
		chromedp.EmulateViewport(390, 844),
		chromedp.Navigate(g.srv.URL + "/review/console/agents/page-bot"),
		chromedp.WaitVisible(chromedp.ID("token")), // not signed in: the sign-in form, which comes back here
		chromedp.SendKeys(chromedp.ID("token"), "tok-admin"),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.ID("no-keys")),
		chromedp.SendKeys(chromedp.ID("expires_in"), "720h"),
		chromedp.Click(chromedp.ID("issue")),
		chromedp.WaitVisible(chromedp.ID("new-key")),
	}
	for i, step := range steps {
		if err := chromedp.Do(b.Ctx, step); err != nil {
			t.Fatalf("sign in and issue a key: step %d: %v", i, err)
		}
	}
	key := strings.TrimSpace(b.Text(t, "new-key"))
	id := strings.TrimSpace(b.Text(t, "new-key-id"))
	if !strings.HasPrefix(key, "gw-key-") || !strings.HasPrefix(id, "key_") {
		t.Fatalf("the page shows key %q id %q", key, id)
	}
	if st, body, _ := g.do(http.MethodPost, "/v1/chat/completions", key, chatBody); st != http.StatusOK {
		t.Fatalf("chat with the key issued on the page: %d %s", st, body)
	}
	type layout struct {
		Wide    bool
		Scripts int
	}
	l, err := chromedp.Run(b.Ctx, chromedp.Evaluate[layout](`({Wide: document.documentElement.scrollWidth > 390, Scripts: document.scripts.length})`))
	if err != nil || l.Wide || l.Scripts != 0 {
		t.Errorf("layout at 390 px: %+v %v (want no horizontal scroll, no script)", l, err)
	}
	if os.Getenv("UPDATE_SCREENSHOTS") == "1" {
		png, err := chromedp.Run(b.Ctx, chromedp.CaptureScreenshot())
		if err == nil {
			err = os.WriteFile(filepath.Join("..", "docs", "img", "console-keys.png"), png, 0o644)
		}
		if err != nil {
			t.Error(err)
		}
	}
	// Revoked from the page: refused at once, and gone from the list.
	for i, step := range []chromedp.Action[chromedp.Void]{
		chromedp.Click(chromedp.ID("revoke-" + id)),
		chromedp.WaitVisible(chromedp.ID("no-keys")),
	} {
		if err := chromedp.Do(b.Ctx, step); err != nil {
			t.Fatalf("revoke: step %d: %v", i, err)
		}
	}
	if st, _, _ := g.do(http.MethodPost, "/v1/chat/completions", key, chatBody); st != http.StatusUnauthorized {
		t.Errorf("the key revoked on the page: %d, want 401", st)
	}
	if len(g.entries("admin.key.revoke")) != 1 {
		t.Error("no admin.key.revoke entry for the page's revocation")
	}
	if p := b.Problems(); len(p) > 0 {
		t.Errorf("the console's pages reported: %v", p)
	}
}
