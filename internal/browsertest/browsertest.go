// Package browsertest runs a headless Chromium for the tests that drive
// the gateway's pages in a real browser (the review site, the MCP
// approval): it finds the binary, skips loudly without one, and collects
// what the pages report to the console. Imported by tests only.
package browsertest

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// Path finds a Chromium binary: $CHROMIUM, Debian's /usr/bin/chromium, or
// one on PATH ("" when there is none).
func Path() string {
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

// Skip returns the Chromium binary, or skips the test loudly, naming what
// was not tested (e.g. "the review page"); it skips in -short mode too.
func Skip(t testing.TB, what string) string {
	t.Helper()
	path := Path()
	if path == "" {
		t.Skip("SKIPPED: no Chromium binary found, so " + what + " was NOT tested in a browser " +
			"(install Debian's chromium: apt-get install -y chromium, or set $CHROMIUM)")
	}
	if testing.Short() {
		t.Skip("browser test skipped in -short mode")
	}
	return path
}

// profile returns a fresh --user-data-dir. Not t.TempDir: Chromium's helper
// processes may still write to it for a moment after the browser is
// closed, so removal is retried instead of failing the test.
func profile(t testing.TB) string {
	dir, err := os.MkdirTemp("", "browsertest-chromium-")
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

// Browser is a headless Chromium for one test, with what its pages wrote
// to the console (console API calls, uncaught exceptions and the browser
// log, where Chromium reports Content-Security-Policy violations).
type Browser struct {
	// Ctx is the browser's context, bounded to 60 seconds.
	Ctx context.Context
	mu  sync.Mutex
	log []chromedp.ConsoleMessage
}

// Start starts Chromium at path; it is closed when the test ends.
func Start(t testing.TB, path string) *Browser {
	t.Helper()
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(),
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
	)
	t.Cleanup(cancelAlloc)
	bctx, cancelBrowser := chromedp.NewContext(actx)
	t.Cleanup(cancelBrowser)
	b := &Browser{}
	messages := chromedp.Console(bctx) // subscribed now, read below
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
	// Close the browser gracefully before the allocator kills it.
	t.Cleanup(func() {
		_ = chromedp.Cancel(bctx)
		<-done
	})
	ctx, cancel := context.WithTimeout(bctx, 60*time.Second)
	t.Cleanup(cancel)
	b.Ctx = ctx
	return b
}

// Problems returns the console messages that are errors, exceptions or
// Content-Security-Policy reports, whatever their level.
func (b *Browser) Problems() []string {
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

// Text reads an element's text, waiting until it is visible.
func (b *Browser) Text(t testing.TB, id string) string {
	t.Helper()
	v, err := chromedp.Run(b.Ctx, chromedp.Text(chromedp.ID(id), chromedp.NodeVisible))
	if err != nil {
		t.Fatalf("read #%s: %v", id, err)
	}
	return v
}

// ScriptsOff turns JavaScript off in the page: every page of the gateway
// must work without it.
func (b *Browser) ScriptsOff(t testing.TB) {
	t.Helper()
	if _, err := chromedp.Call(b.Ctx, emulation.SetScriptExecutionDisabled, emulation.SetScriptExecutionDisabledParams{Value: true}); err != nil {
		t.Fatalf("turn JavaScript off: %v", err)
	}
}

// FitsPhone fails t when the page shown (what) is wider than a 390px
// phone: it would scroll sideways there.
func (b *Browser) FitsPhone(t testing.TB, what string) {
	t.Helper()
	m, err := chromedp.Call(b.Ctx, page.GetLayoutMetrics, cdp.Empty{})
	if err != nil {
		t.Fatalf("layout of %s: %v", what, err)
	}
	if w := m.CSSContentSize.Width; w > 390 {
		t.Errorf("%s is %vpx wide: it scrolls sideways on a 390px phone", what, w)
	}
}
