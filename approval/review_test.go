package approval

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"
)

// browser is a plain HTTP client with cookies that does not follow
// redirects, so each step can be checked.
type browser struct {
	t      *testing.T
	base   string
	client *http.Client
}

func newBrowser(t *testing.T, h *harness) *browser {
	jar, err := cookiejar.New(nil)
	if err != nil {
		t.Fatal(err)
	}
	c := &http.Client{Jar: jar, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	return &browser{t: t, base: h.srv.URL, client: c}
}

func (b *browser) get(path string) (*http.Response, string) {
	b.t.Helper()
	res, err := b.client.Get(b.base + path)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res, string(body)
}

func (b *browser) post(path string, form url.Values, origin string) (*http.Response, string) {
	b.t.Helper()
	req, _ := http.NewRequest(http.MethodPost, b.base+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if origin != "" {
		req.Header.Set("Origin", origin)
	}
	res, err := b.client.Do(req)
	if err != nil {
		b.t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res, string(body)
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

func escalate(t *testing.T, h *harness, content string) string {
	t.Helper()
	req := approvalRequest()
	req["risk_assessment"], req["content"] = "high", content
	res, resp := h.submit(tokClaude, req)
	mustStatus(t, res, http.StatusOK)
	if resp.State != StateEscalated {
		t.Fatalf("not escalated: %s", res.body)
	}
	return resp.RequestID
}

func TestReviewSessionCookie(t *testing.T) {
	h := newHarness(t, func(d *Deps) { d.BaseURL = "" })
	b := newBrowser(t, h)
	res, _ := b.post("/review/login", url.Values{"token": {tokReviewer}, "next": {"/review/req-x"}}, h.srv.URL)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/review/req-x" {
		t.Fatalf("login: %d %v", res.StatusCode, res.Header)
	}
	cookies := res.Cookies()
	if len(cookies) != 1 {
		t.Fatalf("cookies %v", cookies)
	}
	c := cookies[0]
	if c.Name != cookieName || !c.HttpOnly || c.SameSite != http.SameSiteLaxMode || c.Secure || c.Path != "/review/" {
		t.Errorf("cookie %+v", c)
	}
	if strings.Contains(c.Value, tokReviewer) || c.Value == sha256Hex([]byte(tokReviewer)) || len(c.Value) != 64 {
		t.Errorf("cookie value is not an opaque session id: %q", c.Value)
	}

	// Secure once the gateway is reached over https.
	hs := newHarness(t)
	bs := newBrowser(t, hs)
	res, _ = bs.post("/review/login", url.Values{"token": {tokReviewer}}, "")
	if c := res.Cookies(); len(c) != 1 || !c[0].Secure {
		t.Errorf("cookie behind https: %+v", c)
	}
	if res.Header.Get("Location") != "/review/login" {
		t.Errorf("no next: %s", res.Header.Get("Location"))
	}
}

func TestReviewLoginRefusals(t *testing.T) {
	h := newHarness(t)
	b := newBrowser(t, h)
	// No session: the page redirects to the sign-in form, which keeps where
	// to go next.
	res, _ := b.get("/review/req-abc")
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/review/login?next=%2Freview%2Freq-abc" {
		t.Fatalf("no session: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	res, body := b.get("/review/login?next=%2Freview%2Freq-abc")
	if res.StatusCode != 200 || !strings.Contains(body, `name="next" value="/review/req-abc"`) {
		t.Fatalf("login form: %s", body)
	}
	if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || res.Header.Get("X-Frame-Options") != "DENY" ||
		res.Header.Get("Referrer-Policy") != "same-origin" || res.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("headers %v", res.Header)
	}
	// Agent tokens and unknown tokens do not sign in.
	for _, tok := range []string{tokClaude, "nope", ""} {
		res, body = b.post("/review/login", url.Values{"token": {tok}}, "")
		if res.StatusCode != http.StatusUnauthorized || len(res.Cookies()) != 0 || !strings.Contains(body, `id="error"`) {
			t.Errorf("token %q: %d", tok, res.StatusCode)
		}
	}
	// Open redirects are not possible.
	for _, next := range []string{"//evil.example/review/x", "https://evil.example/", "/admin/escalations", "/review/\\evil"} {
		res, _ = b.post("/review/login", url.Values{"token": {tokReviewer}, "next": {next}}, "")
		if loc := res.Header.Get("Location"); loc != "/review/login" {
			t.Errorf("next %q redirected to %q", next, loc)
		}
	}
	// Cross-origin (and opaque-origin) sign-in is refused.
	for _, origin := range []string{"https://evil.example", "null"} {
		res, _ = b.post("/review/login", url.Values{"token": {tokReviewer}}, origin)
		if res.StatusCode != http.StatusForbidden || len(res.Cookies()) != 0 {
			t.Errorf("login from origin %s: %d", origin, res.StatusCode)
		}
	}
}

func TestReviewCSRF(t *testing.T) {
	h := newHarness(t)
	id := escalate(t, h, "Remove the legacy architecture document.")
	b := newBrowser(t, h)
	b.post("/review/login", url.Values{"token": {tokReviewer}}, "")
	res, body := b.get("/review/" + id)
	if res.StatusCode != 200 {
		t.Fatalf("page: %d %s", res.StatusCode, body)
	}
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF token in the form: %s", body)
	}
	for name, form := range map[string]url.Values{
		"missing":  {"decision": {"approve"}},
		"wrong":    {"decision": {"approve"}, "csrf": {strings.Repeat("0", 64)}},
		"other's":  {"decision": {"approve"}, "csrf": {otherCSRF(t, h)}},
		"no value": {"decision": {"approve"}, "csrf": {""}},
	} {
		res, body := b.post("/review/"+id, form, "")
		if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "csrf_failed") {
			t.Errorf("%s CSRF token: %d %s", name, res.StatusCode, body)
		}
	}
	// A valid token from another origin is refused too.
	res, _ = b.post("/review/"+id, url.Values{"decision": {"approve"}, "csrf": {m[1]}}, "https://evil.example")
	if res.StatusCode != http.StatusForbidden {
		t.Errorf("cross-origin: %d", res.StatusCode)
	}
	// Without a session: 401, whatever the form says.
	anon := newBrowser(t, h)
	res, _ = anon.post("/review/"+id, url.Values{"decision": {"approve"}, "csrf": {m[1]}}, "")
	if res.StatusCode != http.StatusUnauthorized {
		t.Errorf("no session: %d", res.StatusCode)
	}
	_, st := h.status(tokClaude, id)
	if st.State != StateEscalated {
		t.Fatalf("state changed by a refused form: %s", st.State)
	}

	// The real form works and shows the new state.
	res, _ = b.post("/review/"+id, url.Values{"decision": {"reject"}, "csrf": {m[1]}, "comment": {"not now"}}, h.srv.URL)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/review/"+id {
		t.Fatalf("decide: %d %v", res.StatusCode, res.Header)
	}
	_, body = b.get("/review/" + id)
	if !strings.Contains(body, `<span id="state" class="state state-rejected">REJECTED</span>`) || !strings.Contains(body, "not now") || strings.Contains(body, `id="approve"`) {
		t.Errorf("page after decision: %s", body)
	}
	_, st = h.status(tokClaude, id)
	if st.State != StateRejected || st.History[len(st.History)-1].By != "reviewer:security-lead" {
		t.Fatalf("state %+v", st)
	}
	res, _ = b.post("/review/"+id, url.Values{"decision": {"approve"}, "csrf": {m[1]}}, "")
	if res.StatusCode != http.StatusConflict {
		t.Errorf("second decision: %d", res.StatusCode)
	}
}

// otherCSRF signs in a second reviewer and returns their CSRF token: a
// token is bound to its session and worthless in another.
func otherCSRF(t *testing.T, h *harness) string {
	b := newBrowser(t, h)
	b.post("/review/login", url.Values{"token": {tokAlice}}, "")
	id := escalate(t, h, "x")
	_, body := b.get("/review/" + id)
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no CSRF token for alice")
	}
	return m[1]
}

func TestReviewPageEscapesContent(t *testing.T) {
	h := newHarness(t)
	id := escalate(t, h, `<script>alert("x")</script><img src=x onerror=alert(1)>`)
	b := newBrowser(t, h)
	b.post("/review/login", url.Values{"token": {tokAdmin}}, "")
	_, body := b.get("/review/" + id)
	if strings.Contains(body, "<script>alert") || strings.Contains(body, "<img src=x") || !strings.Contains(body, "&lt;script&gt;") {
		t.Fatalf("content not escaped: %s", body)
	}
	// The queue lists it.
	_, body = b.get("/review/login")
	if !strings.Contains(body, `href="/review/`+id+`"`) {
		t.Errorf("queue: %s", body)
	}
}

func TestReviewSessionExpires(t *testing.T) {
	h := newHarness(t, func(d *Deps) { d.SessionTTL = time.Hour })
	id := escalate(t, h, "x")
	b := newBrowser(t, h)
	b.post("/review/login", url.Values{"token": {tokReviewer}}, "")
	if res, _ := b.get("/review/" + id); res.StatusCode != 200 {
		t.Fatalf("fresh session: %d", res.StatusCode)
	}
	h.clock.Advance(time.Hour)
	if res, _ := b.get("/review/" + id); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("expired session: %d", res.StatusCode)
	}
	// Another reviewer's session, still open but past its end by the
	// Service's clock at the next prune, is dropped by it.
	b2 := newBrowser(t, h)
	b2.post("/review/login", url.Values{"token": {tokAlice}}, "")
	if n := sessionCount(h.store); n != 1 {
		t.Fatalf("%d sessions stored, want alice's only (the expired one was deleted on use)", n)
	}
	h.clock.Advance(time.Hour)
	h.svc.pruneSessions(t.Context())
	if n := sessionCount(h.store); n != 0 {
		t.Errorf("%d sessions left", n)
	}
}

func sessionCount(m *MemoryStore) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.sessions)
}
