package approval

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/chromedp"

	"github.com/sacpgw/gateway/internal/browsertest"
	"github.com/sacpgw/gateway/internal/escalation"
)

// skipWithoutChromium returns the Chromium binary, or skips loudly.
func skipWithoutChromium(t *testing.T) string {
	t.Helper()
	return browsertest.Skip(t, "the review page")
}

// headless is a headless Chromium for one test (browsertest.Browser), with
// the review site's steps as methods.
type headless struct {
	*browsertest.Browser
	ctx context.Context
}

// startChromium starts Chromium at path; it is closed when the test ends.
func startChromium(t *testing.T, path string) *headless {
	t.Helper()
	b := browsertest.Start(t, path)
	return &headless{Browser: b, ctx: b.Ctx}
}

func (b *headless) problems() []string { return b.Problems() }

func (b *headless) text(t *testing.T, id string) string {
	t.Helper()
	return b.Text(t, id)
}

// signIn opens /review/{id}, is sent to the sign-in form, signs in with
// token and waits for the element waitFor of the review page.
func (b *headless) signIn(t *testing.T, h *harness, id, token, waitFor string) {
	t.Helper()
	for i, step := range []chromedp.Action[chromedp.Void]{
		chromedp.Navigate(h.srv.URL + "/review/" + id),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.ID("signin")),
		chromedp.WaitVisible(chromedp.ID(waitFor)),
	} {
		if err := chromedp.Do(b.ctx, step); err != nil {
			t.Fatalf("sign in and open the review page: step %d: %v", i, err)
		}
	}
}

// TestReviewPageInChromium drives the review page in a real headless
// Chromium: sign in with a reviewer token, open the escalation, read the
// content and violations, type a comment, approve, see the new state.
func TestReviewPageInChromium(t *testing.T) {
	path := skipWithoutChromium(t)
	h := newHarness(t, func(d *Deps) { d.BaseURL = "" })
	content := "Remove docs/architecture/legacy.md <superseded by arch-001>"
	id := escalate(t, h, content)

	b := startChromium(t, path)
	ctx := b.ctx
	text := func(id string) string {
		t.Helper()
		return b.text(t, id)
	}

	// Unauthenticated, the page sends the browser to the sign-in form.
	b.signIn(t, h, id, tokReviewer, "content")
	if got := text("content"); got != content {
		t.Errorf("content %q, want %q", got, content)
	}
	if v := text("violations"); !strings.Contains(v, "risk.escalate") {
		t.Errorf("violations %q", v)
	}
	if r := text("escalation-reason"); !strings.Contains(r, "Risky change") {
		t.Errorf("escalation reason %q", r)
	}
	if s := text("state"); s != "ESCALATED" {
		t.Errorf("state %q", s)
	}

	res, err := chromedp.Call(ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{h.srv.URL + "/review/" + id}})
	if err != nil {
		t.Fatalf("read cookies: %v", err)
	}
	cookies := res.Cookies
	if len(cookies) != 1 || cookies[0].Name != cookieName || !cookies[0].HTTPOnly || cookies[0].SameSite != network.CookieSameSiteLax {
		t.Fatalf("cookies %+v", cookies)
	}
	if strings.Contains(cookies[0].Value, tokReviewer) {
		t.Fatal("the session cookie holds the token")
	}

	err = chromedp.Do(ctx,
		chromedp.SendKeys(chromedp.ID("comment"), "Checked with the owners: safe to remove."),
		chromedp.Click(chromedp.ID("approve")),
		chromedp.WaitVisible(chromedp.ID("closed")),
	)
	if err != nil {
		t.Fatalf("approve: %v", err)
	}
	if s, r := text("state"), text("review"); s != "APPROVED" || !strings.Contains(r, "security-lead") || !strings.Contains(r, "safe to remove") {
		t.Errorf("after approving: state %q review %q", s, r)
	}
	_, st := h.status(tokClaude, id)
	if st.State != StateApproved || st.History[len(st.History)-1].By != "reviewer:security-lead" {
		t.Fatalf("stored state %+v", st)
	}
	if p := b.problems(); len(p) > 0 {
		t.Errorf("the pages reported problems:\n%s", strings.Join(p, "\n"))
	}
}

// TestWorkflowReviewPageInChromium: a workflow run waiting for a person
// (WORKFLOW_PAUSE, opened through Escalate with the gateway's drawing) is
// shown in a real Chromium with the drawing rendered inline (the path
// taken and the waiting node highlighted), the question, node, agent, path
// and Global Context, without a console error or a Content-Security-Policy
// violation; the reviewer's comment, typed on the page, is the answer the
// run's Resolver receives with the approval.
func TestWorkflowReviewPageInChromium(t *testing.T) {
	path := skipWithoutChromium(t)
	h := newHarness(t, func(d *Deps) { d.BaseURL = "" })
	var mu sync.Mutex
	var decided []escalation.Decided
	h.svc.Handle(TypeWorkflow, func(_ context.Context, d escalation.Decided) error {
		mu.Lock()
		defer mu.Unlock()
		decided = append(decided, d)
		return nil
	})

	wf := gatewayWorkflow(t)
	question := "Two addresses look valid: is the CEO <jane@acme.example> or <ceo@acme.example>?"
	body, err := json.Marshal(map[string]any{
		"run_id": "run-7", "workflow": "find-ceo", "node": "validate", "agent": "email-validator",
		"question": question,
		"answer":   map[string]any{"thought": "ambiguous", "status": "needs_human", "data": map[string]any{"candidates": 2}, "message": question},
		"path":     []string{"research", "validate"},
		"context": map[string]any{"workflow_id": "find-ceo", "status": "WAITING_FOR_HUMAN", "current_agent": "email-validator",
			"entities": map[string]any{"vendor": map[string]any{"name": "ACME Corp", "domain": "acme.example"}}},
		"graph": wf.Mermaid(),
	})
	if err != nil {
		t.Fatal(err)
	}
	content := string(body)
	graph := string(wf.SVG([]string{"research", "validate"}, "validate"))
	rec, err := h.svc.Escalate(t.Context(), ExternalRequest{Type: TypeWorkflow, AgentID: "email-validator", SessionID: "run-7",
		Action: "workflow find-ceo: node validate asks for a person", Content: content,
		Reason: "Agent email-validator answered needs_human: " + question, Graph: graph})
	if err != nil {
		t.Fatal(err)
	}
	if rec.Escalation == nil || rec.Escalation.Graph != graph {
		t.Fatal("the drawing was not kept with the escalation")
	}

	b := startChromium(t, path)
	b.signIn(t, h, rec.ID, tokReviewer, "wf-question")
	if got := b.text(t, "wf-question"); got != question {
		t.Errorf("question %q, want %q", got, question)
	}
	for id, want := range map[string]string{
		"wf-name": "find-ceo", "wf-node": "validate", "wf-agent": "email-validator",
		"wf-path": "research → validate", "request-type": TypeWorkflow,
	} {
		if got := b.text(t, id); got != want {
			t.Errorf("#%s %q, want %q", id, got, want)
		}
	}
	if got := b.text(t, "wf-entities"); !strings.Contains(got, `"domain": "acme.example"`) {
		t.Errorf("entities %q", got)
	}
	if got := b.text(t, "wf-answer"); !strings.Contains(got, `"status": "needs_human"`) {
		t.Errorf("answer %q", got)
	}

	// The drawing is rendered as SVG in the page, not as text or an image.
	type drawing struct {
		Found       bool    `json:"found"`
		Namespace   string  `json:"namespace"`
		Width       float64 `json:"width"`
		Height      float64 `json:"height"`
		Current     int     `json:"current"`
		CurrentNode string  `json:"currentNode"`
		Taken       int     `json:"taken"`
		TakenFrom   string  `json:"takenFrom"`
		Scripts     int     `json:"scripts"`
		Notes       int     `json:"notes"`
	}
	d, err := chromedp.Run(b.ctx, chromedp.Evaluate[drawing](`(() => {
		const svg = document.querySelector("#graph > svg");
		const out = {found: !!svg, scripts: document.scripts.length, notes: document.querySelectorAll("#graph-note").length};
		if (!svg) return out;
		const box = svg.getBoundingClientRect();
		const current = svg.querySelectorAll(".current"), taken = svg.querySelectorAll(".taken");
		return Object.assign(out, {
			namespace: svg.namespaceURI, width: box.width, height: box.height,
			current: current.length, currentNode: current.length ? current[0].closest("[data-node]").getAttribute("data-node") : "",
			taken: taken.length, takenFrom: taken.length ? taken[0].closest("[data-from]").getAttribute("data-from") : "",
		});
	})()`))
	if err != nil {
		t.Fatalf("inspect the drawing: %v", err)
	}
	if !d.Found || d.Namespace != "http://www.w3.org/2000/svg" || d.Width <= 0 || d.Height <= 0 {
		t.Fatalf("no rendered SVG drawing: %+v", d)
	}
	if d.Current < 1 || d.CurrentNode != "validate" || d.Taken < 1 || d.TakenFrom != "research" || d.Scripts != 0 || d.Notes != 0 {
		t.Errorf("drawing %+v", d)
	}
	// The run's status as the workflows API says it, and the heading says
	// who waits, in words.
	if got := b.text(t, "wf-status"); got != "WAITING_FOR_HUMAN" {
		t.Errorf("run status %q while the escalation is open, want WAITING_FOR_HUMAN", got)
	}
	if got := b.text(t, "summary"); !strings.HasPrefix(got, "Workflow find-ceo: email-validator waits for a person's answer at node validate") {
		t.Errorf("heading %q", got)
	}
	if label := b.text(t, "comment-label"); !strings.Contains(label, "answer") {
		t.Errorf("comment label %q does not say the comment is the answer", label)
	}
	if p := b.problems(); len(p) > 0 {
		t.Errorf("the review page reported problems:\n%s", strings.Join(p, "\n"))
	}

	answer := "It is jane@acme.example: confirmed on the company site."
	err = chromedp.Do(b.ctx,
		chromedp.SendKeys(chromedp.ID("comment"), answer),
		chromedp.Click(chromedp.ID("approve")),
		chromedp.WaitVisible(chromedp.ID("closed")),
	)
	if err != nil {
		t.Fatalf("approve: %v", err)
	}
	if s, r := b.text(t, "state"), b.text(t, "review"); s != "APPROVED" || !strings.Contains(r, answer) {
		t.Errorf("after approving: state %q review %q", s, r)
	}
	// Decided, the page no longer says the run waits.
	if got := b.text(t, "wf-status"); got != "IN_PROGRESS" {
		t.Errorf("run status %q after the approval, want IN_PROGRESS", got)
	}
	page, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.body.innerText`))
	if err != nil {
		t.Fatal(err)
	}
	for _, stale := range []string{"waiting for a person", "waits for a person", "WAITING_FOR_HUMAN"} {
		if strings.Contains(page, stale) {
			t.Errorf("after the approval the page still says %q", stale)
		}
	}
	stored, err := h.store.Get(t.Context(), rec.ID)
	if err != nil {
		t.Fatal(err)
	}
	if stored.State != StateApproved || stored.Escalation.Review == nil || stored.Escalation.Review.Decision != reviewDecisionApprove ||
		stored.Escalation.Review.Comment != answer || stored.Escalation.Review.Reviewer != "reviewer:security-lead" || stored.Escalation.Graph != graph {
		t.Fatalf("stored %s %+v", stored.State, stored.Escalation.Review)
	}
	mu.Lock()
	if len(decided) != 1 || decided[0].ID != rec.ID || decided[0].Type != TypeWorkflow || !decided[0].Approved ||
		decided[0].Comment != answer || decided[0].Content != content {
		t.Errorf("resolver got %+v", decided)
	}
	mu.Unlock()
	if p := b.problems(); len(p) > 0 {
		t.Errorf("the pages reported problems:\n%s", strings.Join(p, "\n"))
	}

	// The check above sees CSP violations: an image the page's policy
	// forbids is reported.
	if _, err := chromedp.Run(b.ctx, chromedp.Evaluate[bool](`(() => {
		const img = document.createElement("img");
		img.src = "data:image/gif;base64,R0lGODlhAQABAAAAACw=";
		document.body.appendChild(img);
		return true;
	})()`)); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(b.problems()) == 0 && time.Now().Before(deadline) {
		time.Sleep(50 * time.Millisecond)
	}
	if p := b.problems(); len(p) == 0 || !strings.Contains(strings.Join(p, "\n"), "Content Security Policy") {
		t.Errorf("a CSP violation was not reported to the test: %q", p)
	} else {
		t.Logf("the forbidden image was reported: %s", p[0])
	}
}
