package approval

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/metrics"
)

var _ Metrics = (*metrics.Metrics)(nil)

// The service counts its decisions by status, its escalations by outcome,
// and times each policy evaluation, on the gateway's /metrics.
func TestApprovalMetricsExported(t *testing.T) {
	m := metrics.New(metrics.Options{NoRuntime: true})
	store := &failingGets{MemoryStore: NewMemoryStore()}
	h := newHarness(t, func(d *Deps) { d.Metrics, d.Store = m, store })

	approveOne(t, h) // approved
	bad := approvalRequest()
	delete(bad, "rationale")
	h.submit(tokClaude, bad)       // rejected by the policy
	kept := escalate(t, h, "a")    // escalated…
	dropped := escalate(t, h, "b") // escalated…
	escalate(t, h, "c")            // escalated, and left to expire
	h.do(http.MethodPost, "/admin/escalations/"+kept+"/decision", tokReviewer, map[string]any{"decision": "approve"})
	h.do(http.MethodPost, "/admin/escalations/"+dropped+"/decision", tokReviewer, map[string]any{"decision": "reject"})
	h.clock.Advance(25 * time.Hour)
	h.svc.ExpireEscalations(t.Context()) // …expired
	h.decider.set("", errBoom)
	h.submit(tokClaude, approvalRequest()) // the policy fails: rejected (fail closed)
	h.decider.set("", nil)
	store.fail.Store(true)
	mod := approvalRequest()
	mod["action"], mod["target_id"] = ActionModify, AssignedID("design", newID())
	h.submit(tokClaude, mod) // no facts: rejected without asking the policy
	store.fail.Store(false)

	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	b, _ := io.ReadAll(rec.Body)
	body := string(b)
	for _, line := range []string{
		`gateway_policy_decisions_total{point="approval",verdict="approved"} 1`,
		`gateway_policy_decisions_total{point="approval",verdict="escalated"} 3`,
		`gateway_policy_decisions_total{point="approval",verdict="rejected"} 3`,
		`gateway_approval_escalations_total{outcome="approved"} 1`,
		`gateway_approval_escalations_total{outcome="rejected"} 1`,
		`gateway_approval_escalations_total{outcome="expired"} 1`,
		// Every evaluation the policy was asked for, not the one without
		// facts.
		`gateway_approval_validation_seconds_count 6`,
	} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("metrics lack %q", line)
		}
	}
	if t.Failed() {
		t.Log(body)
	}
}
