package approval

import (
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"testing"
	"time"
)

// The review page's "All pending escalations" leads to a page for people:
// the queue, behind the review session (it used to point at the sign-in
// address, and people reach /admin/escalations, the JSON API, only with a
// bearer token a browser does not send).
func TestReviewQueuePage(t *testing.T) {
	h := newHarness(t)
	first := escalate(t, h, "Remove the legacy architecture document.")
	h.clock.Advance(90 * time.Minute)
	second := escalate(t, h, "Replace the gateway design.")

	anon := newBrowser(t, h)
	if res, _ := anon.get("/review/queue"); res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/review/login?next=%2Freview%2Fqueue" {
		t.Fatalf("anonymous: %d %s", res.StatusCode, res.Header.Get("Location"))
	}

	b := newBrowser(t, h)
	b.post("/review/login", url.Values{"token": {tokReviewer}}, "")
	_, page := b.get("/review/" + first)
	if !strings.Contains(page, `<a href="/review/queue" id="nav-queue">All pending escalations</a>`) {
		t.Fatalf("the review page does not link the queue: %s", page)
	}
	res, body := b.get("/review/queue")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("queue: %d %s", res.StatusCode, body)
	}
	i, j := strings.Index(body, `href="/review/`+first+`"`), strings.Index(body, `href="/review/`+second+`"`)
	if i < 0 || j < 0 || i > j {
		t.Fatalf("the queue does not list both, oldest first: %s", body)
	}
	for _, want := range []string{"Pending escalations (2)", "1 h 30 min", "(in 22 h 30 min)", `action="/review/logout"`, "Signed in as <b id=\"who\">security-lead</b> (reviewer)"} {
		if !strings.Contains(body, want) {
			t.Errorf("queue lacks %q", want)
		}
	}
	// The sign-in address still shows the queue to a signed-in person.
	if _, body := b.get("/review/login"); !strings.Contains(body, "Pending escalations (2)") {
		t.Errorf("/review/login signed in: %s", body)
	}
}

// Sign-out ends the session in the store, so the cookie is worthless
// afterwards even to whoever kept a copy; it takes the session's CSRF
// token and the page's origin, like the decision form.
func TestReviewLogout(t *testing.T) {
	h := newHarness(t, func(d *Deps) { d.BaseURL = "" })
	id := escalate(t, h, "x")
	b := newBrowser(t, h)
	b.post("/review/login", url.Values{"token": {tokReviewer}}, "")
	_, body := b.get("/review/" + id)
	m := csrfField.FindStringSubmatch(body)
	if m == nil || !strings.Contains(body, `id="signout"`) {
		t.Fatalf("no sign-out form: %s", body)
	}
	u, _ := url.Parse(h.srv.URL + "/review/")
	cookie := b.client.Jar.Cookies(u)[0].Value

	for name, c := range map[string]struct {
		form   url.Values
		origin string
	}{
		"no token":     {url.Values{}, ""},
		"wrong token":  {url.Values{"csrf": {strings.Repeat("0", 64)}}, ""},
		"cross-origin": {url.Values{"csrf": {m[1]}}, "https://evil.example"},
	} {
		res, _ := b.post("/review/logout", c.form, c.origin)
		if res.StatusCode != http.StatusForbidden {
			t.Errorf("%s: %d", name, res.StatusCode)
		}
	}
	if n := sessionCount(h.store); n != 1 {
		t.Fatalf("a refused sign-out ended the session (%d left)", n)
	}

	res, _ := b.post("/review/logout", url.Values{"csrf": {m[1]}}, h.srv.URL)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/review/login" {
		t.Fatalf("sign-out: %d %v", res.StatusCode, res.Header)
	}
	if c := res.Cookies(); len(c) != 1 || c[0].Name != cookieName || c[0].MaxAge >= 0 || c[0].Value != "" || !c[0].HttpOnly {
		t.Errorf("cookie not cleared: %+v", c)
	}
	if n := sessionCount(h.store); n != 0 {
		t.Errorf("%d sessions left in the store", n)
	}
	// The old cookie, replayed, no longer signs anyone in.
	jar, _ := cookiejar.New(nil)
	jar.SetCookies(u, []*http.Cookie{{Name: cookieName, Value: cookie, Path: "/review/"}})
	replay := newBrowser(t, h)
	replay.client.Jar = jar
	if res, _ := replay.get("/review/" + id); res.StatusCode != http.StatusSeeOther {
		t.Errorf("replayed cookie after sign-out: %d", res.StatusCode)
	}
	// Signing out without a session just lands on the sign-in form.
	if res, _ := newBrowser(t, h).post("/review/logout", url.Values{}, ""); res.StatusCode != http.StatusSeeOther {
		t.Errorf("sign-out without a session: %d", res.StatusCode)
	}
}

// escalateChange escalates a change of the catalogue's specification
// target (a high-risk APPROVAL).
func escalateChange(t *testing.T, h *harness, action, target, content string, refs []string) string {
	t.Helper()
	req := approvalRequest()
	req["action"], req["target_type"], req["target_id"], req["target_path"] = action, "architecture", target, "docs/architecture/gateway.md"
	req["risk_assessment"], req["content"], req["references"] = "high", content, refs
	res, resp := h.submit(tokClaude, req)
	mustStatus(t, res, http.StatusOK)
	if resp.State != StateEscalated {
		t.Fatalf("not escalated: %s", res.body)
	}
	return resp.RequestID
}

// A modify shows the catalogue's current text beside the proposal, and
// the references by their titles; what comes first on the page is the
// decision (reason, expiry, buttons), then what would change, then the
// request's details.
func TestReviewPageShowsCurrentContent(t *testing.T) {
	h := newHarness(t)
	cat, err := LoadCatalogue("../config/specs")
	if err != nil {
		t.Fatal(err)
	}
	arch, _ := cat.Get("arch-001")
	id := escalateChange(t, h, ActionModify, "arch-001", "# Gateway architecture\n\nA new pipeline.", []string{"arch-001", "req-045"})
	b := newBrowser(t, h)
	b.post("/review/login", url.Values{"token": {tokReviewer}}, "")
	_, body := b.get("/review/" + id)
	for _, want := range []string{
		`<h3>Now, in the catalogue: <code>arch-001</code> Gateway architecture</h3>`,
		`<pre id="current">` + strings.SplitN(arch.Body, "\n", 2)[0],
		`<pre id="content"># Gateway architecture`,
		`<li><code>arch-001</code> Gateway architecture</li>`,
		`<li><code>req-045</code> `,
		`id="expires">Expires 2025-11-03 09:00:00 UTC <b>(in 1 d)</b>`,
		`Approve: the agent may make the change (APPROVED)`,
		`class="btn btn-approve" id="approve"`, `class="btn btn-reject" id="reject"`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	order := []string{`id="escalation-reason"`, `id="expires"`, `id="approve"`, `id="reject"`, `id="current"`, `id="references"`, `id="request"`, `id="history"`}
	last := -1
	for _, mark := range order {
		i := strings.Index(body, mark)
		if i < last {
			t.Errorf("%s comes before what precedes it in %v", mark, order)
		}
		last = i
	}

	// A delete of a target the catalogue does not hold says so; a create
	// has nothing to compare.
	gone := escalateChange(t, h, ActionDelete, "arch-999", "Remove it.", nil)
	_, body = b.get("/review/" + gone)
	if !strings.Contains(body, `id="current-note">The catalogue holds no specification `+"`arch-999`") || strings.Contains(body, `id="current"`) {
		t.Errorf("unknown target: %s", body)
	}
	created := escalate(t, h, "A new design.")
	_, body = b.get("/review/" + created)
	if strings.Contains(body, `id="current`) || !strings.Contains(body, `<li><code>arch-001</code> Gateway architecture</li>`) {
		t.Errorf("create: %s", body)
	}
}

// A modify's change to the catalogue entry is marked on the page, server
// side: the words replaced struck through (<del>) and the new ones marked
// (<ins>), the lines kept as they are, and the agent's text escaped. The
// heading says what is asked; the request id is small print.
func TestReviewPageMarksTheChange(t *testing.T) {
	h := newHarness(t)
	cat, err := LoadCatalogue("../config/specs")
	if err != nil {
		t.Fatal(err)
	}
	arch, _ := cat.Get("arch-001")
	proposed := strings.Replace(arch.Body, "live in memory for\n  one replica", "live in Redis for\n  every replica", 1) +
		"\n4. Reviewers see <b>marked</b> changes.\n"
	if proposed == arch.Body+"\n4. Reviewers see <b>marked</b> changes.\n" {
		t.Fatal("the catalogue's arch-001 no longer has the sentence this test edits")
	}
	id := escalateChange(t, h, ActionModify, "arch-001", proposed, nil)
	b := newBrowser(t, h)
	b.post("/review/login", url.Values{"token": {tokReviewer}}, "")
	_, body := b.get("/review/" + id)

	start := strings.Index(body, `<pre id="diff" class="diff">`)
	if start < 0 {
		t.Fatalf("no marked diff on the page:\n%s", body)
	}
	diff := body[start : start+strings.Index(body[start:], "</pre>")]
	for _, want := range []string{
		"live in <del>memory</del><ins>Redis</ins> for\n  <del>one</del><ins>every</ins> replica",
		"<ins>\n4. Reviewers see &lt;b&gt;marked&lt;/b&gt; changes.\n</ins>",
		"# Gateway architecture\n", // kept lines are plain
	} {
		if !strings.Contains(diff, want) {
			t.Errorf("diff lacks %q:\n%s", want, diff)
		}
	}
	if strings.Contains(diff, "<b>") {
		t.Error("the agent's markup reached the page unescaped")
	}
	if strings.Count(diff, "<del>")+strings.Count(diff, "<ins>") != 5 {
		t.Errorf("more marks than changes (a line diff shown as all-new?):\n%s", diff)
	}
	heading := `<h1 id="summary">claude-3 asks to modify architecture docs/architecture/gateway.md (arch-001) <span id="state"`
	if !strings.Contains(body, heading) || !strings.Contains(body, `<p class="muted small" id="request-id">Request <code>`+id+`</code></p>`) {
		t.Errorf("heading: want %q and the id in small print:\n%s", heading, body)
	}
	// A create has nothing to compare; nor has a delete.
	created := escalate(t, h, "A new design.")
	if _, body := b.get("/review/" + created); strings.Contains(body, `id="diff"`) {
		t.Error("a create shows a diff")
	}
}

func TestSpan(t *testing.T) {
	for d, want := range map[time.Duration]string{
		30 * time.Second:                 "less than a minute",
		3*time.Minute + 59*time.Second:   "3 min",
		5*time.Hour + 12*time.Minute:     "5 h 12 min",
		50*time.Hour + 30*time.Minute:    "2 d 2 h",
		48 * time.Hour:                   "2 d",
		2*time.Hour + 30*time.Second:     "2 h",
		-(3*time.Minute + 5*time.Second): "",
	} {
		if d < 0 {
			if got := until(d); got != "overdue by 3 min" {
				t.Errorf("until(%s) = %q", d, got)
			}
			continue
		}
		if got := span(d); got != want {
			t.Errorf("span(%s) = %q, want %q", d, got, want)
		}
	}
}
