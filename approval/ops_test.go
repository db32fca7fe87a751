package approval

import (
	"context"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/roster"
)

// fakeOps is an OpsSource with set answers; it records the agents the
// page asked about.
type fakeOps struct {
	mu     sync.Mutex
	asked  []string
	usage  []AgentUsage
	trail  TrailStatus
	policy PolicyStatus
}

func (f *fakeOps) Usage(_ context.Context, agents []*roster.Agent) []AgentUsage {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.asked = f.asked[:0]
	for _, a := range agents {
		f.asked = append(f.asked, a.ID)
	}
	return f.usage
}

func (f *fakeOps) Trail(context.Context) TrailStatus   { return f.trail }
func (f *fakeOps) Policy(context.Context) PolicyStatus { return f.policy }

// sampleOps fills f with a day's worth of plausible figures (the
// screenshot in docs/operations.md is drawn from them).
func sampleOps(f *fakeOps, now time.Time) {
	f.usage = []AgentUsage{
		{Agent: "claude-3", SpentMicroUSD: 18_400_000, Limits: []LimitUse{
			{Dimension: "requests", Used: 37, Limit: 100, Period: time.Hour, Reset: 22 * time.Minute},
			{Dimension: "tokens", Used: 151200, Limit: 200000, Period: time.Hour, Reset: 45 * time.Minute},
			{Dimension: "USD", Used: 23.1, Limit: 25, Period: 24 * time.Hour, Reset: 22 * time.Hour},
		}},
		{Agent: "copilot-2", Limits: []LimitUse{{Dimension: "requests", Used: 12, Limit: 200, Period: time.Hour, Reset: 4 * time.Minute}}},
		{Agent: "gemini-pro", SpentMicroUSD: 400, UnknownCost: 2, Limits: []LimitUse{
			{Dimension: "requests", Error: "the state backend did not answer: redis: connection refused"},
		}},
	}
	f.trail = TrailStatus{
		Chain: "gw-0", Read: 412, Since: now.Add(-95 * time.Minute), Partial: true,
		LastSeq: 18234, LastHash: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08", LastAt: now.Add(-8 * time.Second),
		Checkpoint: &CheckpointStatus{Seq: 18200, At: now.Add(-40 * time.Second), Signed: true, Checked: true},
		Refusals: []Refusal{
			{At: now.Add(-2 * time.Minute), Kind: "ratelimit.reject", Agent: "gemini-pro", Route: "/v1/chat/completions", Status: 429, Reason: "requests limit reached (50/hour)", RequestID: "req_63d05b420bf3cc0c1c76b52f", Count: 1},
			{At: now.Add(-9 * time.Minute), Kind: "llm.request", Agent: "copilot-2", Route: "/v1/chat/completions", Status: 403, Reason: "policy_denied: policy: gpt-4o is reserved for code-generator agents", RequestID: "req_8c542663a019d7c137e5b19b", Count: 1},
			{At: now.Add(-14 * time.Minute), Kind: "auth.failure", Route: "/v1/chat/completions", Status: 401, Reason: "Incorrect API key provided.", Source: "203.0.113.7", RequestID: "req_12f3108de1aacd40a5093499", Count: 6},
			{At: now.Add(-31 * time.Minute), Kind: "agent.decision", Agent: "copilot-2", Route: "/agent/request", Reason: "authorization: agent \"copilot-2\" lacks capability \"write\" required for action \"delete\"", RequestID: "req-2302ff05fae4157c075d072e09489a0e", Count: 1},
		},
		Disagreements: []Disagreement{{At: now.Add(-17 * time.Minute), Point: "chat", Live: "allow", Shadow: "deny"}},
	}
	f.policy = PolicyStatus{Revision: "9d1ed58465fe0b76f1eb7f1f86099164fbccbe8a1eee0979961fc5d0cbb3e16d", ShadowRevision: "5e884898da28047151d0e56f8dc6292773603d0d6aabbdd62a11ef721d1542d8",
		Decisions: 1264, FailClosed: 0, ShadowEvaluations: 1264, ShadowDisagreements: 3}
}

// The operator page: anonymous browsers are sent to sign in; a reviewer
// sees everything but where refused requests came from; the admin sees
// that too. The page holds no form but sign-out: it changes nothing.
func TestOpsPageAccess(t *testing.T) {
	h := newHarness(t, func(d *Deps) { d.BaseURL = "" })
	sampleOps(h.ops, h.clock.Now())
	id := escalate(t, h, "Remove the legacy architecture document.")

	anon := newBrowser(t, h)
	res, _ := anon.get("/review/ops")
	if res.StatusCode != http.StatusSeeOther || res.Header.Get("Location") != "/review/login?next=%2Freview%2Fops" {
		t.Fatalf("anonymous: %d %s", res.StatusCode, res.Header.Get("Location"))
	}
	// Signing in from there lands on the page.
	res, _ = anon.post("/review/login", url.Values{"token": {tokReviewer}, "next": {"/review/ops"}}, "")
	if res.Header.Get("Location") != "/review/ops" {
		t.Fatalf("sign-in next: %s", res.Header.Get("Location"))
	}

	for _, c := range []struct {
		token string
		admin bool
	}{{tokReviewer, false}, {tokAdmin, true}} {
		b := newBrowser(t, h)
		b.post("/review/login", url.Values{"token": {c.token}}, "")
		res, body := b.get("/review/ops")
		if res.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", c.token, res.StatusCode, body)
		}
		if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'none'") || strings.Contains(csp, "script-src") {
			t.Errorf("CSP %q", csp)
		}
		for _, want := range []string{
			`href="/review/` + id + `"`,                           // the queue
			"37 of 100 requests per hour (37%)",                   // use against a limit
			"$23.10 of $25.00 per day (92%)",                      // the dollar budget
			"$18.40",                                              // a spend in cents
			"$0.0004",                                             // a sub-cent spend, not $0.00
			"2 calls of unknown cost",                             // as the audit counts them
			"the state backend did not answer",                    // a part that failed
			"Incorrect API key provided.",                         // a refusal's reason
			"policy_denied: policy: gpt-4o is reserved",           // another
			`<span class="big sound" id="sum-trail">sound</span>`, // the chain
			"9d1ed58465fe0b76f1eb7f1f86099164fbccbe8a1eee0979961fc5d0cbb3e16d",
			`<b>3 disagreed</b>`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("%s: page lacks %q", c.token, want)
			}
		}
		if got := strings.Count(body, "<form"); got != 1 || !strings.Contains(body, `action="/review/logout"`) {
			t.Errorf("%s: %d forms; the page must hold only sign-out", c.token, got)
		}
		if has := strings.Contains(body, "203.0.113.7"); has != c.admin {
			t.Errorf("%s: source address shown %v, want %v", c.token, has, c.admin)
		}
		for _, secret := range []string{tokReviewer, tokAdmin, tokClaude} {
			if strings.Contains(body, secret) {
				t.Errorf("%s: a token is on the page", c.token)
			}
		}
	}
	if got := strings.Join(h.ops.asked, ","); got != "claude-3,copilot-2,gemini-pro" {
		t.Errorf("usage asked for %s, want the configured agents by id", got)
	}
}

// A part that cannot be read says so in its place; the rest stands.
func TestOpsPageDegrades(t *testing.T) {
	h := newHarness(t)
	h.ops.trail = TrailStatus{Chain: "gw-0", Error: "read audit dir: permission denied"}
	h.ops.policy = PolicyStatus{Revision: "abc", ReloadProblem: "rego/main.rego:3: rego_parse_error",
		Bundle: &BundleStatus{Source: "ghcr.io/acme/gateway-policy:live", Revision: "2026.11.3", Error: "failed to verify JWT signature"}}
	b := newBrowser(t, h)
	b.post("/review/login", url.Values{"token": {tokAdmin}}, "")
	res, body := b.get("/review/ops")
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	for _, want := range []string{
		`id="sum-trail">unreadable</span>`,
		"The audit trail could not be read: read audit dir: permission denied",
		"refused, the last good policies still decide: rego/main.rego:3: rego_parse_error",
		"revision <code>2026.11.3</code> from <code>ghcr.io/acme/gateway-policy:live</code>",
		"the newest bundle was refused, revision 2026.11.3 still decides: failed to verify JWT signature",
		"Nothing is waiting for a decision.",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %q", want)
		}
	}

	h.ops.trail = TrailStatus{Chain: "gw-0", Read: 10, Problem: "seq 7 does not follow seq 6"}
	_, body = b.get("/review/ops")
	if !strings.Contains(body, `id="sum-trail">problem</span>`) || !strings.Contains(body, "seq 7 does not follow seq 6") {
		t.Errorf("a chain problem is not shown: %s", body)
	}
}

func TestOpsViewBars(t *testing.T) {
	cases := []struct {
		use    LimitUse
		fill   int
		colour string
		text   string
	}{
		{LimitUse{Dimension: "requests", Used: 0, Limit: 100, Period: time.Hour}, 0, colourOK, "0 of 100 requests per hour (0%)"},
		{LimitUse{Dimension: "tokens", Used: 140000, Limit: 200000, Period: time.Hour, Reset: 30 * time.Second}, 168, colourNear,
			"140,000 of 200,000 tokens per hour (70%); whole again in 1 min"},
		{LimitUse{Dimension: "USD", Used: 30, Limit: 25, Period: 24 * time.Hour, Reset: 2 * time.Hour}, barWidth, colourFull,
			"$30.00 of $25.00 per day (100%); whole again in 2 h"},
		{LimitUse{Dimension: "requests", Used: 9, Limit: 10, Period: time.Minute}, 216, colourFull, "9 of 10 requests per minute (90%)"},
	}
	for _, c := range cases {
		b := usageBar(c.use)
		if b.Fill != c.fill || b.Colour != c.colour || b.Text != c.text || b.Width != barWidth {
			t.Errorf("%+v: fill %d colour %s text %q", c.use, b.Fill, b.Colour, b.Text)
		}
	}

	now := time.Date(2025, 11, 2, 9, 0, 0, 0, time.UTC)
	var refusals []Refusal
	for i := range maxOpsRefusals + 5 {
		refusals = append(refusals, Refusal{Kind: "llm.request", Source: "198.51.100.1", Count: 1, At: now.Add(-time.Duration(i) * time.Minute)})
	}
	refusals = append(refusals, Refusal{Kind: "auth.failure", Count: 4})
	in := opsInput{Trail: TrailStatus{Refusals: refusals}}
	p := opsView(navBar{Who: door.Person{Name: "alice"}}, in, now)
	if len(p.Refusals) != maxOpsRefusals || p.RefusalCount != maxOpsRefusals+5+4 || p.Trail.Refusals != nil {
		t.Fatalf("%d listed, %d counted", len(p.Refusals), p.RefusalCount)
	}
	for _, r := range p.Refusals {
		if r.Source != "" {
			t.Fatal("a reviewer's view holds a source address")
		}
	}
	if refusals[0].Source == "" {
		t.Fatal("the view changed the source's refusals")
	}
	if len(p.RefusalKinds) != 2 || p.RefusalKinds[0].Label != "llm.request" || p.RefusalKinds[0].Fill != barWidth ||
		p.RefusalKinds[1].Text != "4" || p.RefusalKinds[1].Fill != 17 {
		t.Errorf("kinds %+v", p.RefusalKinds)
	}
	admin := opsView(navBar{Who: door.Person{Name: "admin", Admin: true}}, in, now)
	if admin.Refusals[0].Source != "198.51.100.1" {
		t.Error("the admin's view lacks the source address")
	}
}

// The charts are inline SVG markup with presentation attributes only: no
// style attribute, no script, nothing fetched.
func TestOpsChartsMarkup(t *testing.T) {
	h := newHarness(t)
	sampleOps(h.ops, h.clock.Now())
	b := newBrowser(t, h)
	b.post("/review/login", url.Values{"token": {tokAdmin}}, "")
	_, body := b.get("/review/ops")
	svgs := regexp.MustCompile(`(?s)<svg.*?</svg>`).FindAllString(body, -1)
	if len(svgs) < 5 {
		t.Fatalf("%d charts drawn", len(svgs))
	}
	for _, s := range svgs {
		if strings.Contains(s, "style=") || strings.Contains(s, "href") || strings.Contains(s, "<script") || !strings.Contains(s, `role="img"`) {
			t.Errorf("chart markup %s", s)
		}
	}
	if strings.Contains(body, "<script") || strings.Contains(body, "<img") {
		t.Error("the page loads a script or an image")
	}
}
