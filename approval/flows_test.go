package approval

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/testkit"
)

// The approval protocol's operation 1: an agent requests approval, creates the
// file at approved_location, and reports completion.
func TestOperationApprovalThenReport(t *testing.T) {
	h := newHarness(t)
	req := approvalRequest()
	res, resp := h.submit(tokClaude, req)
	mustStatus(t, res, http.StatusOK)
	if resp.Status != StatusApproved || resp.State != StateApproved {
		t.Fatalf("status %q state %q, want approved/APPROVED: %s", resp.Status, resp.State, res.body)
	}
	if !strings.HasPrefix(resp.RequestID, "req-") || resp.ProcessingTimeMS < 0 {
		t.Errorf("request_id %q processing_time_ms %d", resp.RequestID, resp.ProcessingTimeMS)
	}
	if resp.ApprovedLocation == nil || *resp.ApprovedLocation != "docs/design/new-feature.md" {
		t.Errorf("approved_location = %v", resp.ApprovedLocation)
	}
	digest := sha256Hex([]byte(req["content"].(string)))
	if resp.ContentSHA256 != digest {
		t.Errorf("content_sha256 = %s, want %s", resp.ContentSHA256, digest)
	}
	// The protocol's optional fields are present as null, lists as [].
	var raw map[string]any
	res.json(t, &raw)
	for _, k := range []string{"escalation_reason", "human_review_url", "estimated_review_time", "context", "relevant_nodes"} {
		if v, ok := raw[k]; !ok || v != nil {
			t.Errorf("%s = %v (present %v), want null", k, v, ok)
		}
	}
	// A CREATE is assigned the gateway's id for what it creates.
	if want := "design-" + strings.TrimPrefix(resp.RequestID, "req-"); resp.AssignedID == nil || *resp.AssignedID != want {
		t.Errorf("assigned_id = %v, want %s", resp.AssignedID, want)
	}
	for _, k := range []string{"violations", "suggestions", "constraints"} {
		if _, ok := raw[k].([]any); !ok {
			t.Errorf("%s = %v, want a list", k, raw[k])
		}
	}

	_, st := h.status(tokClaude, resp.RequestID)
	if st.State != StateApproved || !slices.Equal(states(st.History), []State{StatePending, StateValidating, StateApproved}) {
		t.Fatalf("status %+v", st)
	}
	if st.History[0].By != "claude-3" || st.History[2].By != byPolicy {
		t.Errorf("history by: %+v", st.History)
	}

	// report_completion(response.request_id)
	res, rep := h.submit(tokClaude, map[string]any{
		"agent_id": "claude-3", "request_type": "REPORT", "request_id": resp.RequestID,
		"completed": true, "changes_made": map[string]any{"content_sha256": digest, "files": []string{"docs/design/new-feature.md"}},
	})
	mustStatus(t, res, http.StatusOK)
	if rep.Status != StatusApproved || rep.State != StateCompleted || rep.RequestID != resp.RequestID {
		t.Fatalf("report: %s", res.body)
	}
	_, st = h.status(tokClaude, resp.RequestID)
	if st.State != StateCompleted || st.History[len(st.History)-1].By != "claude-3" {
		t.Fatalf("after report: %+v", st)
	}
	// A second REPORT finds nothing to complete.
	_, again := h.submit(tokClaude, map[string]any{"agent_id": "claude-3", "request_type": "REPORT", "request_id": resp.RequestID,
		"completed": true, "changes_made": "done"})
	if again.Status != StatusRejected || again.Violations[len(again.Violations)-1].Rule != violationReportState {
		t.Errorf("second report: %+v", again)
	}

	// Every step is audited, with the digest of the exact body received.
	kinds := h.audit.Kinds()
	want := []string{audit.KindAgentRequest, audit.KindAgentDecision, audit.KindAgentRequest, audit.KindAgentDecision, audit.KindAgentRequest, audit.KindAgentDecision}
	if !slices.Equal(kinds, want) {
		t.Fatalf("audit kinds %v, want %v", kinds, want)
	}
	body, _ := json.Marshal(req)
	first := h.audit.ByKind(audit.KindAgentRequest)[0]
	if first.PayloadSHA256 != sha256Hex(body) || first.RequestID != resp.RequestID || first.AgentID != "claude-3" || first.SessionID != "sess-123" {
		t.Errorf("agent.request entry %+v", first)
	}
	dec := h.audit.ByKind(audit.KindAgentDecision)[0]
	if testkit.SummaryOf(dec)["decision_id"] != "dec-1" || testkit.SummaryOf(dec)["policy_revision"] != "test-revision" || testkit.SummaryOf(dec)["status"] != StatusApproved {
		t.Errorf("agent.decision entry %+v", testkit.SummaryOf(dec))
	}
	if strings.Contains(testkit.SummaryOf(first)["content_sha256"].(string), "New Feature") {
		t.Error("content leaked into the audit summary")
	}
}

// The approval protocol's operation 2: an agent queries for context.
func TestOperationQueryForContext(t *testing.T) {
	h := newHarness(t)
	res, resp := h.submit(tokCopilot, map[string]any{
		"agent_id": "copilot-2", "request_type": "QUERY", "content": "What are the current authentication requirements?",
	})
	mustStatus(t, res, http.StatusOK)
	if resp.Status != StatusApproved || resp.State != StateCompleted {
		t.Fatalf("query: %s", res.body)
	}
	if len(resp.RelevantNodes) == 0 || resp.RelevantNodes[0].ID != "req-045" {
		t.Fatalf("relevant_nodes %+v, want req-045 first", resp.RelevantNodes)
	}
	specs, _ := resp.Context["specifications"].([]any)
	if len(specs) == 0 || !strings.Contains(specs[0].(map[string]any)["body"].(string), "constant time") {
		t.Errorf("context %+v lacks the requirement's text", resp.Context)
	}
	if in := h.decider.lastInput()["request"].(map[string]any); in["action"] != ActionRead {
		t.Errorf("a QUERY reads; action %v", in["action"])
	}

	// /agent/context answers the same search.
	res = h.do(http.MethodPost, "/agent/context", tokCopilot, map[string]any{"query": "authentication requirements", "limit": 2})
	mustStatus(t, res, http.StatusOK)
	var cr ContextResponse
	res.json(t, &cr)
	if len(cr.RelevantNodes) == 0 || len(cr.RelevantNodes) > 2 || cr.RelevantNodes[0].ID != "req-045" || cr.RequestID == "" {
		t.Fatalf("context: %s", res.body)
	}
	res = h.do(http.MethodPost, "/agent/context", tokCopilot, map[string]any{"query": "x", "top": 2})
	if _, _, param, _ := res.apiError(t); res.status != http.StatusBadRequest || param != "top" {
		t.Errorf("unknown field: %d %s", res.status, res.body)
	}
}

// The approval protocol's operation 3: a rejection, a fix, a resubmission.
func TestOperationRejectionFixResubmit(t *testing.T) {
	h := newHarness(t)
	req := approvalRequest()
	req["references"] = []string{"arch-001", "arch-999"}
	req["rationale"] = ""
	res, resp := h.submit(tokClaude, req)
	mustStatus(t, res, http.StatusOK)
	if resp.Status != StatusRejected || resp.State != StateRejected {
		t.Fatalf("want rejected: %s", res.body)
	}
	var rules []string
	for _, v := range resp.Violations {
		rules = append(rules, v.Rule)
	}
	for _, want := range []string{"required_fields", "references.unknown", "rationale"} {
		if !slices.Contains(rules, want) {
			t.Errorf("violations %v lack %s", rules, want)
		}
	}
	if len(resp.Suggestions) == 0 || resp.Feedback == "" {
		t.Errorf("no suggestions or feedback: %s", res.body)
	}

	// fix_violations(request, response.suggestions)
	req["references"] = []string{"arch-001", "req-045"}
	req["rationale"] = "Implementing user story US-123"
	res, retry := h.submit(tokClaude, req)
	mustStatus(t, res, http.StatusOK)
	if retry.Status != StatusApproved || retry.RequestID == resp.RequestID {
		t.Fatalf("resubmission: %s", res.body)
	}
	_, st := h.status(tokClaude, resp.RequestID)
	if st.State != StateRejected {
		t.Errorf("the first request stays REJECTED, got %s", st.State)
	}
}

// The approval protocol's operation 4: escalation, polling, a person decides.
func TestOperationEscalation(t *testing.T) {
	var mu sync.Mutex
	var posts []string
	hook := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		mu.Lock()
		posts = append(posts, string(b))
		mu.Unlock()
	}))
	defer hook.Close()
	h := newHarness(t, func(d *Deps) { d.Webhook = hook.URL })

	req := approvalRequest()
	req["action"], req["target_type"], req["target_path"] = "delete", "architecture", "docs/architecture/legacy.md"
	req["content"] = "Remove the legacy <b>architecture</b> document."
	req["risk_assessment"] = "high: other documents reference it"
	res, resp := h.submit(tokClaude, req)
	mustStatus(t, res, http.StatusOK)
	if resp.Status != StatusEscalated || resp.State != StateEscalated {
		t.Fatalf("want escalated: %s", res.body)
	}
	wantURL := "https://gw.example.test/review/" + resp.RequestID
	if resp.HumanReviewURL == nil || *resp.HumanReviewURL != wantURL || resp.EscalationReason == nil ||
		resp.EstimatedReviewTime == nil || *resp.EstimatedReviewTime != 24*60 {
		t.Fatalf("escalation fields: %s", res.body)
	}

	// poll_status(response.request_id)
	_, st := h.status(tokClaude, resp.RequestID)
	if st.State != StateEscalated || st.Escalation == nil || st.Escalation.Kind != escalationKindPolicy {
		t.Fatalf("poll: %+v", st)
	}

	// The webhook got a Slack-compatible message with the review URL and
	// without the content.
	h.svc.notifying.Wait()
	mu.Lock()
	if len(posts) != 1 {
		t.Fatalf("webhook posts: %v", posts)
	}
	var msg map[string]string
	if err := json.Unmarshal([]byte(posts[0]), &msg); err != nil || !strings.Contains(msg["text"], wantURL) ||
		strings.Contains(msg["text"], "legacy <b>") || !strings.Contains(msg["text"], "claude-3") {
		t.Errorf("webhook message %q", posts[0])
	}
	mu.Unlock()

	// A reviewer lists and decides.
	res = h.do(http.MethodGet, "/admin/escalations", tokReviewer, nil)
	mustStatus(t, res, http.StatusOK)
	var list EscalationList
	res.json(t, &list)
	if list.Count != 1 || list.Escalations[0].RequestID != resp.RequestID || list.Escalations[0].ReviewURL != wantURL ||
		!list.Escalations[0].ExpiresAt.Equal(h.clock.Now().Add(24*time.Hour)) {
		t.Fatalf("escalations: %s", res.body)
	}
	res = h.do(http.MethodPost, "/admin/escalations/"+resp.RequestID+"/decision", tokReviewer,
		map[string]any{"decision": "approve", "reviewer": "security-lead", "comment": "Checked: nothing links to it any more."})
	mustStatus(t, res, http.StatusOK)

	_, st = h.status(tokClaude, resp.RequestID)
	if st.State != StateApproved || st.Response.Status != StatusApproved {
		t.Fatalf("after decision: %+v", st)
	}
	last := st.History[len(st.History)-1]
	if last.By != "reviewer:security-lead" || st.Escalation.Review == nil || st.Escalation.Review.Comment == "" {
		t.Errorf("history %+v review %+v", last, st.Escalation.Review)
	}
	entries := h.audit.ByKind(audit.KindEscalationDecision)
	if len(entries) != 1 || testkit.SummaryOf(entries[0])["reviewer"] != "reviewer:security-lead" || testkit.SummaryOf(entries[0])["decision"] != "approve" ||
		testkit.SummaryOf(entries[0])["comment"] != "Checked: nothing links to it any more." || entries[0].AgentID != "claude-3" {
		t.Fatalf("escalation.decision entries %+v", entries)
	}
	for _, r := range h.audit.Records() {
		b, _ := json.Marshal(r)
		if strings.Contains(string(b), tokReviewer) || strings.Contains(string(b), tokClaude) {
			t.Fatalf("a token reached the audit trail: %s", b)
		}
	}
	// The queue is empty again, and a second decision conflicts.
	res = h.do(http.MethodGet, "/admin/escalations", tokAdmin, nil)
	res.json(t, &list)
	if list.Count != 0 {
		t.Errorf("queue not empty: %s", res.body)
	}
	res = h.do(http.MethodPost, "/admin/escalations/"+resp.RequestID+"/decision", tokAdmin, map[string]any{"decision": "reject"})
	if _, code, _, _ := res.apiError(t); res.status != http.StatusConflict || code != "conflict" {
		t.Errorf("second decision: %d %s", res.status, res.body)
	}
}
