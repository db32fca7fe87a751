package approval

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// The viewport the review site is designed for: a laptop's browser window.
const viewportW, viewportH = 1280, 900

// screenshotDir is where UPDATE_SCREENSHOTS=1 writes the documentation's
// images (docs/approval.md, docs/operations.md).
const screenshotDir = "../docs/img"

// saveScreenshot writes png to docs/img/name when UPDATE_SCREENSHOTS=1.
func saveScreenshot(t *testing.T, name string, png []byte) {
	t.Helper()
	if os.Getenv("UPDATE_SCREENSHOTS") != "1" {
		return
	}
	if len(png) < 8 || string(png[1:4]) != "PNG" {
		t.Fatalf("%s: not a PNG", name)
	}
	if err := os.MkdirAll(screenshotDir, 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(screenshotDir, name)
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s (%d bytes)", path, len(png))
}

// signInAt opens path at the review site's viewport, is sent to the
// sign-in form, signs in with token and waits for the element waitFor.
func (b *headless) signInAt(t *testing.T, h *harness, path, token, waitFor string) {
	t.Helper()
	for i, step := range []chromedp.Action[chromedp.Void]{
		chromedp.EmulateViewport(viewportW, viewportH),
		chromedp.Navigate(h.srv.URL + path),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.ID(waitFor)),
	} {
		if err := chromedp.Do(b.ctx, step); err != nil {
			t.Fatalf("sign in and open %s: step %d: %v", path, i, err)
		}
	}
}

type box struct {
	Top, Bottom, Left, Right float64
}

// fold is where the page's elements are in the viewport, and how the
// decision buttons are painted.
type fold struct {
	Width, Height            float64
	Boxes                    map[string]box
	ApproveBg, RejectBg      string
	ApproveColor, RejectText string
	ApproveLabel, RejectLbl  string
}

const foldJS = `((ids) => {
	const out = {width: innerWidth, height: innerHeight, boxes: {}};
	for (const id of ids) {
		const el = document.getElementById(id);
		if (!el) continue;
		const r = el.getBoundingClientRect();
		out.boxes[id] = {top: r.top, bottom: r.bottom, left: r.left, right: r.right};
	}
	const cs = (id) => getComputedStyle(document.getElementById(id));
	out.approveBg = cs("approve").backgroundColor; out.rejectBg = cs("reject").backgroundColor;
	out.approveColor = cs("approve").color; out.rejectText = cs("reject").color;
	out.approveLabel = document.getElementById("approve").textContent; out.rejectLbl = document.getElementById("reject").textContent;
	return out;
})(["escalation-reason", "expires", "comment", "approve", "reject"])`

// TestReviewSiteInChromium: at 1280×900 the review page of a change to a
// catalogue specification shows the escalation's reason, its expiry and
// the Approve and Reject buttons without scrolling, the buttons painted
// apart (a filled green Approve, an outlined red Reject, each saying what
// it is), the current text beside the proposal; "All pending
// escalations" opens the queue; sign-out ends the session. No console
// error, no Content-Security-Policy violation. With UPDATE_SCREENSHOTS=1
// it writes docs/img/review-page.png.
func TestReviewSiteInChromium(t *testing.T) {
	path := skipWithoutChromium(t)
	h := newHarness(t, func(d *Deps) { d.BaseURL = "" })
	id := escalateChange(t, h, ActionModify, "arch-001", strings.Join([]string{
		"# Gateway architecture", "",
		"The gateway is a reverse proxy between AI agents and LLM providers, plus the",
		"Librarian approval API of the agent protocol.", "",
		"## Components", "",
		"- **Front doors**: the OpenAI-compatible API (`/v1/*`), the approval API",
		"  (`/agent/*`, `/admin/*`, `/review/*`) and agent messaging (`/relay/*`).",
		"- **Pipeline**: identify → authorize (RBAC) → decide (Rego) → limit → redact →",
		"  forward → redact response → audit, compiled once per route.",
		"- **Policy**: Rego decides; a shadow set is evaluated beside it without effect.",
	}, "\n"), []string{"arch-001", "req-045", "std-001"})

	b := startChromium(t, path)
	b.signInAt(t, h, "/review/"+id, tokReviewer, "approve")
	f, err := chromedp.Run(b.ctx, chromedp.Evaluate[fold](foldJS))
	if err != nil {
		t.Fatalf("measure the page: %v", err)
	}
	if f.Width != viewportW || f.Height != viewportH {
		t.Fatalf("viewport %vx%v, want %dx%d", f.Width, f.Height, viewportW, viewportH)
	}
	for _, el := range []string{"escalation-reason", "expires", "comment", "approve", "reject"} {
		bx, ok := f.Boxes[el]
		if !ok {
			t.Errorf("#%s is not on the page", el)
			continue
		}
		if bx.Top < 0 || bx.Bottom > f.Height || bx.Left < 0 || bx.Right > f.Width || bx.Bottom <= bx.Top {
			t.Errorf("#%s at %+v is not within the %vx%v viewport", el, bx, f.Width, f.Height)
		}
	}
	if f.ApproveBg == f.RejectBg || f.ApproveColor == f.RejectText || f.ApproveBg != "rgb(26, 127, 55)" || f.RejectText != "rgb(180, 35, 24)" {
		t.Errorf("buttons not painted apart: approve %s on %s, reject %s on %s", f.ApproveColor, f.ApproveBg, f.RejectText, f.RejectBg)
	}
	if strings.TrimSpace(f.ApproveLabel) != "Approve" || strings.TrimSpace(f.RejectLbl) != "Reject" {
		t.Errorf("labels %q %q", f.ApproveLabel, f.RejectLbl)
	}
	if cur := b.text(t, "current"); !strings.Contains(cur, "The gateway is a reverse proxy") {
		t.Errorf("current content %q", cur)
	}
	if refs := b.text(t, "references"); !strings.Contains(refs, "arch-001 Gateway architecture") {
		t.Errorf("references %q", refs)
	}
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	saveScreenshot(t, "review-page.png", png)

	// "All pending escalations" opens the queue, not the sign-in form.
	if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.ID("nav-queue")), chromedp.WaitVisible(chromedp.ID("queue"))); err != nil {
		t.Fatalf("open the queue: %v", err)
	}
	if loc, _ := chromedp.Run(b.ctx, chromedp.Location()); !strings.HasSuffix(loc, "/review/queue") {
		t.Errorf("queue at %s", loc)
	}
	if q := b.text(t, "queue"); !strings.Contains(q, id[:12]) {
		t.Errorf("queue %q lacks %s", q, id)
	}

	// Sign out: the sign-in form, and the review page asks again.
	if err := chromedp.Do(b.ctx, chromedp.Click(chromedp.ID("signout")), chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.Navigate(h.srv.URL+"/review/"+id), chromedp.WaitVisible(chromedp.ID("token"))); err != nil {
		t.Fatalf("sign out: %v", err)
	}
	if n := sessionCount(h.store); n != 0 {
		t.Errorf("%d sessions left after signing out", n)
	}
	if p := b.problems(); len(p) > 0 {
		t.Errorf("the pages reported problems:\n%s", strings.Join(p, "\n"))
	}
}

// TestOpsPageInChromium: the operator page at 1280×900 for the admin,
// with its charts drawn as inline SVG, and no console error or
// Content-Security-Policy violation. With UPDATE_SCREENSHOTS=1 it writes
// docs/img/operator-page.png (the whole page).
func TestOpsPageInChromium(t *testing.T) {
	path := skipWithoutChromium(t)
	h := newHarness(t, func(d *Deps) { d.BaseURL = "" })
	sampleOps(h.ops, h.clock.Now())
	escalateChange(t, h, ActionModify, "arch-001", "# Gateway architecture\n\nA new pipeline.", []string{"arch-001"})
	h.clock.Advance(25 * time.Minute)
	escalate(t, h, "Remove docs/architecture/legacy.md: superseded by arch-001.")
	h.clock.Advance(5 * time.Minute)

	b := startChromium(t, path)
	b.signInAt(t, h, "/review/ops", tokAdmin, "agents")
	type charts struct {
		SVGs, Drawn, Scripts int
		Width                float64
	}
	c, err := chromedp.Run(b.ctx, chromedp.Evaluate[charts](`(() => {
		const svgs = [...document.querySelectorAll("svg.bar")];
		return {svgs: svgs.length, scripts: document.scripts.length, width: innerWidth,
			drawn: svgs.filter(s => s.namespaceURI === "http://www.w3.org/2000/svg" && s.getBoundingClientRect().width === 240).length};
	})()`))
	if err != nil {
		t.Fatalf("inspect the charts: %v", err)
	}
	if c.SVGs < 8 || c.Drawn != c.SVGs || c.Scripts != 0 || c.Width != viewportW {
		t.Errorf("charts %+v", c)
	}
	if s := b.text(t, "sum-queue"); s != "2" {
		t.Errorf("escalations waiting %q", s)
	}
	if r := b.text(t, "refusals"); !strings.Contains(r, "203.0.113.7") || !strings.Contains(r, "Incorrect API key provided.") {
		t.Errorf("refusals %q", r)
	}
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	saveScreenshot(t, "operator-page.png", png)
	if p := b.problems(); len(p) > 0 {
		t.Errorf("the page reported problems:\n%s", strings.Join(p, "\n"))
	}
}

// TestReviewDiffInChromium: the change a modify makes to a catalogue entry
// is shown in a real Chromium as marked text, without JavaScript: the
// removed words struck through on red, the added ones underlined on green,
// the kept lines plain, and the agent's markup shown as text. With
// UPDATE_SCREENSHOTS=1 it writes docs/img/review-diff.png.
func TestReviewDiffInChromium(t *testing.T) {
	path := skipWithoutChromium(t)
	h := newHarness(t, func(d *Deps) { d.BaseURL = "" })
	cat, err := LoadCatalogue("../config/specs")
	if err != nil {
		t.Fatal(err)
	}
	arch, _ := cat.Get("arch-001")
	proposed := strings.Replace(arch.Body, "Each stage is small and testable alone.", "Each stage is small, testable alone and timed.", 1) +
		"\n4. Reviewers see <img src=x> marked changes.\n"
	id := escalateChange(t, h, ActionModify, "arch-001", proposed, nil)

	b := startChromium(t, path)
	b.signInAt(t, h, "/review/"+id, tokReviewer, "diff")
	type mark struct{ Text, Decoration, Background string }
	type marks struct {
		Del, Ins        []mark
		Images, Scripts int
		Kept            bool
	}
	m, err := chromedp.Run(b.ctx, chromedp.Evaluate[marks](`(() => {
		const d = document.getElementById("diff");
		const read = (sel) => [...d.querySelectorAll(sel)].map((e) => {
			const cs = getComputedStyle(e);
			return {text: e.textContent, decoration: cs.textDecorationLine, background: cs.backgroundColor};
		});
		return {del: read("del"), ins: read("ins"), images: d.querySelectorAll("img").length,
			scripts: document.scripts.length, kept: d.textContent.includes("# Gateway architecture")};
	})()`))
	if err != nil {
		t.Fatalf("read the diff: %v", err)
	}
	var del, ins []string
	for _, x := range m.Del {
		del = append(del, x.Text)
		if x.Decoration != "line-through" || x.Background != "rgb(253, 231, 230)" {
			t.Errorf("removed %q painted %s on %s", x.Text, x.Decoration, x.Background)
		}
	}
	for _, x := range m.Ins {
		ins = append(ins, x.Text)
		if x.Decoration != "underline" || x.Background != "rgb(220, 245, 220)" {
			t.Errorf("added %q painted %s on %s", x.Text, x.Decoration, x.Background)
		}
	}
	if strings.Join(del, "|") != " and" || strings.Join(ins, "|") != ",| and timed|\n4. Reviewers see <img src=x> marked changes.\n" {
		t.Errorf("removed %q, added %q", del, ins)
	}
	if m.Images != 0 || m.Scripts != 0 || !m.Kept {
		t.Errorf("images %d scripts %d, kept lines shown %v", m.Images, m.Scripts, m.Kept)
	}
	if p := b.problems(); len(p) > 0 {
		t.Errorf("the page reported problems:\n%s", strings.Join(p, "\n"))
	}
	// The screenshot: the page scrolled to the change's heading.
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`(() => { document.getElementById("diff-title").scrollIntoView(); return true; })()`)); err != nil {
		t.Fatal(err)
	}
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	saveScreenshot(t, "review-diff.png", png)
}

// TestPagesOnAPhone: the queue, a review page with a modify's side-by-side
// comparison and the operator page fit a 390px phone screen without
// JavaScript: nothing makes the page scroll sideways (a wide table scrolls
// inside itself).
func TestPagesOnAPhone(t *testing.T) {
	path := skipWithoutChromium(t)
	h := newHarness(t, func(d *Deps) { d.BaseURL = "" })
	sampleOps(h.ops, h.clock.Now())
	id := escalateChange(t, h, ActionModify, "arch-001", "# Gateway architecture\n\nA new pipeline.", []string{"arch-001"})
	b := startChromium(t, path)
	b.ScriptsOff(t)
	if err := chromedp.Do(b.ctx,
		chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
		chromedp.Navigate(h.srv.URL+"/review/queue"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), tokAdmin),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.ID("queue")),
	); err != nil {
		t.Fatalf("sign in on a phone: %v", err)
	}
	for _, p := range []struct{ path, waitFor string }{
		{"/review/queue", "queue"},
		{"/review/" + id, "summary"},
		{"/review/ops", "agents"},
	} {
		if err := chromedp.Do(b.ctx, chromedp.Navigate(h.srv.URL+p.path), chromedp.WaitVisible(chromedp.ID(p.waitFor))); err != nil {
			t.Fatalf("open %s: %v", p.path, err)
		}
		b.FitsPhone(t, p.path)
	}
	if p := b.problems(); len(p) > 0 {
		t.Errorf("the pages reported problems:\n%s", strings.Join(p, "\n"))
	}
}
