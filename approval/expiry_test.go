package approval

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/testkit"
	"github.com/sacpgw/gateway/internal/testredis"
)

func reportDone(h *harness, id string) (result, LibrarianResponse) {
	h.t.Helper()
	return h.submit(tokClaude, map[string]any{"agent_id": "claude-3", "request_type": "REPORT", "request_id": id,
		"completed": true, "changes_made": "done"})
}

// Which APPROVED requests expire, and when: validity counts from the
// approval (the policy's or a person's), not from a REPORT that did not
// finish the change, and only APPROVED requests expire.
func TestApprovalExpiry(t *testing.T) {
	for _, tc := range []struct {
		note     string
		validity time.Duration // config; 0: the default 24h
		// prepare makes a request and returns its id; the clock then
		// advances by wait before the expiry runs.
		prepare func(t *testing.T, h *harness) string
		wait    time.Duration
		want    State
	}{
		{"approved, just within validity", 0, approveOne, 24*time.Hour - time.Second, StateApproved},
		{"approved, past validity", 0, approveOne, 24*time.Hour + time.Second, StateExpired},
		{"a shorter validity", time.Hour, approveOne, time.Hour + time.Second, StateExpired},
		{"an unfinished REPORT does not renew it", 0, func(t *testing.T, h *harness) string {
			id := approveOne(t, h)
			h.clock.Advance(23 * time.Hour)
			res, rep := h.submit(tokClaude, map[string]any{"agent_id": "claude-3", "request_type": "REPORT", "request_id": id,
				"completed": false, "changes_made": "half done"})
			if res.status != http.StatusOK || rep.State != StateApproved {
				t.Fatalf("unfinished report: %s", res.body)
			}
			return id
		}, time.Hour + time.Second, StateExpired},
		{"approved by a person: from their approval", 0, func(t *testing.T, h *harness) string {
			id := escalate(t, h, "x")
			h.clock.Advance(20 * time.Hour)
			mustStatus(t, h.do(http.MethodPost, "/admin/escalations/"+id+"/decision", tokReviewer, map[string]any{"decision": "approve"}), http.StatusOK)
			return id
		}, 23 * time.Hour, StateApproved},
		{"completed in time", 0, func(t *testing.T, h *harness) string {
			id := approveOne(t, h)
			if res, rep := reportDone(h, id); res.status != http.StatusOK || rep.State != StateCompleted {
				t.Fatalf("report: %s", res.body)
			}
			return id
		}, 48 * time.Hour, StateCompleted},
		{"escalated is the escalation expiry's business", 0, func(t *testing.T, h *harness) string {
			return escalate(t, h, "x")
		}, 23 * time.Hour, StateEscalated},
	} {
		t.Run(tc.note, func(t *testing.T) {
			h := newHarness(t, func(d *Deps) { d.Config.Protocol.Timeouts.ApprovalValidity = config.Duration(tc.validity) })
			id := tc.prepare(t, h)
			h.clock.Advance(tc.wait)
			n := h.svc.ExpireApprovals(t.Context())
			_, st := h.status(tokClaude, id)
			if st.State != tc.want {
				t.Fatalf("state %s, want %s (%d expired)", st.State, tc.want, n)
			}
			if wantN := map[bool]int{true: 1}[tc.want == StateExpired]; n != wantN {
				t.Errorf("expired %d, want %d", n, wantN)
			}
		})
	}
}

func approveOne(t *testing.T, h *harness) string {
	t.Helper()
	res, resp := h.submit(tokClaude, approvalRequest())
	mustStatus(t, res, http.StatusOK)
	if resp.State != StateApproved {
		t.Fatalf("not approved: %s", res.body)
	}
	return resp.RequestID
}

// An expired approval: what the agent reads, what the trail says, and a
// late REPORT refused with a 409 that says why.
func TestExpiredApprovalRefusesReport(t *testing.T) {
	h := newHarness(t)
	id := approveOne(t, h)
	h.clock.Advance(25 * time.Hour)
	if n := h.svc.ExpireApprovals(t.Context()); n != 1 {
		t.Fatalf("expired %d", n)
	}
	_, st := h.status(tokClaude, id)
	last := st.History[len(st.History)-1]
	if last.State != StateExpired || last.By != byExpiry || !strings.Contains(last.Note, "24h0m0s") {
		t.Errorf("history %+v", last)
	}
	r := st.Response
	if r.State != StateExpired || r.Status != StatusRejected || r.Violations[len(r.Violations)-1].Rule != violationExpired ||
		!strings.Contains(r.Feedback, "expired") {
		t.Errorf("response %+v", r)
	}
	e := h.audit.ByKind(audit.KindAgentDecision)
	if got := testkit.SummaryOf(e[len(e)-1]); got["step"] != "expiry" || got["to"] != "EXPIRED" || e[len(e)-1].RequestID != id {
		t.Errorf("expiry audit %+v", got)
	}

	h.decider.mu.Lock()
	calls := h.decider.calls
	h.decider.mu.Unlock()
	res, _ := reportDone(h, id)
	typ, code, _, msg := res.apiError(t)
	if res.status != http.StatusConflict || typ != "invalid_request_error" || code != "conflict" ||
		!strings.Contains(msg, "is EXPIRED") || !strings.Contains(msg, "approval_validity") || !strings.Contains(msg, "Submit a new APPROVAL") {
		t.Fatalf("late REPORT: %d %s", res.status, res.body)
	}
	h.decider.mu.Lock()
	asked := h.decider.calls != calls
	h.decider.mu.Unlock()
	if asked {
		t.Error("the policy judged a REPORT on an expired approval")
	}
	e = h.audit.ByKind(audit.KindAgentDecision)
	if got := testkit.SummaryOf(e[len(e)-1]); got["report_outcome"] != "expired" || got["applied"] != false {
		t.Errorf("late REPORT audit %+v", got)
	}
	if _, st = h.status(tokClaude, id); st.State != StateExpired {
		t.Errorf("state after the late REPORT: %s", st.State)
	}
	// A second run finds nothing more to do.
	if n := h.svc.ExpireApprovals(t.Context()); n != 0 {
		t.Errorf("expired %d again", n)
	}
}

// No audit entry, no expiry (fail closed); the next run retries.
func TestApprovalExpiryAuditedFirst(t *testing.T) {
	h := newHarness(t)
	id := approveOne(t, h)
	h.clock.Advance(25 * time.Hour)
	h.audit.SetFail(true)
	if n := h.svc.ExpireApprovals(t.Context()); n != 0 {
		t.Fatalf("expired %d without an audit entry", n)
	}
	if _, st := h.status(tokClaude, id); st.State != StateApproved {
		t.Fatalf("state %s", st.State)
	}
	h.audit.SetFail(false)
	if n := h.svc.ExpireApprovals(t.Context()); n != 1 {
		t.Fatalf("retry expired %d", n)
	}
}

// Run expires approvals as it does escalations.
func TestRunExpiresApprovals(t *testing.T) {
	h := newHarness(t, func(d *Deps) { d.Config.Protocol.Timeouts.ApprovalValidity = config.Duration(24 * time.Second) })
	id := approveOne(t, h)
	h.clock.Advance(25 * time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.svc.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, st := h.status(tokClaude, id); st.State == StateExpired {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("Run did not expire the approval")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// With Redis, an approval made on one replica is expired by another, and
// the first refuses the late REPORT.
func TestRedisApprovalExpiryTwoReplicas(t *testing.T) {
	srv := testredis.Start(t)
	a := newHarness(t, func(d *Deps) { d.Store = NewRedisStore(srv.Client(t)) })
	b := newHarness(t, func(d *Deps) { d.Store = NewRedisStore(srv.Client(t)) })
	id := approveOne(t, a)
	b.clock.Advance(25 * time.Hour)
	if n := b.svc.ExpireApprovals(t.Context()); n != 1 {
		t.Fatalf("replica b expired %d", n)
	}
	if res, _ := reportDone(a, id); res.status != http.StatusConflict {
		t.Fatalf("late REPORT on replica a: %d %s", res.status, res.body)
	}
}
