package approval

import (
	"context"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sacpgw/gateway/internal/egress"
	"github.com/sacpgw/gateway/internal/people"
	"github.com/sacpgw/gateway/internal/testoidc"
	"github.com/sacpgw/gateway/internal/testredis"
)

// The sign-in with the organisation's provider, end to end against a real
// OpenID Connect provider (internal/testoidc: zitadel/oidc's certified
// OP): discovery, keys and the code exchange go through the gateway's
// outbound guard, as they do when it runs.

// People of the provider, by the groups that give them their roles.
var oidcUsers = []testoidc.User{
	{Subject: "u-ada", Email: "ada@example.org", Name: "Ada", Groups: []string{"gw-admins", "staff"}},
	{Subject: "u-rita", Email: "rita@example.org", Name: "Rita", Groups: []string{"gw-reviewers"}},
	{Subject: "u-tom", Email: "tom@example.org", Name: "Tom", Groups: []string{"platform-reviewers"}},
	{Subject: "u-nina", Email: "nina@example.org", Name: "Nina", Groups: []string{"marketing"}},
}

// oidcEnv is a service whose pages sign people in with op.
type oidcEnv struct {
	*harness
	op *testoidc.Provider
}

func loopbackGuard() *http.Client {
	return egress.Policy{Allowed: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}.Client(5 * time.Second)
}

func newOIDCEnv(t *testing.T, o testoidc.Options, opts ...option) *oidcEnv {
	t.Helper()
	o.Users = oidcUsers
	op := testoidc.Start(t, o)
	return replicaOf(t, op, opts...)
}

// replicaOf is a service whose pages sign people in with op.
func replicaOf(t *testing.T, op *testoidc.Provider, opts ...option) *oidcEnv {
	t.Helper()
	h := newHarness(t, append([]option{func(d *Deps) {
		d.BaseURL, d.Now, d.HTTPClient = "", time.Now, loopbackGuard()
		d.Config.Gateway.People.OIDC = &people.OIDC{Issuer: op.Issuer, ClientID: op.ClientID, ClientSecret: op.ClientSecret,
			Scopes: []string{"openid", "email", "groups"}, GroupsClaim: "groups",
			Roles: people.Roles{Admins: []string{"gw-admins"}, Reviewers: []string{"gw-reviewers"},
				TeamReviewers: map[string][]string{"platform": {"platform-reviewers"}}, TeamOwners: map[string][]string{"data": {"data-leads"}}}}
		d.Config.Agents["claude-3"].Team = "platform"
		d.Config.Agents["gemini-pro"].Team = "data"
	}}, opts...)...)
	op.AllowRedirect(h.srv.URL+people.CallbackPath, h.srv.URL+"/review/login")
	return &oidcEnv{harness: h, op: op}
}

// A person signed in with the provider on one replica is signed in on
// the other (the session is in Redis, roles and all), and signing out on
// either ends it on both.
func TestOIDCSessionAcrossReplicas(t *testing.T) {
	srv := testredis.Start(t)
	shared := func(d *Deps) { d.Store = NewRedisStore(srv.Client(t)) }
	a := newOIDCEnv(t, testoidc.Options{}, shared)
	b := replicaOf(t, a.op, shared)
	id := escalate(t, b.harness, "Remove the legacy architecture document.") // claude-3, team platform

	br := a.mustSignIn(t, "u-tom")
	br.base = b.srv.URL // the jar sends the cookie to b too (cookies ignore ports)
	res, body := br.get("/review/" + id)
	m := csrfField.FindStringSubmatch(body)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "tom@example.org</b> (team_reviewer)") || m == nil {
		t.Fatalf("page on b: %d %s", res.StatusCode, body)
	}
	// b never saw the sign-in, and sends the browser to the provider's
	// logout all the same.
	res, _ = br.post("/review/logout", url.Values{"csrf": {m[1]}}, b.srv.URL)
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), a.op.Issuer) {
		t.Fatalf("sign-out on b: %d to %s", res.StatusCode, res.Header.Get("Location"))
	}
	br.base = a.srv.URL
	if res, _ := br.get("/review/queue"); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("signed out on b, a still answers %d", res.StatusCode)
	}
}

// toCallback starts a sign-in as subject in br and follows the redirects
// through the provider up to the gateway's callback, which it returns
// without calling it.
func (e *oidcEnv) toCallback(t *testing.T, br *browser, subject string) *url.URL {
	t.Helper()
	e.op.SignInAs(subject)
	var callback *url.URL
	c := &http.Client{Jar: br.client.Jar, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if req.URL.Path == people.CallbackPath {
			callback = req.URL
			return http.ErrUseLastResponse
		}
		return nil
	}}
	res, err := c.Get(e.srv.URL + "/review/oidc/login?next=/review/queue")
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if callback == nil {
		t.Fatalf("the sign-in never came back to the callback: %d at %s", res.StatusCode, res.Request.URL)
	}
	return callback
}

// signIn signs subject in through the provider and returns the browser
// and the callback's answer.
func (e *oidcEnv) signIn(t *testing.T, subject string) (*browser, *http.Response, string) {
	t.Helper()
	br := newBrowser(t, e.harness)
	cb := e.toCallback(t, br, subject)
	res, body := br.get(cb.RequestURI())
	return br, res, body
}

func (e *oidcEnv) mustSignIn(t *testing.T, subject string) *browser {
	t.Helper()
	br, res, body := e.signIn(t, subject)
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/review/queue" {
		t.Fatalf("sign-in of %s: %d %s %s", subject, res.StatusCode, res.Header.Get("Location"), body)
	}
	return br
}

// Groups map to roles: an admin and a reviewer sign in, see the queue,
// and a decision names the person by the provider's subject and e-mail in
// the audit trail and the request's history.
func TestOIDCSignInMapsGroupsToRoles(t *testing.T) {
	e := newOIDCEnv(t, testoidc.Options{})
	id := escalate(t, e.harness, "Remove the legacy architecture document.")

	ada := e.mustSignIn(t, "u-ada")
	res, body := ada.get("/review/queue")
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "ada@example.org</b> (admin)") || !strings.Contains(body, id) {
		t.Fatalf("admin's queue: %d %s", res.StatusCode, body)
	}
	cookies := ada.client.Jar.Cookies(mustURL(t, e.srv.URL+"/review/"))
	if len(cookies) != 1 || cookies[0].Name != cookieName {
		t.Fatalf("after the sign-in the browser holds %v (the flow cookie must be spent)", cookies)
	}

	rita := e.mustSignIn(t, "u-rita")
	res, body = rita.get("/review/" + id)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "rita@example.org</b> (reviewer)") {
		t.Fatalf("reviewer's page: %d %s", res.StatusCode, body)
	}
	m := csrfField.FindStringSubmatch(body)
	res, body = rita.post("/review/"+id, url.Values{"decision": {"approve"}, "csrf": {m[1]}, "comment": {"fine"}}, e.srv.URL)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("decision: %d %s", res.StatusCode, body)
	}
	last := e.audit.Last("escalation.decision")
	if last["reviewer"] != "reviewer:rita@example.org" || last["reviewer_subject"] != "u-rita" || last["reviewer_email"] != "rita@example.org" {
		t.Fatalf("audit entry: %v", last)
	}
	rec, err := e.store.Get(t.Context(), id)
	if err != nil {
		t.Fatal(err)
	}
	h := rec.History[len(rec.History)-1]
	if h.By != "reviewer:rita@example.org" || h.Subject != "u-rita" || h.Email != "rita@example.org" ||
		rec.Escalation.Review.Subject != "u-rita" || rec.Escalation.Review.Email != "rita@example.org" {
		t.Fatalf("history: %+v review: %+v", h, rec.Escalation.Review)
	}

	// The door frame names the same person to the other doors.
	req, _ := http.NewRequest(http.MethodGet, e.srv.URL+"/review/queue", nil)
	for _, c := range ada.client.Jar.Cookies(mustURL(t, e.srv.URL+"/review/")) {
		req.AddCookie(c)
	}
	p, err := e.svc.SignedIn(req)
	if err != nil || !p.Admin || p.Subject != "u-ada" || p.Email != "ada@example.org" || p.Via != "oidc" || p.CSRF == "" {
		t.Fatalf("SignedIn: %+v %v", p, err)
	}
}

func mustURL(t *testing.T, s string) *url.URL {
	t.Helper()
	u, err := url.Parse(s)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

// refused checks a refused sign-in: 403, the sign-in page, no session,
// an auth.failure entry saying why.
func refused(t *testing.T, e *oidcEnv, br *browser, res *http.Response, body, why string) {
	t.Helper()
	if res.StatusCode != http.StatusForbidden || !strings.Contains(body, "Sign-in refused") {
		t.Fatalf("want 403 and the sign-in page: %d %s", res.StatusCode, body)
	}
	for _, c := range res.Cookies() {
		if c.Name == cookieName && c.Value != "" {
			t.Fatalf("a refused sign-in got a session cookie")
		}
	}
	if res, _ := br.get("/review/queue"); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("after a refused sign-in the queue answers %d", res.StatusCode)
	}
	fail := e.audit.Last("auth.failure")
	if reason, _ := fail["reason"].(string); !strings.Contains(reason, why) {
		t.Fatalf("auth.failure reason %q, want it to say %q", reason, why)
	}
}

// A person whose groups hold no role here is refused.
func TestOIDCPersonInNoMappedGroupRefused(t *testing.T) {
	e := newOIDCEnv(t, testoidc.Options{})
	br, res, body := e.signIn(t, "u-nina")
	refused(t, e, br, res, body, "no group")
}

// An answer whose state is not the one this browser's sign-in sent is
// refused before anything is exchanged; so is an answer that reaches a
// browser which started no sign-in (a login CSRF: an attacker's code in
// a victim's browser).
func TestOIDCForgedStateRefused(t *testing.T) {
	e := newOIDCEnv(t, testoidc.Options{})
	br := newBrowser(t, e.harness)
	cb := e.toCallback(t, br, "u-ada")
	q := cb.Query()
	q.Set("state", "forged")
	res, body := br.get(people.CallbackPath + "?" + q.Encode())
	refused(t, e, br, res, body, "state")

	attacker := newBrowser(t, e.harness)
	cb = e.toCallback(t, attacker, "u-ada")
	victim := newBrowser(t, e.harness)
	res, body = victim.get(cb.RequestURI())
	refused(t, e, victim, res, body, "no sign-in was started")

	// A callback is taken once: the flow cookie is spent.
	res, body = attacker.get(cb.RequestURI())
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("first use: %d %s", res.StatusCode, body)
	}
	res, body = attacker.get(cb.RequestURI())
	if res.StatusCode != http.StatusForbidden {
		t.Fatalf("replayed callback: %d %s", res.StatusCode, body)
	}
}

// An ID token with another nonce, or for another client, is refused.
func TestOIDCWrongNonceOrAudienceRefused(t *testing.T) {
	e := newOIDCEnv(t, testoidc.Options{})
	e.op.WrongNonce(true)
	br, res, body := e.signIn(t, "u-ada")
	refused(t, e, br, res, body, "nonce")
	e.op.WrongNonce(false)

	e.op.WrongAudience(true)
	br, res, body = e.signIn(t, "u-ada")
	refused(t, e, br, res, body, "audience")
}

// The session ends when the ID token expires.
func TestOIDCSessionEndsAtIDTokenExpiry(t *testing.T) {
	e := newOIDCEnv(t, testoidc.Options{IDTokenLifetime: 3 * time.Second})
	br := e.mustSignIn(t, "u-rita")
	if res, body := br.get("/review/queue"); res.StatusCode != http.StatusOK {
		t.Fatalf("queue: %d %s", res.StatusCode, body)
	}
	time.Sleep(4 * time.Second)
	res, _ := br.get("/review/queue")
	if res.StatusCode != http.StatusSeeOther || !strings.HasPrefix(res.Header.Get("Location"), "/review/login") {
		t.Fatalf("after the ID token expired: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
}

// Signing out ends the session on every replica and sends the browser to
// the provider's logout, which brings it back to the sign-in page.
func TestOIDCLogoutEndsProviderSession(t *testing.T) {
	e := newOIDCEnv(t, testoidc.Options{})
	br := e.mustSignIn(t, "u-ada")
	_, body := br.get("/review/queue")
	m := csrfField.FindStringSubmatch(body)
	res, _ := br.post("/review/logout", url.Values{"csrf": {m[1]}}, e.srv.URL)
	to, err := url.Parse(res.Header.Get("Location"))
	if res.StatusCode != http.StatusSeeOther || err != nil || !strings.HasPrefix(to.String(), e.op.Issuer) ||
		to.Query().Get("client_id") != e.op.ClientID || to.Query().Get("post_logout_redirect_uri") != e.srv.URL+"/review/login" {
		t.Fatalf("sign-out: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	follow := &http.Client{Jar: br.client.Jar}
	res, err = follow.Get(to.String())
	if err != nil {
		t.Fatal(err)
	}
	_ = res.Body.Close()
	if res.Request.URL.String() != e.srv.URL+"/review/login" || len(e.op.Logouts()) != 1 {
		t.Fatalf("the provider's logout ended at %s, logouts %v", res.Request.URL, e.op.Logouts())
	}
	if res, _ := br.get("/review/queue"); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("signed out, the queue answers %d", res.StatusCode)
	}
}

// A team's reviewer sees and decides only the escalations of their team's
// agents, whatever kind (an approval, an MCP tool call, a workflow
// pause); another team's is 404 on the page and on the decision.
func TestOIDCTeamReviewerScoping(t *testing.T) {
	e := newOIDCEnv(t, testoidc.Options{})
	own := escalate(t, e.harness, "Remove the legacy architecture document.") // claude-3, team platform
	mcpOwn, err := e.svc.Escalate(t.Context(), ExternalRequest{Type: TypeMCP, AgentID: "claude-3", Action: "call MCP tool files/delete_file",
		Content: `{"server":"files","tool":"delete_file","arguments":{"path":"a"}}`, Reason: "destructive"})
	if err != nil {
		t.Fatal(err)
	}
	other, err := e.svc.Escalate(t.Context(), ExternalRequest{Type: TypeWorkflow, AgentID: "gemini-pro", Action: "answer", Content: "{}", Reason: "ask a person"})
	if err != nil {
		t.Fatal(err)
	}
	noTeam, err := e.svc.Escalate(t.Context(), ExternalRequest{Type: TypeMCP, AgentID: "coder", Action: "call MCP tool files/delete_file", Content: "{}", Reason: "destructive"})
	if err != nil {
		t.Fatal(err)
	}

	tom := e.mustSignIn(t, "u-tom")
	res, body := tom.get("/review/queue")
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "(team_reviewer)") {
		t.Fatalf("queue: %d %s", res.StatusCode, body)
	}
	for id, want := range map[string]bool{own: true, mcpOwn.ID: true, other.ID: false, noTeam.ID: false} {
		if strings.Contains(body, id) != want {
			t.Errorf("team reviewer's queue lists %s: %v, want %v", id, !want, want)
		}
	}
	res, body = tom.get("/review/" + own)
	m := csrfField.FindStringSubmatch(body)
	if res.StatusCode != http.StatusOK || m == nil {
		t.Fatalf("own team's page: %d", res.StatusCode)
	}
	for _, id := range []string{other.ID, noTeam.ID} {
		if res, _ := tom.get("/review/" + id); res.StatusCode != http.StatusNotFound {
			t.Errorf("another team's page %s: %d, want 404", id, res.StatusCode)
		}
		if res, _ := tom.post("/review/"+id, url.Values{"decision": {"approve"}, "csrf": {m[1]}}, e.srv.URL); res.StatusCode != http.StatusNotFound {
			t.Errorf("deciding another team's %s: %d, want 404", id, res.StatusCode)
		}
		if rec, _ := e.store.Get(t.Context(), id); rec.State != StateEscalated {
			t.Errorf("%s was decided: %s", id, rec.State)
		}
	}
	if res, body := tom.post("/review/"+own, url.Values{"decision": {"reject"}, "csrf": {m[1]}}, e.srv.URL); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("own team's decision: %d %s", res.StatusCode, body)
	}
	if by := e.audit.Last("escalation.decision")["reviewer"]; by != "team_reviewer:tom@example.org" {
		t.Fatalf("decided by %v", by)
	}

	// An admin sees every team's.
	ada := e.mustSignIn(t, "u-ada")
	_, body = ada.get("/review/queue")
	for _, id := range []string{mcpOwn.ID, other.ID, noTeam.ID} {
		if !strings.Contains(body, id) {
			t.Errorf("admin's queue lacks %s", id)
		}
	}
}

// With token sign-in turned off, the page offers only the provider, a
// token is refused, and a token's session signed in before ends.
func TestOIDCTokenSignInTurnedOff(t *testing.T) {
	e := newOIDCEnv(t, testoidc.Options{})
	br := newBrowser(t, e.harness)
	if res, _ := br.post("/review/login", url.Values{"token": {tokReviewer}}, e.srv.URL); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("token sign-in while on: %d", res.StatusCode)
	}
	_, body := newBrowser(t, e.harness).get("/review/login")
	if !strings.Contains(body, `id="signin-oidc"`) || !strings.Contains(body, `id="token"`) {
		t.Fatalf("no provider button: %s", body)
	}

	cfg := *e.cfg
	off := false
	cfg.Gateway.People.TokenSignIn = &off
	e.svc.set.Store(e.svc.newSettings(&cfg, e.svc.cur().authz, e.svc.cur().cat, e.svc.cur().rate, "", ""))

	if res, _ := br.get("/review/queue"); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("a token's session outlived token sign-in: %d", res.StatusCode)
	}
	res, body := br.post("/review/login", url.Values{"token": {tokReviewer}}, e.srv.URL)
	if res.StatusCode != http.StatusForbidden || strings.Contains(body, `id="token"`) || !strings.Contains(body, `id="signin-oidc"`) {
		t.Fatalf("token sign-in while off: %d %s", res.StatusCode, body)
	}
	e.mustSignIn(t, "u-ada")
}

// The provider is reached through the outbound guard: one the guard does
// not allow is never called, and the page says the sign-in is unreachable.
func TestOIDCProviderBehindOutboundGuard(t *testing.T) {
	e := newOIDCEnv(t, testoidc.Options{}, func(d *Deps) { d.HTTPClient = egress.Policy{}.Client(5 * time.Second) })
	br := newBrowser(t, e.harness)
	res, body := br.get("/review/oidc/login")
	if res.StatusCode != http.StatusBadGateway || !strings.Contains(body, "cannot be reached") {
		t.Fatalf("provider on a blocked address: %d %s", res.StatusCode, body)
	}
	if slices.ContainsFunc(res.Cookies(), func(c *http.Cookie) bool { return c.Name == flowCookie }) {
		t.Fatal("a flow cookie for a sign-in that never started")
	}
}

// TestOIDCSignInInChromium: on a 390px phone, without JavaScript, a
// person opens the queue, is sent to the sign-in page, chooses the
// organisation's account, signs in at the provider and lands on the
// queue, signed in by their e-mail; no page scrolls sideways.
func TestOIDCSignInInChromium(t *testing.T) {
	path := skipWithoutChromium(t)
	e := newOIDCEnv(t, testoidc.Options{})
	escalate(t, e.harness, "Remove the legacy architecture document.")
	e.op.SignInAs("") // the provider's own form
	b := startChromium(t, path)
	b.ScriptsOff(t)
	if err := chromedp.Do(b.ctx,
		chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
		chromedp.Navigate(e.srv.URL+"/review/queue"),
		chromedp.WaitVisible(chromedp.ID("signin-oidc")),
	); err != nil {
		t.Fatalf("open the queue signed out: %v", err)
	}
	b.FitsPhone(t, "the sign-in page")
	png, err := chromedp.Run(b.ctx, chromedp.CaptureScreenshot())
	if err != nil {
		t.Fatal(err)
	}
	saveScreenshot(t, "sign-in-oidc.png", png)
	for i, step := range []chromedp.Action[chromedp.Void]{
		chromedp.Click(chromedp.ID("signin-oidc")),
		chromedp.WaitVisible(chromedp.ID("username")),
		chromedp.SendKeys(chromedp.ID("username"), "u-tom"),
		chromedp.Click(chromedp.ID("login")),
		chromedp.WaitVisible(chromedp.ID("queue")),
	} {
		ctx, cancel := context.WithTimeout(b.ctx, 15*time.Second)
		err := chromedp.Do(ctx, step)
		cancel()
		if err != nil {
			loc, _ := chromedp.Run(b.ctx, chromedp.Location())
			t.Fatalf("sign in at the provider: step %d at %s: %v", i, loc, err)
		}
	}
	if who := b.text(t, "who"); who != "tom@example.org" {
		t.Fatalf("signed in as %q", who)
	}
	b.FitsPhone(t, "the queue")
	if p := b.problems(); len(p) > 0 {
		t.Errorf("the pages reported problems:\n%s", strings.Join(p, "\n"))
	}
}

// Every page a person opens says how to lay it out on a phone.
func TestEveryPageHasAViewport(t *testing.T) {
	h := newHarness(t, func(d *Deps) { d.BaseURL = "" })
	id := escalate(t, h, "Remove the legacy architecture document.")
	br := newBrowser(t, h)
	check := func(path string) {
		t.Helper()
		res, body := br.get(path)
		if res.StatusCode != http.StatusOK || !strings.Contains(body, `<meta name="viewport" content="width=device-width, initial-scale=1">`) {
			t.Errorf("%s: %d, viewport %v", path, res.StatusCode, strings.Contains(body, `name="viewport"`))
		}
	}
	check("/review/login")
	check("/")
	if res, _ := br.post("/review/login", url.Values{"token": {tokAdmin}}, h.srv.URL); res.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign-in: %d", res.StatusCode)
	}
	for _, p := range []string{"/review/queue", "/review/" + id, "/review/ops"} {
		check(p)
	}
}
