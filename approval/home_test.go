package approval

import (
	"encoding/json"
	"io"
	"mime"
	"net/http"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

func get(t *testing.T, h *harness, path, accept string) (*http.Response, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodGet, h.srv.URL+path, nil)
	if accept != "" {
		req.Header.Set("Accept", accept)
	}
	c := *h.srv.Client()
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

// GET / is a page for a person: what the gateway is and links to the
// review queue, the operator page, the probes and the API reference; a
// client asking for JSON alone gets the links as JSON; GET /review leads
// to the queue.
func TestHomePage(t *testing.T) {
	h := newHarness(t)
	for _, accept := range []string{"", "*/*", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8", "application/json, text/html"} {
		resp, body := get(t, h, "/", accept)
		if resp.StatusCode != 200 || !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/html") {
			t.Fatalf("Accept %q: %d %s", accept, resp.StatusCode, resp.Header.Get("Content-Type"))
		}
		for _, want := range []string{`href="/review/queue"`, `href="/review/ops"`, `href="/healthz"`, `href="/readyz"`, `href="/metrics"`,
			"docs/reference.md", `name="viewport"`, "https://gw.example.test/v1"} {
			if !strings.Contains(body, want) {
				t.Errorf("Accept %q: the page lacks %s", accept, want)
			}
		}
		if strings.Contains(body, "<script") {
			t.Error("the page has a script")
		}
	}
	resp, body := get(t, h, "/", "application/json")
	var links map[string]string
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/json" || json.Unmarshal([]byte(body), &links) != nil ||
		links["review_queue"] != "/review/queue" || links["health"] != "/healthz" || links["openai_base_url"] != "/v1" {
		t.Errorf("JSON client: %d %s %s", resp.StatusCode, resp.Header.Get("Content-Type"), body)
	}
	for _, p := range []string{"/review", "/review/"} {
		if resp, _ := get(t, h, p, ""); resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/review/queue" {
			t.Errorf("GET %s: %d to %q, want 303 to /review/queue", p, resp.StatusCode, resp.Header.Get("Location"))
		}
	}
	// "/" is that page only, not every path.
	if resp, _ := get(t, h, "/nope", ""); resp.StatusCode != http.StatusNotFound {
		t.Errorf("GET /nope: %d", resp.StatusCode)
	}
}

// In a phone-sized Chromium with JavaScript off, the front page reads
// without sideways scrolling and its review link leads to the sign-in
// form, then to the queue.
func TestHomePageInABrowser(t *testing.T) {
	path := skipWithoutChromium(t)
	h := newHarness(t)
	b := startChromium(t, path)
	b.ScriptsOff(t)
	if err := chromedp.Do(b.ctx,
		chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
		chromedp.Navigate(h.srv.URL+"/"),
		chromedp.WaitVisible(chromedp.ID("home-queue")),
	); err != nil {
		t.Fatalf("open /: %v", err)
	}
	if what := b.text(t, "what"); !strings.Contains(what, "between AI agents and the model providers") {
		t.Errorf("what the gateway is: %q", what)
	}
	if base := b.text(t, "home-base"); !strings.HasSuffix(base, "/v1") {
		t.Errorf("base URL %q", base)
	}
	b.FitsPhone(t, "the front page")
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	saveScreenshot(t, "home-page.png", png)

	// The review link: the sign-in form, then the queue.
	if err := chromedp.Do(b.ctx,
		chromedp.Click(chromedp.ID("home-queue")),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), tokReviewer),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.ID("queue-empty")),
	); err != nil {
		t.Fatalf("follow the review link and sign in: %v", err)
	}
	if loc, _ := chromedp.Run(b.ctx, chromedp.Location()); !strings.HasSuffix(loc, "/review/queue") {
		t.Errorf("the review link led to %s", loc)
	}
	if p := b.problems(); len(p) > 0 {
		t.Errorf("console: %v", p)
	}
}

// wantsJSON reads a client's Accept header: whatever it holds, a list that
// names text/html never gets JSON, and reading never panics.
func FuzzWantsJSON(f *testing.F) {
	for _, s := range []string{"application/json", "text/html", "*/*", "application/json;q=0, text/html", "application/json; charset=utf-8", `a/b; x="`, ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, accept string) {
		got := wantsJSON([]string{accept})
		if got && strings.Contains(strings.ToLower(accept), "text/html") && !strings.Contains(accept, "q=0") {
			// A text/html part that did not parse is not a named type.
			for part := range strings.SplitSeq(accept, ",") {
				if mt, params, err := mime.ParseMediaType(strings.TrimSpace(part)); err == nil && mt == "text/html" && params["q"] != "0" {
					t.Errorf("wantsJSON(%q) = true with text/html named", accept)
				}
			}
		}
	})
}
