package messaging

import (
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/internal/testkit"

	"github.com/sacpgw/gateway/mailbox"
)

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// TestGroupSend: a null receiver with a receiver_type (ACL) or a recipient
// role without agent_id (SAM) reaches every agent of that type the
// sender's RBAC allows, but the sender; each gets its own delivery,
// addressed to it, and its own history entry; the answer lists the
// recipients and their delivery ids. On both state backends.
func TestGroupSend(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			h := newHarness(t, harnessOpts{redis: b.redis, agents: groupAgents, peers: groupPeers})
			h.run()
			// dispatcher's RBAC reaches executor and executor_b, not executor_c.
			w := h.send("dispatcher", `{"message_id":"g_1","message_type":"notification","sender_id":"dispatcher","sender_type":"dispatcher","receiver_id":null,"receiver_type":"executor","workflow_id":"wf_g","action":"task_assign","payload":{"n":1}}`)
			if w.Code != http.StatusAccepted {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			out := jsonBody(t, w)
			if out["status"] != "queued" || out["message_id"] != "g_1" || out["group"] != "executor" || fmt.Sprint(out["recipients"]) != "[executor executor_b]" {
				t.Fatalf("answer %v", out)
			}
			ids := map[string]string{}
			for _, d := range out["deliveries"].([]any) {
				d := d.(map[string]any)
				ids[str(d["recipient"])] = str(d["delivery_id"])
				if !uuidV4.MatchString(str(d["delivery_id"])) {
					t.Errorf("delivery id %v is not a UUIDv4", d["delivery_id"])
				}
			}
			if len(ids) != 2 || ids["executor"] == ids["executor_b"] {
				t.Fatalf("deliveries %v", out["deliveries"])
			}
			for _, id := range []string{"executor", "executor_b"} {
				got := decode(t, h.peers[id].WaitFor(1)[0].Body)
				if got["message_id"] != "g_1" || got["receiver_id"] != id || got["receiver_type"] != "executor" || got["sender_id"] != "dispatcher" {
					t.Errorf("%s got %v", id, got)
				}
			}
			thread := h.thread(mailbox.KeyWorkflow, "wf_g")
			if len(thread) != 2 {
				t.Fatalf("thread holds %d entries, want one per delivery", len(thread))
			}
			for _, e := range thread {
				to := e.Recipients[0]
				if len(e.Recipients) != 1 || e.Group != "executor" || e.Broadcast || e.DeliveryID != ids[to] || e.MessageID != "g_1" ||
					!strings.Contains(string(e.Envelope), `"receiver_id":"`+to+`"`) {
					t.Errorf("entry %+v", e)
				}
			}
			// Each recipient sees its own delivery in its history.
			if w := h.historyOf("executor_b", "workflow_id=wf_g"); w.Code != http.StatusOK || len(jsonBody(t, w)["data"].([]any)) != 1 {
				t.Errorf("executor_b's history: %d %s", w.Code, w.Body)
			}
			rec := testkit.SummaryOf(h.records(KindMessage)[0])
			if rec["group"] != "executor" || fmt.Sprint(rec["group_to"]) != "[executor executor_b]" || len(rec["deliveries"].([]any)) != 2 {
				t.Errorf("message.request %v", rec)
			}
			// The same group send again is one repeat, refused whole.
			decodeError(t, h.send("dispatcher", `{"message_id":"g_1","message_type":"notification","sender_id":"dispatcher","receiver_type":"executor","workflow_id":"wf_g","action":"task_assign"}`), http.StatusConflict, "duplicate_message")
			// SAM: orch may send to anyone: every executor.
			w = h.send("orch", `{"correlation_id":"c_g","sender":{"agent_id":"orch","role":"orchestrator"},"recipient":{"agent_id":null,"role":"executor"},"message_type":"EVENT","payload":{"action":"stop"}}`)
			if w.Code != http.StatusAccepted || fmt.Sprint(jsonBody(t, w)["recipients"]) != "[executor executor_b executor_c]" {
				t.Fatalf("SAM group: %d %s", w.Code, w.Body)
			}
			got := decode(t, h.peers["executor_c"].WaitFor(1)[0].Body)
			if rcp, _ := got["recipient"].(map[string]any); rcp["agent_id"] != "executor_c" || rcp["role"] != "executor" {
				t.Errorf("executor_c got %v", got)
			}
			if n := len(h.thread(mailbox.KeyCorrelation, "c_g")); n != 3 {
				t.Errorf("SAM thread holds %d entries", n)
			}
			if n := len(h.peers["dispatcher"].Received()) + len(h.peers["planner"].Received()); n != 0 {
				t.Errorf("%d group messages reached agents of another type", n)
			}
		})
	}
}

// TestTypeChecks: sender_type (SAM sender.role) must be the sender's
// registered type, receiver_type (recipient.role) the recipient's; a group
// send reaching no one is a clear 4xx. Refusals are audited as the other
// refusals are.
func TestTypeChecks(t *testing.T) {
	h := newHarness(t, harnessOpts{agents: groupAgents, peers: groupPeers})
	tests := []struct {
		name, agent, body string
		status            int
		code, param, msg  string
		check, verdict    string
	}{
		{"sender_type spoofed", "planner", `{"message_type":"notification","sender_id":"planner","sender_type":"orchestrator","receiver_id":"orch","workflow_id":"w","action":"status"}`,
			403, "policy_denied", "sender_type", `sender_type "orchestrator" is not the registered type "planner" of agent "planner"`, "sender", "role_spoofed"},
		{"SAM sender role spoofed", "executor", `{"sender":{"agent_id":"executor","role":"admin"},"recipient":{"agent_id":"orch"},"message_type":"EVENT","payload":{"action":"x"}}`,
			403, "policy_denied", "sender.role", "an agent may not claim another role", "sender", "role_spoofed"},
		{"sender_type case differs", "orch", `{"message_type":"notification","sender_id":"orch","sender_type":"Orchestrator","receiver_id":"planner","action":"x"}`,
			403, "policy_denied", "sender_type", "", "sender", "role_spoofed"},
		{"receiver_type wrong", "orch", `{"message_type":"notification","sender_id":"orch","receiver_id":"planner","receiver_type":"executor","action":"x"}`,
			403, "policy_denied", "receiver_type", `receiver_type "executor" is not the registered type "planner" of agent "planner"`, "recipient", "type_mismatch"},
		{"SAM recipient role wrong", "orch", `{"sender":{"agent_id":"orch"},"recipient":{"agent_id":"planner","role":"orchestrator"},"message_type":"EVENT","payload":{"action":"x"}}`,
			403, "policy_denied", "recipient.role", "", "recipient", "type_mismatch"},
		{"group of a type nobody has", "orch", `{"message_type":"notification","sender_id":"orch","receiver_type":"astronaut","action":"x"}`,
			404, "recipient_not_found", "receiver_type", `No agent of type "astronaut"`, "recipient", "no_group_members"},
		{"group of the sender's type only", "dispatcher", `{"sender":{"agent_id":"dispatcher"},"recipient":{"role":"dispatcher"},"message_type":"EVENT","payload":{"action":"x"}}`,
			404, "recipient_not_found", "recipient.role", "", "recipient", "no_group_members"},
		{"group RBAC allows none", "planner", `{"message_type":"notification","sender_id":"planner","receiver_type":"executor","action":"status"}`,
			403, "policy_denied", "", `None of the 3 agents of type "executor" may receive this message from planner (RBAC: `, "", ""},
		{"group REQUEST", "orch", `{"message_type":"request","sender_id":"orch","receiver_type":"executor","action":"x"}`,
			400, "invalid_request", "receiver_id", "broadcast or sent to a group", "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(h.records(KindMessageReject))
			e := decodeError(t, h.send(tc.agent, tc.body), tc.status, tc.code)
			if !strings.Contains(e.Error.Message, tc.msg) || param(e) != tc.param {
				t.Errorf("%q (param %q), want ~%q (param %q)", e.Error.Message, param(e), tc.msg, tc.param)
			}
			rs := h.records(KindMessageReject)
			if len(rs) != before+1 || testkit.SummaryOf(rs[len(rs)-1])["reason"] != e.Error.Message {
				t.Fatalf("message.reject %+v", rs)
			}
			if tc.check != "" {
				if got := fmt.Sprint(testkit.SummaryOf(rs[len(rs)-1])["checks"].(map[string]any)[tc.check]); !strings.Contains(got, tc.verdict) {
					t.Errorf("checks.%s = %v, want %s", tc.check, got, tc.verdict)
				}
			}
		})
	}
	for id, p := range h.peers {
		if n := len(p.Received()); n != 0 {
			t.Errorf("%s received %d refused messages", id, n)
		}
	}
	if st := h.svc.Stats(); st.Refused != int64(len(tests)) || st.Accepted != 0 {
		t.Errorf("stats %+v", st)
	}
	// The right types pass.
	for _, body := range []string{
		`{"message_type":"notification","sender_id":"orch","sender_type":"orchestrator","receiver_id":"planner","receiver_type":"planner","action":"x"}`,
		`{"sender":{"agent_id":"orch","role":"orchestrator"},"recipient":{"agent_id":"executor","role":"executor"},"message_type":"EVENT","payload":{"action":"x"}}`,
	} {
		if w := h.send("orch", body); w.Code != http.StatusAccepted {
			t.Errorf("%d %s", w.Code, w.Body)
		}
	}
}

// TestGatewayIDs: the ids the gateway makes (a message id the sender left
// out, the deliveries', its own ERRORs') are UUIDv4; ids agents chose are
// kept as they are.
func TestGatewayIDs(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.peers["executor"].Set(answerStatus(http.StatusBadRequest))
	h.run()
	w := h.send("orch", `{"message_type":"notification","sender_id":"orch","receiver_id":"executor","workflow_id":"wf_id","action":"x"}`)
	out := jsonBody(t, w)
	if w.Code != http.StatusAccepted || !uuidV4.MatchString(str(out["message_id"])) {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	d := out["deliveries"].([]any)[0].(map[string]any)
	if !uuidV4.MatchString(str(d["delivery_id"])) || d["delivery_id"] == out["message_id"] {
		t.Errorf("delivery %v", d)
	}
	h.waitRecords(KindMessageEscalation, 1)
	thread := h.thread(mailbox.KeyWorkflow, "wf_id")
	i := slices.IndexFunc(thread, func(e mailbox.Entry) bool { return e.Origin == "gateway" })
	if i < 0 || !uuidV4.MatchString(thread[i].MessageID) {
		t.Errorf("the gateway's ERROR: %+v", thread)
	}
	if thread[0].DeliveryID != str(d["delivery_id"]) {
		t.Errorf("entry's delivery id %q, want %v", thread[0].DeliveryID, d["delivery_id"])
	}
	w = h.send("orch", `{"message_id":"Agent-Chosen_1","message_type":"notification","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_id","action":"x"}`)
	if jsonBody(t, w)["message_id"] != "Agent-Chosen_1" {
		t.Errorf("the agent's id was not kept: %s", w.Body)
	}
}
