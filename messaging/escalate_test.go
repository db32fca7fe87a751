package messaging

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/internal/testkit"

	"github.com/sacpgw/gateway/internal/escalation"
	"github.com/sacpgw/gateway/mailbox"
)

func samError(corr, severity, retryable string) string {
	r := ""
	if retryable != "" {
		r = `,"retryable":` + retryable
	}
	return `{"correlation_id":"` + corr + `","sender":{"agent_id":"executor"},"recipient":{"agent_id":"orch"},"message_type":"ERROR","error":{"code":"VALIDATION_FAILED","message":"Tax ID format is invalid","severity":"` + severity + `"` + r + `}}`
}

// TestErrorEscalation: an agent's ERROR goes to a person when it is fatal
// (CRITICAL, FATAL), not retryable, or its sender's max_retry_attempts-th
// ERROR in the thread; the orchestrator it was sent to is the one that
// waits, and the answer names the escalation.
func TestErrorEscalation(t *testing.T) {
	tests := []struct {
		name string
		// sends are posted in order; want says which were escalated.
		sends  []string
		want   []bool
		reason string
	}{
		{"critical", []string{samError("c1", "CRITICAL", "")}, []bool{true}, "reported a CRITICAL error VALIDATION_FAILED: Tax ID format is invalid"},
		{"fatal", []string{samError("c1", "fatal", "true")}, []bool{true}, "FATAL error"},
		{"not retryable", []string{samError("c1", "ERROR", "false")}, []bool{true}, "which is not retryable"},
		{"retryable until the limit", []string{samError("c1", "WARNING", "true"), samError("c1", "WARNING", "true"), samError("c1", "ERROR", "")}, []bool{false, false, true},
			"reported its 3. error VALIDATION_FAILED in this thread; max_retry_attempts is 3"},
		{"counted per thread", []string{samError("c1", "WARNING", "true"), samError("c2", "WARNING", "true"), samError("c3", "WARNING", "true")}, []bool{false, false, false}, ""},
		{"ACL errors by count", []string{
			`{"message_type":"error","sender_id":"executor","receiver_id":"orch","workflow_id":"wf_e","action":"run","error":"disk full","payload":{"error_code":"E_DISK"}}`,
			`{"message_type":"error","sender_id":"executor","receiver_id":"orch","workflow_id":"wf_e","action":"run","error":"disk full","payload":{"error_code":"E_DISK"}}`,
			`{"message_type":"error","sender_id":"executor","receiver_id":"orch","workflow_id":"wf_e","action":"run","error":"disk full","payload":{"error_code":"E_DISK"}}`,
		}, []bool{false, false, true}, "its 3. error E_DISK"},
		{"without a thread each counts alone", []string{
			`{"message_type":"error","sender_id":"executor","receiver_id":"orch","action":"run","error":"disk full"}`,
			`{"message_type":"error","sender_id":"executor","receiver_id":"orch","action":"run","error":"disk full"}`,
		}, []bool{false, false}, ""},
		{"events are not errors", []string{`{"correlation_id":"c1","sender":{"agent_id":"executor"},"recipient":{"agent_id":"orch"},"message_type":"EVENT","payload":{"action":"failed","severity":"FATAL"}}`}, []bool{false}, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOpts{})
			for i, body := range tc.sends {
				w := h.send("executor", body)
				if w.Code != http.StatusAccepted {
					t.Fatalf("send %d: %d %s", i, w.Code, w.Body)
				}
				esc, _ := jsonBody(t, w)["escalation"].(map[string]any)
				if (esc != nil) != tc.want[i] {
					t.Fatalf("send %d: escalation %v, want %v", i, esc, tc.want[i])
				}
				if esc != nil && (str(esc["request_id"]) == "" || !strings.Contains(str(esc["reason"]), tc.reason) || str(esc["human_review_url"]) == "") {
					t.Errorf("escalation %v, want reason containing %q", esc, tc.reason)
				}
			}
			opened := h.esc.requests()
			n := 0
			for _, w := range tc.want {
				if w {
					n++
				}
			}
			if len(opened) != n {
				t.Fatalf("%d escalations opened, want %d", len(opened), n)
			}
			for _, o := range opened {
				if o.AgentID != "orch" || o.Type != escalation.TypeMessage || !strings.Contains(o.Content, "executor") {
					t.Errorf("escalation request %+v", o)
				}
			}
			if got := len(h.records(KindMessageEscalation)); got != n || h.svc.Stats().Escalated != int64(n) {
				t.Errorf("%d message.escalation entries, %d counted, want %d", got, h.svc.Stats().Escalated, n)
			}
		})
	}
}

// TestEscalationNotOpened: when the review queue cannot be reached the
// ERROR is still relayed; the missing escalation is audited.
func TestEscalationNotOpened(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.esc.setFail(true)
	w := h.send("executor", samError("c1", "FATAL", ""))
	if w.Code != http.StatusAccepted || jsonBody(t, w)["escalation"] != nil {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	e := h.records(KindMessageEscalation)
	if len(e) != 1 || testkit.SummaryOf(e[0])["opened"] != false || e[0].AgentID != "orch" {
		t.Errorf("message.escalation %+v", e)
	}
	if n, _ := h.svc.QueueLen(context.Background()); n != 1 {
		t.Errorf("the ERROR was not queued")
	}
	if h.svc.Stats().Escalated != 0 {
		t.Errorf("counted as escalated")
	}
}

// decided is what the approval service hands back once a reviewer
// decided the escalation opened[i].
func decided(h *harness, i int, reviewer, decision, comment string) escalation.Decided {
	o := h.esc.requests()[i]
	return escalation.Decided{ID: "esc_1", Type: o.Type, AgentID: o.AgentID, Approved: decision == "approve", State: "APPROVED",
		Content: o.Content, Reviewer: reviewer, Decision: decision, Comment: comment}
}

// TestResolveAgentError: the reviewer's decision on an agent's ERROR comes
// back to the waiting agent as a RESPONSE from "human", recorded in the
// thread, audited and delivered to its endpoint.
func TestResolveAgentError(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.run()
	if w := h.send("executor", `{"message_id":"e_1","correlation_id":"c_res","sender":{"agent_id":"executor"},"recipient":{"agent_id":"orch"},"message_type":"ERROR","error":{"code":"X","message":"broken","severity":"CRITICAL"}}`); w.Code != http.StatusAccepted {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	h.peers["orch"].WaitFor(1) // the ERROR itself
	if err := h.svc.Resolve(context.Background(), decided(h, 0, "security-lead", "approve", "retry tomorrow")); err != nil {
		t.Fatal(err)
	}
	got := h.peers["orch"].WaitFor(2)[1]
	m := decode(t, got.Body)
	p, _ := m["payload"].(map[string]any)
	if m["message_type"] != "RESPONSE" || m["sender"].(map[string]any)["agent_id"] != HumanID || m["correlation_id"] != "c_res" ||
		m["metadata"].(map[string]any)["in_reply_to"] != "e_1" || p["action"] != "human_decision" || p["decision"] != "approve" ||
		p["reviewer"] != "security-lead" || p["comment"] != "retry tomorrow" || p["escalation_id"] != "esc_1" {
		t.Errorf("orchestrator got %s", got.Body)
	}
	if got.Header.Get("X-Gateway-Sender") != HumanID {
		t.Errorf("headers %v", got.Header)
	}
	thread := h.thread(mailbox.KeyCorrelation, "c_res")
	if len(thread) != 2 || thread[1].Origin != "human" || thread[1].Sender != HumanID || thread[1].Recipients[0] != "orch" {
		t.Errorf("thread %+v", thread)
	}
	var audited bool
	for _, r := range h.records(KindMessage) {
		audited = audited || (testkit.SummaryOf(r)["origin"] == "human" && testkit.SummaryOf(r)["reviewer"] == "security-lead" && testkit.SummaryOf(r)["escalation_id"] == "esc_1" && r.PayloadSHA256 == sha256Hex(got.Body))
	}
	if !audited {
		t.Errorf("the reviewer's RESPONSE is not audited: %+v", h.records(KindMessage))
	}
	// The waiting agent reads the decision in its history.
	if w := h.historyOf("orch", "correlation_id=c_res"); w.Code != http.StatusOK || len(jsonBody(t, w)["data"].([]any)) != 2 {
		t.Errorf("history %d %s", w.Code, w.Body)
	}
}

// TestResolveFailedDelivery: the decision on a failed delivery replies to
// the gateway's ERROR, in the message's workflow.
func TestResolveFailedDelivery(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.peers["executor"].Srv.Close()
	w := h.send("orch", `{"message_id":"m_1","message_type":"request","sender_id":"orch","receiver_id":"executor","workflow_id":"wf_fd","action":"run"}`)
	if w.Code != http.StatusBadGateway {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	gwErr := str(jsonBody(t, w)["envelope"].(map[string]any)["message_id"])
	h.run()
	if err := h.svc.Resolve(context.Background(), decided(h, 0, "admin", "reject", "")); err != nil {
		t.Fatal(err)
	}
	got := decode(t, h.peers["orch"].WaitFor(1)[0].Body)
	if got["message_type"] != "response" || got["sender_id"] != HumanID || got["in_reply_to"] != gwErr || got["workflow_id"] != "wf_fd" || got["action"] != "human_decision" {
		t.Errorf("orchestrator got %v", got)
	}
	if thread := h.thread(mailbox.KeyWorkflow, "wf_fd"); len(thread) != 3 || thread[2].Origin != "human" {
		t.Errorf("thread %+v", thread)
	}
}

// TestResolveRefusals: a decision without a review, or about content that
// is no message, is refused and changes nothing; an agent without an
// endpoint gets the decision in its thread only.
func TestResolveRefusals(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	ctx := context.Background()
	errEnv := `{"message_id":"e_9","correlation_id":"c_9","sender":{"agent_id":"executor"},"recipient":{"agent_id":"small"},"message_type":"ERROR","error":{"code":"X","message":"broken"}}`
	for _, tc := range []struct {
		name string
		d    escalation.Decided
		want string
	}{
		{"expired without a review", escalation.Decided{ID: "esc_1", AgentID: "small", Content: errEnv, State: "REJECTED"}, "no review"},
		{"content is no message", escalation.Decided{ID: "esc_1", AgentID: "small", Content: `{"spawn":"x"}`, Decision: "approve"}, "neither an envelope nor a failed delivery"},
		{"content is not JSON", escalation.Decided{ID: "esc_1", AgentID: "small", Content: `<`, Decision: "approve"}, "neither an envelope nor a failed delivery"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := h.svc.Resolve(ctx, tc.d)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("got %v, want %q", err, tc.want)
			}
		})
	}
	if n := len(h.records(KindMessage)); n != 0 {
		t.Errorf("%d messages recorded by refused decisions", n)
	}
	d := escalation.Decided{ID: "esc_2", AgentID: "small", Content: errEnv, Decision: "approve", Reviewer: "admin", State: "APPROVED"}
	if err := h.svc.Resolve(ctx, d); err != nil {
		t.Fatal(err)
	}
	if thread := h.thread(mailbox.KeyCorrelation, "c_9"); len(thread) != 1 || thread[0].Origin != "human" || thread[0].Recipients[0] != "small" {
		t.Errorf("thread %+v", thread)
	}
	if n, _ := h.svc.QueueLen(ctx); n != 0 {
		t.Errorf("queued %d for an agent without an endpoint", n)
	}
	// The trail being down fails the resolution (the approval service
	// tries again), and nothing is recorded.
	h.trail.SetFail(true)
	if err := h.svc.Resolve(ctx, escalation.Decided{ID: "esc_3", AgentID: "small", Content: strings.Replace(errEnv, "c_9", "c_10", 1), Decision: "approve"}); err == nil {
		t.Error("resolved without an audit entry")
	}
	if n := len(h.thread(mailbox.KeyCorrelation, "c_10")); n != 0 {
		t.Errorf("recorded without an audit entry")
	}
}
