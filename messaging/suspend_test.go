package messaging

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/internal/escalation"
	"github.com/sacpgw/gateway/internal/testkit"
	"github.com/sacpgw/gateway/mailbox"
)

// TestWaitingForHumanSuspends: a message whose status is WAITING_FOR_HUMAN
// opens an escalation and suspends its thread; until a person decides, a
// new REQUEST in that thread is 409 thread_suspended naming the
// escalation, on every replica, while other messages and other threads
// flow. The decision resumes the thread and reaches the waiting agent as
// the gateway's RESPONSE to its message. On both state backends.
func TestWaitingForHumanSuspends(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			h := newHarness(t, harnessOpts{redis: b.redis})
			h.run()
			w := h.send("executor", `{"message_id":"wait_1","message_type":"notification","sender_id":"executor","receiver_id":"orch","workflow_id":"wf_s","action":"approval_needed","status":"WAITING_FOR_HUMAN","payload":{"question":"refund 900 EUR?"}}`)
			if w.Code != http.StatusAccepted {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			sus, _ := jsonBody(t, w)["thread_suspended"].(map[string]any)
			if sus["request_id"] != "esc_1" {
				t.Fatalf("answer %s", w.Body)
			}
			opened := h.esc.requests()
			if len(opened) != 1 || opened[0].Type != escalation.TypeMessage || opened[0].AgentID != "executor" || !strings.Contains(opened[0].Content, `"waiting_for_human"`) {
				t.Fatalf("escalations %+v", opened)
			}
			h.peers["orch"].WaitFor(1) // the message itself is delivered

			req := `{"message_type":"request","sender_id":"orch","receiver_id":"executor","workflow_id":"wf_s","action":"book"}`
			replicas := []*Service{h.svc}
			if b.redis {
				replicas = append(replicas, h.replica())
			}
			for i, svc := range replicas {
				w := h.sendTo(svc, "orch", req)
				e := decodeError(t, w, http.StatusConflict, "thread_suspended")
				if !strings.Contains(e.Error.Message, "esc_1") || param(e) != "workflow_id" || w.Header().Get("X-Escalation-Id") != "esc_1" {
					t.Errorf("replica %d: %+v %v", i+1, e.Error, w.Header())
				}
			}
			if sum := h.trail.Last(KindMessageReject); sum["error_code"] != "thread_suspended" {
				t.Errorf("message.reject %v", sum)
			}
			if n := len(h.peers["executor"].Received()); n != 0 {
				t.Fatalf("a REQUEST reached the suspended thread's agent")
			}
			// Other messages of the thread, and REQUESTs elsewhere, flow.
			if w := h.send("orch", `{"message_type":"notification","sender_id":"orch","receiver_id":"executor","workflow_id":"wf_s","action":"status"}`); w.Code != http.StatusAccepted {
				t.Errorf("notification in the suspended thread: %d %s", w.Code, w.Body)
			}
			if w := h.send("orch", strings.Replace(req, "wf_s", "wf_other", 1)); w.Code != http.StatusOK {
				t.Errorf("REQUEST in another thread: %d %s", w.Code, w.Body)
			}
			// A second WAITING_FOR_HUMAN keeps the escalation there is.
			w = h.send("executor", `{"message_type":"notification","sender_id":"executor","receiver_id":"orch","workflow_id":"wf_s","action":"approval_needed","payload":{"status":"waiting_for_human"}}`)
			if w.Code != http.StatusAccepted || len(h.esc.requests()) != 1 {
				t.Fatalf("second suspension: %d %s, %d escalations", w.Code, w.Body, len(h.esc.requests()))
			}

			// The person decides.
			err := h.svc.Resolve(context.Background(), escalation.Decided{ID: "esc_1", Type: escalation.TypeMessage, AgentID: "executor",
				Approved: true, State: "APPROVED", Content: opened[0].Content, Reviewer: "alice", Decision: "approve", Comment: "refund approved"})
			if err != nil {
				t.Fatal(err)
			}
			// The notification and the REQUEST elsewhere, then the decision.
			got := h.peers["executor"].WaitFor(3)
			var resp map[string]any
			for _, r := range got {
				if m := decode(t, r.Body); m["sender_id"] == GatewayID {
					resp = m
				}
			}
			payload, _ := resp["payload"].(map[string]any)
			if resp["message_type"] != "response" || resp["sender_id"] != GatewayID || resp["receiver_id"] != "executor" || resp["in_reply_to"] != "wait_1" ||
				resp["workflow_id"] != "wf_s" || payload["comment"] != "refund approved" || payload["decision"] != "approve" || payload["thread_resumed"] != true {
				t.Errorf("the waiting agent got %v", resp)
			}
			thread := h.thread(mailbox.KeyWorkflow, "wf_s")
			if last := thread[len(thread)-1]; last.Origin != "gateway" || last.InReplyTo != "wait_1" || last.Type != "response" {
				t.Errorf("thread ends with %+v", last)
			}
			for i, svc := range replicas {
				if w := h.sendTo(svc, "orch", req); w.Code != http.StatusOK {
					t.Errorf("replica %d after the decision: %d %s", i+1, w.Code, w.Body)
				}
			}
		})
	}
}

// TestWaitingForHumanEdges: SAM says it in the payload; a REQUEST that
// says it is relayed and suspends; without a thread it is refused; when no
// person can be asked the message is refused and the thread not
// suspended.
func TestWaitingForHumanEdges(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.peers["orch"].Set(testkit.ReplyWith(func(req map[string]any) string {
		return `{"correlation_id":"c_w","sender":{"agent_id":"orch"},"recipient":{"agent_id":"executor"},"message_type":"ACK","metadata":{"in_reply_to":"` + str(req["message_id"]) + `"}}`
	}))
	w := h.send("executor", `{"message_id":"wq","correlation_id":"c_w","sender":{"agent_id":"executor"},"recipient":{"agent_id":"orch"},"message_type":"REQUEST","payload":{"action":"ask","status":"WAITING_FOR_HUMAN"}}`)
	if w.Code != http.StatusOK || w.Header().Get("X-Escalation-Id") != "esc_1" {
		t.Fatalf("%d %s %v", w.Code, w.Body, w.Header())
	}
	if sus, ok, err := h.history.Suspended(context.Background(), mailbox.KeyCorrelation, "c_w"); err != nil || !ok || sus.MessageID != "wq" || sus.Sender != "executor" {
		t.Fatalf("suspension %+v %v %v", sus, ok, err)
	}
	decodeError(t, h.send("orch", `{"correlation_id":"c_w","sender":{"agent_id":"orch"},"recipient":{"agent_id":"executor"},"message_type":"REQUEST","payload":{"action":"go"}}`), http.StatusConflict, "thread_suspended")

	e := decodeError(t, h.send("executor", `{"message_type":"notification","sender_id":"executor","receiver_id":"orch","action":"x","status":"WAITING_FOR_HUMAN"}`), http.StatusBadRequest, "invalid_request")
	if param(e) != "workflow_id" {
		t.Errorf("no thread: %+v", e.Error)
	}

	h.esc.setFail(true)
	w = h.send("executor", `{"message_type":"notification","sender_id":"executor","receiver_id":"orch","workflow_id":"wf_nobody","action":"x","status":"WAITING_FOR_HUMAN"}`)
	decodeError(t, w, http.StatusServiceUnavailable, "escalation_unavailable")
	if _, ok, _ := h.history.Suspended(context.Background(), mailbox.KeyWorkflow, "wf_nobody"); ok {
		t.Error("suspended without an escalation")
	}
	if n := len(h.thread(mailbox.KeyWorkflow, "wf_nobody")); n != 0 {
		t.Errorf("the refused message is in its thread (%d)", n)
	}
	if sum := h.trail.Last(KindMessageReject); sum["error_code"] != "escalation_unavailable" {
		t.Errorf("message.reject %v", sum)
	}
}

// TestSuspensionLiftedWhenRefused: a WAITING_FOR_HUMAN message refused
// after the thread was suspended (here the audit trail cannot take it)
// does not leave the thread suspended: nobody waits on it.
func TestSuspensionLiftedWhenRefused(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			h := newHarness(t, harnessOpts{redis: b.redis})
			h.trail.SetFail(true)
			w := h.send("executor", `{"message_type":"notification","sender_id":"executor","receiver_id":"orch","workflow_id":"wf_l","action":"x","status":"WAITING_FOR_HUMAN"}`)
			decodeError(t, w, http.StatusServiceUnavailable, "audit_unavailable")
			if len(h.esc.requests()) != 1 {
				t.Fatalf("%d escalations", len(h.esc.requests()))
			}
			if _, ok, err := h.history.Suspended(context.Background(), mailbox.KeyWorkflow, "wf_l"); ok || err != nil {
				t.Errorf("the thread of a refused message stays suspended (%v)", err)
			}
		})
	}
}

// TestResolveSuspensionRefusals: a decision whose content is not what the
// gateway wrote is refused rather than acted on.
func TestResolveSuspensionRefusals(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	env := `{"message_id":"w1","message_type":"notification","sender_id":"executor","receiver_id":"orch","workflow_id":"wf_x","action":"x","status":"WAITING_FOR_HUMAN"}`
	content := func(kind, id string) string {
		b, _ := json.Marshal(suspendedThread{WaitingForHuman: json.RawMessage(env), Thread: threadRef{Kind: kind, ID: id}})
		return string(b)
	}
	tests := []struct {
		name, agent, content string
	}{
		{"another thread", "executor", content("workflow", "wf_other")},
		{"another agent", "orch", content("workflow", "wf_x")},
		{"not an envelope", "executor", `{"waiting_for_human":{"x":1},"thread":{"kind":"workflow","id":"wf_x"}}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := h.svc.Resolve(context.Background(), escalation.Decided{ID: "esc_9", AgentID: tc.agent, Decision: "approve", Content: tc.content})
			if err == nil {
				t.Fatal("resolved")
			}
		})
	}
	if n := len(h.records(KindMessage)); n != 0 {
		t.Errorf("%d messages recorded for refused decisions", n)
	}
}
