package approval

import (
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/testredis"
)

// replicas are two Services sharing one real redis-server, each with its
// own client and clock, served over plain http (BaseURL empty: cookies
// are not Secure, so clients send them to the test servers).
func replicas(t *testing.T, srv *testredis.Server) (a, b *harness) {
	t.Helper()
	mk := func() *harness {
		return newHarness(t, func(d *Deps) {
			d.Store = NewRedisStore(srv.Client(t))
			d.BaseURL = ""
			d.SessionTTL = time.Hour
		})
	}
	return mk(), mk()
}

// A reviewer signs in on one replica and decides on the other; the
// session is one Redis key, named by a hash of the cookie, that expires
// with the session.
func TestReviewSessionAcrossReplicas(t *testing.T) {
	srv := testredis.Start(t)
	a, b := replicas(t, srv)
	id := escalate(t, a, "Remove the legacy architecture document.")

	br := newBrowser(t, a)
	res, _ := br.post("/review/login", url.Values{"token": {tokReviewer}}, a.srv.URL)
	if res.StatusCode != http.StatusSeeOther || len(res.Cookies()) != 1 {
		t.Fatalf("sign in on a: %d %v", res.StatusCode, res.Cookies())
	}
	cookie := res.Cookies()[0].Value

	// The cookie jar sends the cookie to b too (cookies ignore ports).
	br.base = b.srv.URL
	res, body := br.get("/review/" + id)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("page on b: %d %s", res.StatusCode, body)
	}
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no CSRF token on b's page: %s", body)
	}
	res, _ = br.post("/review/"+id, url.Values{"decision": {"approve"}, "csrf": {m[1]}, "comment": {"ok"}}, b.srv.URL)
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("decide on b: %d", res.StatusCode)
	}
	if _, st := a.status(tokClaude, id); st.State != StateApproved || st.History[len(st.History)-1].By != "reviewer:security-lead" {
		t.Fatalf("state seen by a: %+v", st)
	}

	// What Redis holds: one key, not named by the cookie, not holding it,
	// living as long as the session.
	c := srv.Client(t)
	keys, err := c.Keys(t.Context(), DefaultRedisKeyPrefix+"session:*").Result()
	if err != nil || len(keys) != 1 {
		t.Fatalf("session keys %v %v", keys, err)
	}
	if strings.Contains(keys[0], cookie) {
		t.Error("the session key is the cookie")
	}
	val, _ := c.Get(t.Context(), keys[0]).Result()
	if strings.Contains(val, cookie) || !strings.Contains(val, `"name":"security-lead"`) || !strings.Contains(val, m[1]) {
		t.Errorf("session value %s", val)
	}
	if ttl, _ := c.PTTL(t.Context(), keys[0]).Result(); ttl <= 0 || ttl > time.Hour {
		t.Errorf("session TTL %v, want at most the session's hour", ttl)
	}
}

// A session ends the same way on every replica: by its end (the replica's
// clock, and Redis's TTL), or when its reviewer is no longer configured.
// A session store that cannot answer is a 503, never a guess.
func TestReviewSessionEndsOnEveryReplica(t *testing.T) {
	srv := testredis.Start(t)
	for _, tc := range []struct {
		note string
		// end acts on replica b; then b must not honour the session.
		end  func(t *testing.T, b *harness)
		want int
	}{
		{"its hour is over", func(t *testing.T, b *harness) { b.clock.Advance(time.Hour) }, http.StatusSeeOther},
		{"the reviewer was removed", func(t *testing.T, b *harness) {
			cfg := testConfig()
			cfg.Gateway.Admin.Reviewers = cfg.Gateway.Admin.Reviewers[1:] // alice only
			apply, err := b.svc.Prepare(cfg)
			if err != nil {
				t.Fatal(err)
			}
			apply()
		}, http.StatusSeeOther},
		{"Redis is down", func(t *testing.T, b *harness) {
			srv.Stop()
			t.Cleanup(srv.Restart)
		}, http.StatusServiceUnavailable},
	} {
		t.Run(tc.note, func(t *testing.T) {
			a, b := replicas(t, srv)
			id := escalate(t, a, "x")
			br := newBrowser(t, a)
			br.post("/review/login", url.Values{"token": {tokReviewer}}, "")
			br.base = b.srv.URL
			if res, _ := br.get("/review/" + id); res.StatusCode != http.StatusOK {
				t.Fatalf("before: %d", res.StatusCode)
			}
			tc.end(t, b)
			res, _ := br.get("/review/" + id)
			if res.StatusCode != tc.want {
				t.Fatalf("page: %d, want %d", res.StatusCode, tc.want)
			}
			res, _ = br.post("/review/"+id, url.Values{"decision": {"approve"}, "csrf": {"x"}}, "")
			if res.StatusCode != http.StatusUnauthorized && res.StatusCode != http.StatusServiceUnavailable {
				t.Fatalf("decision: %d", res.StatusCode)
			}
			if tc.want == http.StatusServiceUnavailable {
				// Nor can anyone sign in.
				res, _ := newBrowser(t, b).post("/review/login", url.Values{"token": {tokAlice}}, "")
				if res.StatusCode != http.StatusServiceUnavailable || len(res.Cookies()) != 0 {
					t.Errorf("sign in with Redis down: %d %v", res.StatusCode, res.Cookies())
				}
			}
			if tc.want == http.StatusSeeOther {
				// The replica that saw the session end forgot it for all.
				n, err := srv.Client(t).Keys(t.Context(), DefaultRedisKeyPrefix+"session:*").Result()
				if err != nil || len(n) != 0 {
					t.Errorf("session keys left %v %v", n, err)
				}
			}
		})
	}
}

// roundRobin is a load balancer without sticky sessions: each request goes
// to the next replica. The Host header is kept, as a real one does, so the
// pages' same-origin check sees the address the browser used.
func roundRobin(t *testing.T, backends ...*harness) (*httptest.Server, []*atomic.Int64) {
	t.Helper()
	var next atomic.Int64
	served := make([]*atomic.Int64, len(backends))
	proxies := make([]*httputil.ReverseProxy, len(backends))
	for i, h := range backends {
		u, _ := url.Parse(h.srv.URL)
		proxies[i] = httputil.NewSingleHostReverseProxy(u)
		served[i] = &atomic.Int64{}
	}
	lb := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		i := int(next.Add(1)-1) % len(proxies)
		served[i].Add(1)
		proxies[i].ServeHTTP(w, r)
	}))
	t.Cleanup(lb.Close)
	return lb, served
}

// TestReviewBehindLoadBalancerInChromium: a real headless Chromium signs in
// and approves through a round-robin load balancer over two replicas
// sharing Redis: every step may land on either replica, and the reviewer
// stays signed in.
func TestReviewBehindLoadBalancerInChromium(t *testing.T) {
	path := skipWithoutChromium(t)
	srv := testredis.Start(t)
	a, b := replicas(t, srv)
	lb, served := roundRobin(t, a, b)
	id := escalate(t, a, "Remove docs/architecture/legacy.md")

	br := startChromium(t, path)
	for i, step := range []chromedp.Action[chromedp.Void]{
		chromedp.Navigate(lb.URL + "/review/" + id),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), tokReviewer),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.ID("content")),
		chromedp.Reload(),
		chromedp.WaitVisible(chromedp.ID("content")),
		chromedp.SendKeys(chromedp.ID("comment"), "Approved behind the load balancer."),
		chromedp.Click(chromedp.ID("approve")),
		chromedp.WaitVisible(chromedp.ID("closed")),
	} {
		if err := chromedp.Do(br.ctx, step); err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
	}
	if s := br.text(t, "state"); s != "APPROVED" {
		t.Errorf("state %q", s)
	}
	if _, st := b.status(tokClaude, id); st.State != StateApproved || st.History[len(st.History)-1].By != "reviewer:security-lead" {
		t.Fatalf("stored state %+v", st)
	}
	if served[0].Load() < 3 || served[1].Load() < 3 {
		t.Errorf("requests per replica %d and %d: the test did not alternate", served[0].Load(), served[1].Load())
	}
	if p := br.problems(); len(p) > 0 {
		t.Errorf("the pages reported problems:\n%s", strings.Join(p, "\n"))
	}
}

// The memory store keeps sessions per process, as before: a single
// replica's sessions survive a config reload that keeps the reviewer.
func TestReviewSessionSurvivesReload(t *testing.T) {
	h := newHarness(t, func(d *Deps) { d.BaseURL = "" })
	id := escalate(t, h, "x")
	br := newBrowser(t, h)
	br.post("/review/login", url.Values{"token": {tokAlice}}, "")
	cfg := testConfig()
	cfg.Protocol.Timeouts.Escalation = config.Duration(48 * time.Hour)
	apply, err := h.svc.Prepare(cfg)
	if err != nil {
		t.Fatal(err)
	}
	apply()
	if res, _ := br.get("/review/" + id); res.StatusCode != http.StatusOK {
		t.Fatalf("after reload: %d", res.StatusCode)
	}
}
