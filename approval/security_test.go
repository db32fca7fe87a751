package approval

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/testkit"
	"github.com/sacpgw/gateway/policy"
)

func TestImpersonationIsRefusedAndAudited(t *testing.T) {
	h := newHarness(t)
	req := approvalRequest()
	req["agent_id"] = "gemini-pro"
	res, _ := h.submit(tokClaude, req)
	typ, code, _, msg := res.apiError(t)
	if res.status != http.StatusForbidden || typ != "permission_error" || code != "policy_denied" || !strings.Contains(msg, "claude-3") {
		t.Fatalf("impersonation: %d %s", res.status, res.body)
	}
	got := h.audit.ByKind(audit.KindAgentRequest)
	if len(got) != 1 || got[0].AgentID != "claude-3" || testkit.SummaryOf(got[0])["claimed_agent_id"] != "gemini-pro" || testkit.SummaryOf(got[0])["verdict"] != "refused" {
		t.Fatalf("audit %+v", got)
	}
	if h.decider.lastInput() != nil {
		t.Error("an impersonating request reached the policy")
	}
}

func TestAgentsSeeOnlyTheirOwnRequests(t *testing.T) {
	h := newHarness(t)
	_, resp := h.submit(tokClaude, approvalRequest())
	own, _ := h.status(tokClaude, resp.RequestID)
	mustStatus(t, own, http.StatusOK)

	other, _ := h.status(tokGemini, resp.RequestID)
	unknown, _ := h.status(tokGemini, "req-00000000000000000000000000000000")
	for name, res := range map[string]result{"other agent's": other, "unknown": unknown} {
		_, code, _, msg := res.apiError(t)
		if res.status != http.StatusNotFound || code != "not_found" || !strings.Contains(msg, "exists for this caller") {
			t.Errorf("%s request: %d %s", name, res.status, res.body)
		}
	}

	// Nor may they report on it.
	res, _ := h.submit(tokGemini, map[string]any{"agent_id": "gemini-pro", "request_type": "REPORT", "request_id": resp.RequestID, "completed": true, "changes_made": "x"})
	mustStatus(t, res, http.StatusNotFound)
	_, st := h.status(tokClaude, resp.RequestID)
	if st.State != StateApproved {
		t.Errorf("state %s after another agent's REPORT", st.State)
	}
}

func TestReportDigestMismatchEscalatesDeviation(t *testing.T) {
	h := newHarness(t)
	_, resp := h.submit(tokClaude, approvalRequest())
	other := sha256Hex([]byte("# New Feature Design\n... and something else"))
	res, rep := h.submit(tokClaude, map[string]any{
		"agent_id": "claude-3", "request_type": "REPORT", "request_id": resp.RequestID, "completed": true,
		"changes_made": map[string]any{"summary": "created the design", "content_sha256": "sha256:" + strings.ToUpper(other)},
	})
	mustStatus(t, res, http.StatusOK)
	if rep.Status != StatusEscalated || rep.State != StateEscalated || rep.HumanReviewURL == nil || rep.ContentSHA256 != resp.ContentSHA256 {
		t.Fatalf("deviation: %s", res.body)
	}
	if i := slices.IndexFunc(rep.Violations, func(v policy.Violation) bool { return v.Rule == "report.deviation" }); i < 0 {
		t.Errorf("no report.deviation violation: %+v", rep.Violations)
	}
	_, st := h.status(tokClaude, resp.RequestID)
	if st.State != StateEscalated || st.Escalation.Kind != escalationKindDeviation || st.Escalation.ReportedSHA256 != other {
		t.Fatalf("status %+v", st.Escalation)
	}
	decisions := h.audit.ByKind(audit.KindAgentDecision)
	last := decisions[len(decisions)-1]
	if testkit.SummaryOf(last)["deviation"] != true || testkit.SummaryOf(last)["reported_sha256"] != other || testkit.SummaryOf(last)["content_sha256"] != resp.ContentSHA256 {
		t.Errorf("deviation audit %+v", testkit.SummaryOf(last))
	}

	// A reviewer accepting the deviation completes the request.
	res = h.do(http.MethodPost, "/admin/escalations/"+resp.RequestID+"/decision", tokAlice, map[string]any{"decision": "approve", "comment": "cosmetic"})
	mustStatus(t, res, http.StatusOK)
	_, st = h.status(tokClaude, resp.RequestID)
	if st.State != StateCompleted || st.History[len(st.History)-1].By != "reviewer:alice" {
		t.Fatalf("after review: %+v", st)
	}
}

func TestReportWithoutCompletionKeepsApproval(t *testing.T) {
	h := newHarness(t)
	_, resp := h.submit(tokClaude, approvalRequest())
	res, rep := h.submit(tokClaude, map[string]any{"agent_id": "claude-3", "request_type": "REPORT", "request_id": resp.RequestID,
		"completed": false, "changes_made": "blocked by a failing test"})
	mustStatus(t, res, http.StatusOK)
	_, st := h.status(tokClaude, resp.RequestID)
	if rep.State != StateApproved || st.State != StateApproved || !strings.Contains(st.History[len(st.History)-1].Note, "failing test") {
		t.Fatalf("report %s status %+v", res.body, st.History)
	}
}

func TestSubmitRateLimit(t *testing.T) {
	h := newHarness(t)
	req := approvalRequest()
	for i := range 60 {
		res, _ := h.submit(tokClaude, req)
		mustStatus(t, res, http.StatusOK)
		if i == 0 && res.header.Get("X-Ratelimit-Limit-Requests") != "60" {
			t.Errorf("x-ratelimit-limit-requests %q", res.header.Get("X-Ratelimit-Limit-Requests"))
		}
	}
	res, _ := h.submit(tokClaude, req)
	typ, code, _, _ := res.apiError(t)
	if res.status != http.StatusTooManyRequests || typ != "rate_limit_error" || code != "rate_limit_exceeded" {
		t.Fatalf("61st: %d %s", res.status, res.body)
	}
	if s, err := strconv.Atoi(res.header.Get("Retry-After")); err != nil || s < 1 {
		t.Errorf("Retry-After %q", res.header.Get("Retry-After"))
	}
	if res.header.Get("X-Ratelimit-Remaining-Requests") != "0" {
		t.Errorf("remaining %q", res.header.Get("X-Ratelimit-Remaining-Requests"))
	}
	if n := len(h.audit.ByKind(audit.KindRateLimitReject)); n != 1 {
		t.Errorf("%d ratelimit.reject entries", n)
	}
	// The limit is per agent.
	req["agent_id"] = "gemini-pro"
	res, _ = h.submit(tokGemini, req)
	mustStatus(t, res, http.StatusOK)
}

func TestStrictDecoding(t *testing.T) {
	h := newHarness(t)
	valid := `{"agent_id":"claude-3","request_type":"APPROVAL","action":"create","target_type":"design","content":"x","rationale":"y"`
	cases := []struct {
		note, body string
		status     int
		param      string
	}{
		{"unknown field", valid + `,"priority":"high"}`, 400, "priority"},
		{"duplicate key", valid + `,"agent_id":"claude-3"}`, 400, "agent_id"},
		{"nested duplicate", valid[:len(valid)-len(`,"rationale":"y"`)] + `,"deviations":[{"a":"1","a":"2"}]}`, 400, "a"},
		{"wrong type", valid + `,"references":"arch-001"}`, 400, "references"},
		{"deviation values are strings", valid + `,"deviations":[{"rule":1}]}`, 400, "deviations"},
		{"unknown request_type", strings.Replace(valid, "APPROVAL", "PLEASE", 1) + "}", 400, "request_type"},
		{"unknown action", strings.Replace(valid, `"create"`, `"destroy"`, 1) + "}", 400, "action"},
		{"missing action", strings.Replace(valid, `"action":"create",`, "", 1) + "}", 400, "action"},
		{"unknown target_type", strings.Replace(valid, `"design"`, `"wiki"`, 1) + "}", 400, "target_type"},
		{"missing agent_id", strings.Replace(valid, `"agent_id":"claude-3",`, "", 1) + "}", 400, "agent_id"},
		{"trailing data", valid + `}{}`, 400, ""},
		{"not an object", `["APPROVAL"]`, 400, ""},
		{"empty", ``, 400, ""},
		{"syntax", valid, 400, ""},
		{"invalid utf-8", valid + `,"risk_assessment":"` + "\xff" + `"}`, 400, ""},
		{"bad timestamp", valid + `,"timestamp":"yesterday"}`, 400, "timestamp"},
		{"report fields on approval", valid + `,"completed":true}`, 400, "request_type"},
		{"report without request_id", `{"agent_id":"claude-3","request_type":"REPORT","completed":true}`, 400, "request_id"},
		{"bad digest", `{"agent_id":"claude-3","request_type":"REPORT","request_id":"r","changes_made":{"content_sha256":"abc"}}`, 400, "changes_made.content_sha256"},
		{"unknown changes_made field", `{"agent_id":"claude-3","request_type":"REPORT","request_id":"r","changes_made":{"sha":"abc"}}`, 400, "changes_made"},
		{"too large", valid + `,"risk_assessment":"` + strings.Repeat("a", 51<<10) + `"}`, 413, ""},
		{"valid", valid + `,"timestamp":"2025-11-02T09:00:00Z"}`, 200, ""},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			res := h.do(http.MethodPost, "/agent/request", tokClaude, []byte(tc.body))
			if res.status != tc.status {
				t.Fatalf("status %d, want %d: %s", res.status, tc.status, res.body)
			}
			if tc.status == 200 {
				return
			}
			typ, _, param, msg := res.apiError(t)
			if typ != "invalid_request_error" || param != tc.param || msg == "" {
				t.Errorf("type %q param %q, want param %q: %s", typ, param, tc.param, res.body)
			}
		})
	}
	// Refusals are audited too, with the digest of what was received.
	for _, r := range h.audit.ByKind(audit.KindAgentRequest) {
		if testkit.SummaryOf(r)["verdict"] == "refused" && testkit.SummaryOf(r)["status"] == 400 && r.PayloadSHA256 == "" {
			t.Fatalf("refusal without payload digest: %+v", r)
		}
	}
}

func TestAdminAuthentication(t *testing.T) {
	h := newHarness(t)
	req := approvalRequest()
	req["risk_assessment"] = "high"
	_, resp := h.submit(tokClaude, req)
	decide := func(token string, body map[string]any) result {
		return h.do(http.MethodPost, "/admin/escalations/"+resp.RequestID+"/decision", token, body)
	}
	cases := []struct {
		note, token string
		status      int
		code        string
	}{
		{"no token", "", 401, "invalid_api_key"},
		{"unknown token", "nope", 401, "invalid_api_key"},
		{"agent token", tokClaude, 403, "policy_denied"},
		{"reviewer", tokReviewer, 200, ""},
		{"admin", tokAdmin, 200, ""},
	}
	for _, tc := range cases {
		res := h.do(http.MethodGet, "/admin/escalations", tc.token, nil)
		if res.status != tc.status {
			t.Errorf("list with %s: %d %s", tc.note, res.status, res.body)
		}
		if tc.code != "" {
			if _, code, _, _ := res.apiError(t); code != tc.code {
				t.Errorf("list with %s: code %s", tc.note, code)
			}
			res = decide(tc.token, map[string]any{"decision": "approve"})
			if res.status != tc.status {
				t.Errorf("decide with %s: %d %s", tc.note, res.status, res.body)
			}
		}
	}
	if n := len(h.audit.ByKind(audit.KindAuthFailure)); n != 6 {
		t.Errorf("%d auth.failure entries, want 6", n)
	}

	// A reviewer decides only under their own name.
	res := decide(tokReviewer, map[string]any{"decision": "approve", "reviewer": "alice"})
	if _, code, _, _ := res.apiError(t); res.status != 403 || code != "policy_denied" {
		t.Errorf("reviewer as alice: %d %s", res.status, res.body)
	}
	res = decide(tokReviewer, map[string]any{"decision": "maybe"})
	if _, _, param, _ := res.apiError(t); res.status != 400 || param != "decision" {
		t.Errorf("bad decision: %d %s", res.status, res.body)
	}
	res = decide(tokReviewer, map[string]any{"decision": "reject", "comment": strings.Repeat("x", maxComment+1)})
	if _, _, param, _ := res.apiError(t); res.status != 400 || param != "comment" {
		t.Errorf("long comment: %d %s", res.status, res.body)
	}
	// The admin may name the person it acts for.
	res = decide(tokAdmin, map[string]any{"decision": "reject", "reviewer": "on-call", "comment": "too risky"})
	mustStatus(t, res, http.StatusOK)
	var st StatusResponse
	res.json(t, &st)
	if st.State != StateRejected || st.History[len(st.History)-1].By != "admin:on-call" {
		t.Errorf("admin decision: %s", res.body)
	}
	res = h.do(http.MethodPost, "/admin/escalations/req-nope/decision", tokAdmin, map[string]any{"decision": "reject"})
	mustStatus(t, res, http.StatusNotFound)
}

func TestEscalationExpiry(t *testing.T) {
	h := newHarness(t)
	req := approvalRequest()
	req["risk_assessment"] = "high"
	_, old := h.submit(tokClaude, req)
	h.clock.Advance(23 * time.Hour)
	_, young := h.submit(tokClaude, req)
	if n := h.svc.ExpireEscalations(context.Background()); n != 0 {
		t.Fatalf("expired %d before the deadline", n)
	}
	h.clock.Advance(time.Hour + time.Second)
	if n := h.svc.ExpireEscalations(context.Background()); n != 1 {
		t.Fatalf("expired %d, want 1", n)
	}
	_, st := h.status(tokClaude, old.RequestID)
	last := st.History[len(st.History)-1]
	if st.State != StateRejected || last.By != byExpiry || st.Response.Status != StatusRejected {
		t.Fatalf("old: %+v", st)
	}
	_, st = h.status(tokClaude, young.RequestID)
	if st.State != StateEscalated {
		t.Fatalf("young: %s", st.State)
	}
	e := h.audit.ByKind(audit.KindEscalationDecision)
	if len(e) != 1 || testkit.SummaryOf(e[0])["reviewer"] != byExpiry || testkit.SummaryOf(e[0])["via"] != "expiry" {
		t.Fatalf("expiry audit %+v", e)
	}
}

func TestRunExpiresAndStops(t *testing.T) {
	h := newHarness(t)
	// Run ticks every escalation timeout/24, at least every second.
	h.cfg.Protocol.Timeouts.Escalation = config.Duration(24 * time.Second)
	req := approvalRequest()
	req["risk_assessment"] = "high"
	_, resp := h.submit(tokClaude, req)
	h.clock.Advance(25 * time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.svc.Run(ctx); close(done) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, st := h.status(tokClaude, resp.RequestID)
		if st.State == StateRejected {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Run did not expire the escalation")
		}
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	<-done
}

func TestAuditFailClosed(t *testing.T) {
	h := newHarness(t)
	h.audit.SetFail(true)
	res, _ := h.submit(tokClaude, approvalRequest())
	if _, code, _, _ := res.apiError(t); res.status != http.StatusServiceUnavailable || code != "audit_unavailable" {
		t.Fatalf("closed: %d %s", res.status, res.body)
	}
	if h.decider.lastInput() != nil {
		t.Error("the policy ran although the receipt was not audited")
	}

	// The receipt is written but the decision is not: nothing is approved.
	h2 := newHarness(t)
	failAfter := &failingAfter{Trail: h2.audit, ok: 1}
	h2.svc.audit = &door.Recorder{Log: failAfter, FailClosed: true, Logger: slog.New(slog.DiscardHandler)}
	res, _ = h2.submit(tokClaude, approvalRequest())
	mustStatus(t, res, http.StatusServiceUnavailable)
	recs := h2.svc.store.(*MemoryStore)
	for id := range recs.records {
		rec, _ := recs.Get(context.Background(), id)
		if rec.State != StateRejected || rec.History[len(rec.History)-1].By != byAuditFailure {
			t.Errorf("record after audit failure: %+v", rec)
		}
	}

	// Open mode serves and logs.
	h3 := newHarness(t, func(d *Deps) { d.Audit.FailClosed = false })
	h3.audit.SetFail(true)
	res, resp := h3.submit(tokClaude, approvalRequest())
	mustStatus(t, res, http.StatusOK)
	if resp.Status != StatusApproved {
		t.Errorf("open mode: %s", res.body)
	}
}

// failingAfter lets ok appends through, then fails.
type failingAfter struct {
	*testkit.Trail
	ok int
}

func (f *failingAfter) Append(ctx context.Context, r audit.Record) (audit.Entry, error) {
	if f.ok > 0 {
		f.ok--
		return f.Trail.Append(ctx, r)
	}
	f.SetFail(true)
	return f.Trail.Append(ctx, r)
}

func TestPolicyFailuresDeny(t *testing.T) {
	h := newHarness(t)
	h.decider.set("", errBoom)
	_, resp := h.submit(tokClaude, approvalRequest())
	if resp.Status != StatusRejected || resp.State != StateRejected || resp.Violations[0].Rule != violationPolicyError {
		t.Fatalf("decider error: %+v", resp)
	}
	d := h.audit.ByKind(audit.KindAgentDecision)
	if testkit.SummaryOf(d[0])["error"] != "boom" {
		t.Errorf("error not audited: %+v", testkit.SummaryOf(d[0]))
	}

	h.decider.set("maybe", nil)
	_, resp = h.submit(tokClaude, approvalRequest())
	if resp.Status != StatusRejected || resp.Violations[len(resp.Violations)-1].Rule != violationPolicyStatus {
		t.Fatalf("unknown status: %+v", resp)
	}

	// Belt and braces: a policy approving what RBAC denies is overruled.
	h.decider.set(StatusApproved, nil)
	req := approvalRequest()
	req["agent_id"], req["target_type"] = "copilot-2", "code"
	_, resp = h.submit(tokCopilot, req)
	if resp.Status != StatusRejected || resp.Violations[len(resp.Violations)-1].Rule != violationAuthz {
		t.Fatalf("authz overrule: %+v", resp)
	}

	h.decider.set(StatusClarificationNeeded, nil)
	_, resp = h.submit(tokClaude, approvalRequest())
	if resp.Status != StatusClarificationNeeded || resp.State != StateRejected {
		t.Fatalf("clarification_needed: %+v", resp)
	}
}

func TestPolicyInput(t *testing.T) {
	h := newHarness(t)
	req := approvalRequest()
	req["agent_id"], req["target_type"] = "copilot-2", "design"
	_, resp := h.submit(tokCopilot, req)
	if resp.Status != StatusRejected {
		t.Fatalf("copilot-2 creating: %+v", resp)
	}
	in := h.decider.lastInput()
	for _, k := range []string{"request", "agent", "protocol", "authz", "known_references"} {
		if _, ok := in[k]; !ok {
			t.Errorf("input lacks %s", k)
		}
	}
	agent := in["agent"].(map[string]any)
	if _, ok := agent["token_sha256"]; ok {
		t.Error("the token hash reached the policy input")
	}
	if agent["id"] != "copilot-2" || agent["max_request_size"] != int64(10<<10) {
		t.Errorf("agent %+v", agent)
	}
	authz := in["authz"].(map[string]any)
	if authz["allowed"] != false || !strings.Contains(authz["reason"].(string), "write") {
		t.Errorf("authz %+v", authz)
	}
	p := in["protocol"].(map[string]any)
	if p["limits"].(map[string]any)["max_content_size"] != int64(100<<10) || p["timeouts"].(map[string]any)["escalation_ms"] != int64(86400000) {
		t.Errorf("protocol %+v", p)
	}
	refs := in["known_references"].([]any)
	if !slices.Contains(refs, any("arch-001")) || !slices.Contains(refs, any("req-045")) {
		t.Errorf("known_references %v", refs)
	}
	r := in["request"].(map[string]any)
	if r["content_bytes"] != len("# New Feature Design\n...") || r["completed"] != nil || r["request_id"] != "" {
		t.Errorf("request %+v", r)
	}
}

func TestValidateIsADryRun(t *testing.T) {
	h := newHarness(t)
	req := approvalRequest()
	req["request_type"], req["risk_assessment"] = "VALIDATE", "high"
	_, resp := h.submit(tokClaude, req)
	if resp.Status != StatusEscalated || resp.State != StateCompleted || resp.HumanReviewURL != nil || resp.EscalationReason == nil {
		t.Fatalf("validate: %+v", resp)
	}
	res := h.do(http.MethodGet, "/admin/escalations", tokAdmin, nil)
	if !bytes.Contains(res.body, []byte(`"count":0`)) {
		t.Errorf("a VALIDATE was queued: %s", res.body)
	}
	// Nor can it be reported on as if approved.
	_, rep := h.submit(tokClaude, map[string]any{"agent_id": "claude-3", "request_type": "REPORT", "request_id": resp.RequestID, "completed": true, "changes_made": "x"})
	if rep.Status != StatusRejected || rep.Violations[len(rep.Violations)-1].Rule != violationReportType {
		t.Errorf("report on validate: %+v", rep)
	}
}

func TestCapabilities(t *testing.T) {
	h := newHarness(t)
	res := h.do(http.MethodGet, "/agent/capabilities", tokCopilot, nil)
	mustStatus(t, res, http.StatusOK)
	if bytes.Contains(res.body, []byte(h.cfg.Agents["copilot-2"].TokenSHA256)) || bytes.Contains(res.body, []byte("token_sha256")) {
		t.Fatalf("token hash leaked: %s", res.body)
	}
	var c Capabilities
	res.json(t, &c)
	if c.AgentID != "copilot-2" || c.ApprovalRateLimit != "60/minute" || !slices.Equal(c.AllowedTargets, []string{"code"}) ||
		c.RequestID == "" || c.KnownReferences != 6 {
		t.Errorf("capabilities %s", res.body)
	}
}

func TestNewRequiresDependencies(t *testing.T) {
	_, err := New(Deps{Config: testConfig()})
	if err == nil || !strings.Contains(err.Error(), "Audit, Authorizer, Catalogue, Decider, Limiter, Log, Store") {
		t.Fatalf("err = %v", err)
	}
}

func TestEscalatedReport(t *testing.T) {
	h := newHarness(t)
	_, resp := h.submit(tokClaude, approvalRequest())
	h.decider.set(StatusEscalated, nil)
	res, rep := h.submit(tokClaude, map[string]any{"agent_id": "claude-3", "request_type": "REPORT", "request_id": resp.RequestID,
		"completed": true, "changes_made": "done, with a deviation", "deviations": []map[string]string{{"rule": "std-001"}}})
	mustStatus(t, res, http.StatusOK)
	if rep.Status != StatusEscalated || rep.State != StateEscalated || rep.HumanReviewURL == nil {
		t.Fatalf("escalated report: %s", res.body)
	}
	h.decider.set("", nil)
	res = h.do(http.MethodGet, "/admin/escalations", tokReviewer, nil)
	var list EscalationList
	res.json(t, &list)
	if list.Count != 1 || list.Escalations[0].Escalation.Kind != escalationKindReport || list.Escalations[0].Escalation.Report == nil {
		t.Fatalf("queue: %s", res.body)
	}
	res = h.do(http.MethodPost, "/admin/escalations/"+resp.RequestID+"/decision", tokReviewer, map[string]any{"decision": "approve"})
	mustStatus(t, res, http.StatusOK)
	if _, st := h.status(tokClaude, resp.RequestID); st.State != StateCompleted {
		t.Fatalf("state %s", st.State)
	}
}
