package approval

import (
	"context"
	"errors"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"

	"github.com/sacpgw/gateway/internal/escalation"
)

// TestExternalEscalationOnTheReviewPage: an escalation another component
// opens (a SPAWN_AGENT message) is listed, shown on the review page with its
// content, decided there like any other, and the decision reaches the
// component's Resolver exactly once; the agent that waits can poll it.
func TestExternalEscalationOnTheReviewPage(t *testing.T) {
	h := newHarness(t)
	var mu sync.Mutex
	var got []escalation.Decided
	h.svc.Handle(TypeSpawn, func(_ context.Context, d escalation.Decided) error {
		mu.Lock()
		defer mu.Unlock()
		got = append(got, d)
		return nil
	})
	content := `{"g":"SPAWN_AGENT","plan":[["instantiate","VISA_AGENT",{"tool":"VISA_Q","verb":"check","endpoint":"http://x/<script>"}]]}`
	rec, err := h.svc.Escalate(context.Background(), ExternalRequest{Type: TypeSpawn, AgentID: "claude-3", Action: "spawn VISA_AGENT",
		Content: content, Reason: "the new agent would receive messages at an endpoint"})
	if err != nil {
		t.Fatal(err)
	}
	if rec.State != StateEscalated || rec.Response == nil || rec.Response.HumanReviewURL == nil || !strings.HasSuffix(*rec.Response.HumanReviewURL, "/review/"+rec.ID) {
		t.Fatalf("record %+v", rec)
	}
	if _, err := h.svc.Escalate(context.Background(), ExternalRequest{Type: "OTHER", AgentID: "claude-3"}); err == nil {
		t.Error("an unknown type was escalated")
	}

	res := h.do(http.MethodGet, "/admin/escalations", tokReviewer, nil)
	if res.status != http.StatusOK || !strings.Contains(string(res.body), rec.ID) || !strings.Contains(string(res.body), `"request_type":"SPAWN_AGENT"`) {
		t.Fatalf("list: %d %s", res.status, res.body)
	}
	b := newBrowser(t, h)
	b.post("/review/login", url.Values{"token": {tokReviewer}}, "")
	page, body := b.get("/review/" + rec.ID)
	if page.StatusCode != http.StatusOK || !strings.Contains(body, "SPAWN_AGENT") || !strings.Contains(body, "VISA_AGENT") ||
		strings.Contains(body, "<script>") || !strings.Contains(body, "&lt;script&gt;") {
		t.Fatalf("review page: %d %s", page.StatusCode, body)
	}
	m := csrfField.FindStringSubmatch(body)
	if m == nil {
		t.Fatal("no form")
	}
	res2, _ := b.post("/review/"+rec.ID, url.Values{"decision": {"approve"}, "csrf": {m[1]}, "comment": {"endpoint checked"}}, h.srv.URL)
	if res2.StatusCode != http.StatusSeeOther {
		t.Fatalf("decide: %d", res2.StatusCode)
	}
	mu.Lock()
	if len(got) != 1 || !got[0].Approved || got[0].State != string(StateApproved) || got[0].ID != rec.ID || got[0].AgentID != "claude-3" ||
		got[0].Content != content || got[0].Comment != "endpoint checked" || got[0].Decision != "approve" || got[0].Reviewer == "" {
		t.Errorf("resolver got %+v", got)
	}
	mu.Unlock()
	_, st := h.status(tokClaude, rec.ID)
	if st.State != StateApproved {
		t.Errorf("the waiting agent sees %s", st.State)
	}
	if len(h.audit.ByKind("escalation.decision")) != 1 {
		t.Errorf("decision not audited: %v", h.audit.Kinds())
	}
}

// TestResolverFailureKeepsTheDecision: a Resolver that fails is logged; the
// person's decision stands.
func TestResolverFailureKeepsTheDecision(t *testing.T) {
	h := newHarness(t)
	h.svc.Handle(TypeMessage, func(context.Context, escalation.Decided) error { return errors.New("recipient gone") })
	rec, err := h.svc.Escalate(context.Background(), ExternalRequest{Type: TypeMessage, AgentID: "claude-3", Action: "execution_failed", Content: `{"error":"x"}`})
	if err != nil {
		t.Fatal(err)
	}
	res := h.do(http.MethodPost, "/admin/escalations/"+rec.ID+"/decision", tokAdmin, map[string]any{"decision": "reject", "reviewer": "ops"})
	if res.status != http.StatusOK {
		t.Fatalf("%d %s", res.status, res.body)
	}
	_, st := h.status(tokClaude, rec.ID)
	if st.State != StateRejected {
		t.Errorf("state %s", st.State)
	}
}

// TestWorkflowEscalationReviewPage: a WORKFLOW_PAUSE escalation's page
// shows the question, the run and the gateway's drawing inline (without
// its XML declaration); a drawing that is not what the gateway draws is
// replaced by a note, and an unreadable content still shows the raw text.
func TestWorkflowEscalationReviewPage(t *testing.T) {
	h := newHarness(t)
	graph := gatewayGraph(t)
	content := `{"run_id":"run-1","workflow":"find-ceo","node":"validate","agent":"email-validator",` +
		`"question":"Which one <b>is</b> it?","answer":{"status":"needs_human"},"path":["research","validate"],` +
		`"context":{"status":"WAITING_FOR_HUMAN","entities":{"vendor":{"name":"ACME"}}},"graph":"flowchart TD"}`
	open := func(content, graph string) string {
		t.Helper()
		rec, err := h.svc.Escalate(context.Background(), ExternalRequest{Type: TypeWorkflow, AgentID: "email-validator",
			Action: "workflow find-ceo: node validate asks for a person", Content: content, Graph: graph})
		if err != nil {
			t.Fatal(err)
		}
		return rec.ID
	}
	b := newBrowser(t, h)
	b.post("/review/login", url.Values{"token": {tokReviewer}}, "")

	good := open(content, graph)
	res, body := b.get("/review/" + good)
	if res.StatusCode != http.StatusOK {
		t.Fatalf("%d %s", res.StatusCode, body)
	}
	for _, want := range []string{
		`id="wf-question">Which one &lt;b&gt;is&lt;/b&gt; it?</p>`, `<td id="wf-node">validate</td>`, `<td id="wf-agent">email-validator</td>`,
		`<code>research</code> → <code>validate</code>`, `&#34;name&#34;: &#34;ACME&#34;`,
		`<div id="graph" class="graph"><svg xmlns="http://www.w3.org/2000/svg"`, `class="current"`, `class="taken"`,
		`id="comment-label">Your answer to the agent`, "Approve and send the answer",
	} {
		if !strings.Contains(body, want) {
			t.Errorf("page lacks %s", want)
		}
	}
	if strings.Contains(body, "<?xml") || strings.Contains(body, "graph-note") || strings.Contains(body, "<b>is</b>") {
		t.Errorf("page:\n%s", body)
	}
	if csp := res.Header.Get("Content-Security-Policy"); strings.Contains(csp, "script-src") || !strings.Contains(csp, "default-src 'none'") {
		t.Errorf("CSP %q", csp)
	}

	hostile := strings.Replace(graph, "<svg ", `<svg onload="alert(1)" `, 1)
	bad := open(content, hostile)
	_, body = b.get("/review/" + bad)
	if !strings.Contains(body, `id="graph-note"`) || strings.Contains(body, "<svg") || strings.Contains(body, "onload") {
		t.Errorf("a hostile drawing was embedded:\n%s", body)
	}
	if !strings.Contains(body, `id="wf-question"`) {
		t.Error("the refused drawing hid the question")
	}

	raw := open("not json <i>", "")
	_, body = b.get("/review/" + raw)
	if !strings.Contains(body, "wf-unreadable") || !strings.Contains(body, "not json &lt;i&gt;") || strings.Contains(body, `id="graph"`) ||
		!strings.Contains(body, "Your answer to the agent") {
		t.Errorf("unreadable content:\n%s", body)
	}

	// Other escalations keep the plain page.
	plain := escalate(t, h, "x")
	_, body = b.get("/review/" + plain)
	if strings.Contains(body, "wf-") || strings.Contains(body, `id="graph"`) || !strings.Contains(body, `id="comment-label">Comment (recorded`) {
		t.Errorf("plain escalation page:\n%s", body)
	}
}
