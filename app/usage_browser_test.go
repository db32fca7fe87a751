package app

import (
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/sacpgw/gateway/internal/browsertest"
	"github.com/sacpgw/gateway/usagepage"
)

// TestUsagePageOnAPhone: on a phone's 390 px wide screen, the usage page
// (signed in through the review site's form) shows team ds's and its
// agents' charts without a horizontal scroll, every chart within the
// screen, with no console error and no Content-Security-Policy report.
// With UPDATE_SCREENSHOTS=1 it writes docs/img/usage-page.png.
func TestUsagePageOnAPhone(t *testing.T) {
	b := browsertest.Start(t, browsertest.Skip(t, "the usage page"))
	g := newTeamGateway(t, "", t.TempDir())
	for _, agent := range []string{"ds-1", "ds-2", "ds-2", "solo"} {
		if st, msg := teamChat(t, g.srv.URL, agent); st != http.StatusOK {
			t.Fatalf("%s: %d %s", agent, st, msg)
		}
	}
	for i, step := range []chromedp.Action[chromedp.Void]{
		chromedp.EmulateViewport(390, 844),
		chromedp.Navigate(g.srv.URL + usagepage.Path),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), "tok-admin"),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.ID("usage-ds")),
	} {
		if err := chromedp.Do(b.Ctx, step); err != nil {
			t.Fatalf("sign in and open the usage page: step %d: %v", i, err)
		}
	}
	type layout struct {
		Inner, Scroll float64
		Charts        int
		Widest        float64
		Cards         []string
	}
	l, err := chromedp.Run(b.Ctx, chromedp.Evaluate[layout](`(() => {
		const svgs = [...document.querySelectorAll("svg")];
		return {inner: innerWidth, scroll: document.documentElement.scrollWidth, charts: svgs.length,
			widest: Math.max(...svgs.map(s => s.getBoundingClientRect().right)),
			cards: [...document.querySelectorAll("section.card")].map(c => c.id)};
	})()`))
	if err != nil {
		t.Fatalf("measure the page: %v", err)
	}
	if l.Inner != 390 || l.Scroll > l.Inner {
		t.Errorf("page %v px wide in a %v px window: it scrolls sideways", l.Scroll, l.Inner)
	}
	if l.Widest > l.Inner {
		t.Errorf("a chart reaches %v px, past the %v px screen", l.Widest, l.Inner)
	}
	want := []string{"usage-ds", "usage-ds-1", "usage-ds-2", "usage-solo"}
	if len(l.Cards) != len(want) || l.Charts != 3*len(want) {
		t.Errorf("cards %v with %d charts, want %v with 3 each", l.Cards, l.Charts, want)
	}
	if p := b.Problems(); len(p) > 0 {
		t.Errorf("console problems: %v", p)
	}
	if os.Getenv("UPDATE_SCREENSHOTS") == "1" {
		png, err := chromedp.Run(b.Ctx, chromedp.FullScreenshot(100))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join("..", "docs", "img", "usage-page.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
