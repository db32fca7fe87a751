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
