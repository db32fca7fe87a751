package app

import (
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/testcert"
	"github.com/sacpgw/gateway/internal/testkit"
)

func shaHex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// TestSeed002FourStepFlow runs the ACL envelope's complete example
// communication flow through the gateway: orchestrator → planner → orchestrator
// → executor → orchestrator, each REQUEST relayed to the recipient's endpoint
// and its RESPONSE returned; the history and the audit trail hold all four.
func TestSeed002FourStepFlow(t *testing.T) {
	g := newA2A(t, a2aOpts{})
	g.peers["planner_1"].Set(testkit.ReplyWith(func(req map[string]any) string {
		return `{"message_id":"msg_002","message_type":"response","sender_id":"planner_1","receiver_id":"orch_1","workflow_id":"wf_abc","action":"plan_complete","in_reply_to":"` + str(req["message_id"]) + `","payload":{"tasks":[{"task_id":"t1","description":"Fetch customer","agent_type":"executor"},{"task_id":"t2","description":"Update record","agent_type":"executor"},{"task_id":"t3","description":"Validate","agent_type":"validator"}]},"status":"success"}`
	}))
	g.peers["executor_1"].Set(testkit.ReplyWith(func(req map[string]any) string {
		return `{"message_id":"msg_004","message_type":"response","sender_id":"executor_1","receiver_id":"orch_1","workflow_id":"wf_abc","task_id":"t2","action":"execution_complete","in_reply_to":"` + str(req["message_id"]) + `","payload":{"operation":"update","customer_id":"CUST001","updated_fields":["credit_limit"],"success":true},"status":"success"}`
	}))
	step1 := `{"message_id":"msg_001","message_type":"request","sender_id":"orch_1","sender_type":"orchestrator","receiver_id":"planner_1","receiver_type":"planner","workflow_id":"wf_abc","action":"plan_workflow","payload":{"operation":"update","target_customer_id":"CUST001","parameters":{"credit_limit":100000}},"priority":"high"}`
	status, resp := g.send("orch_1", step1)
	if status != http.StatusOK || resp["message_id"] != "msg_002" || resp["in_reply_to"] != "msg_001" || resp["action"] != "plan_complete" {
		t.Fatalf("step 2: %d %v", status, resp)
	}
	if tasks := resp["payload"].(map[string]any)["tasks"].([]any); len(tasks) != 3 {
		t.Fatalf("plan lost its tasks: %v", resp)
	}
	got := g.peers["planner_1"].Received()
	if len(got) != 1 {
		t.Fatalf("planner got %d messages", len(got))
	}
	var relayed map[string]any
	_ = json.Unmarshal(got[0].Body, &relayed)
	if relayed["sender_id"] != "orch_1" || relayed["action"] != "plan_workflow" || relayed["timestamp"] == nil {
		t.Errorf("planner got %s", got[0].Body)
	}
	if got[0].Header.Get("Authorization") != "" || got[0].Header.Get("X-Gateway-Sender") != "orch_1" {
		t.Errorf("relayed headers: Authorization %q, X-Gateway-Sender %q", got[0].Header.Get("Authorization"), got[0].Header.Get("X-Gateway-Sender"))
	}
	// The same message again (a client retrying a lost answer) is not
	// delivered twice.
	if status, resp := g.send("orch_1", step1); status != http.StatusConflict || resp["error"].(map[string]any)["code"] != "duplicate_message" {
		t.Errorf("repeat of msg_001: %d %v", status, resp)
	}
	if n := len(g.peers["planner_1"].Received()); n != 1 {
		t.Errorf("planner got the repeat: %d messages", n)
	}
	step3 := `{"message_id":"msg_003","message_type":"request","sender_id":"orch_1","receiver_id":"executor_1","receiver_type":"executor","workflow_id":"wf_abc","task_id":"t2","action":"execute_operation","payload":{"operation":"update","customer_id":"CUST001","credit_limit":100000}}`
	status, resp = g.send("orch_1", step3)
	if status != http.StatusOK || resp["message_id"] != "msg_004" || resp["task_id"] != "t2" || resp["status"] != "success" {
		t.Fatalf("step 4: %d %v", status, resp)
	}

	for _, tc := range []struct {
		agent string
		want  []string
	}{
		{"orch_1", []string{"msg_001", "msg_002", "msg_003", "msg_004"}},
		{"planner_1", []string{"msg_001", "msg_002"}},
		{"executor_1", []string{"msg_003", "msg_004"}},
	} {
		status, ids, _ := g.history(tc.agent, "workflow_id=wf_abc")
		if status != http.StatusOK || !slices.Equal(ids, tc.want) {
			t.Errorf("history for %s: %d %v, want %v", tc.agent, status, ids, tc.want)
		}
	}
	if status, _, _ := g.history("outsider", "workflow_id=wf_abc"); status != http.StatusNotFound {
		t.Errorf("an agent outside the workflow read its history: %d", status)
	}
	if status, _, _ := g.history("orch_1", "workflow_id=wf_nope"); status != http.StatusNotFound {
		t.Errorf("unknown workflow: %d", status)
	}
	// A reviewer reads the whole thread; an agent token cannot use the
	// admin route; each read is audited.
	status, body, _ := g.do(http.MethodGet, "/admin/messages?workflow_id=wf_abc", "tok-reviewer", "")
	var thread struct {
		Data []map[string]any `json:"data"`
	}
	_ = json.Unmarshal(body, &thread)
	if status != http.StatusOK || len(thread.Data) != 4 {
		t.Errorf("reviewer's view: %d %s", status, body)
	}
	for token, want := range map[string]int{"tok-orch_1": http.StatusForbidden, "": http.StatusUnauthorized, "tok-nobody": http.StatusUnauthorized} {
		if status, _, _ := g.do(http.MethodGet, "/admin/messages?workflow_id=wf_abc", token, ""); status != want {
			t.Errorf("admin route with %q: %d, want %d", token, status, want)
		}
	}
	if reads := g.entries("message.read"); len(reads) != 1 || !strings.Contains(string(reads[0].Summary), `"reader":"reviewer:security-lead"`) {
		t.Errorf("reads audited: %v", reads)
	}

	reqs := g.entries(kindMessage)
	if len(reqs) != 2 {
		t.Fatalf("%d message.request entries, want 2", len(reqs))
	}
	if rej := g.entries(kindMessageReject); len(rej) != 1 || !strings.Contains(string(rej[0].Summary), "duplicate_message") {
		t.Errorf("the repeat is not audited as refused: %v", rej)
	}
	if reqs[0].PayloadSHA256 != shaHex([]byte(step1)) || reqs[1].PayloadSHA256 != shaHex([]byte(step3)) {
		t.Errorf("payload hashes are not of the bytes received")
	}
	if resps := g.entries(kindMessageResponse); len(resps) != 2 || resps[0].AgentID != "planner_1" || resps[1].AgentID != "executor_1" {
		t.Errorf("message.response entries: %+v", resps)
	}
	_, metricsText, _ := g.do(http.MethodGet, "/metrics", "", "")
	for _, want := range []string{"gateway_messages_accepted_total 2", "gateway_messages_delivered_total 2", "gateway_messages_refused_total 1", "gateway_messages_queued 0"} {
		if !strings.Contains(string(metricsText), want+"\n") {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if rep, err := audit.Verify(g.auditDir, nil); err != nil || len(rep.Failures) > 0 || rep.Entries == 0 {
		t.Errorf("audit chain: %+v %v", rep, err)
	}
}

const (
	kindMessage         = "message.request"
	kindMessageResponse = "message.response"
	kindMessageReject   = "message.reject"
	kindMessageDelivery = "message.delivery"
)

// TestSAMRelayHandoff is the handoff pattern of the agent communication
// patterns (docs/glossary.md) across three agents: the vendor agent
// hands its context to the compliance agent, which acknowledges (the
// sender's turn ends), then hands it on to the finance agent.
func TestSAMRelayHandoff(t *testing.T) {
	g := newA2A(t, a2aOpts{})
	env := `{"message_id":"msg-uuid-1234","correlation_id":"corr-uuid-5678","timestamp":"` + time.Now().UTC().Format(time.RFC3339) + `",
	 "sender":{"agent_id":"vendor_onboarding_agent","role":"initiator"},"recipient":{"agent_id":"compliance_agent","role":"validator"},
	 "message_type":"REQUEST","payload":{"action":"validate_vendor","data":{"vendor":{"id":"v-123","name":"Acme Corp"}},"context":{"shared_context":{"workflow_id":"wf-101","status":"IN_PROGRESS"}}},
	 "metadata":{"priority":"high","timeout_ms":5000}}`
	status, resp := g.send("vendor_onboarding_agent", env)
	if status != http.StatusOK || strings.ToUpper(str(resp["message_type"])) != "ACK" {
		t.Fatalf("handoff: %d %v", status, resp)
	}
	if s := resp["sender"].(map[string]any); s["agent_id"] != "compliance_agent" {
		t.Errorf("ack sender %v", s)
	}
	got := g.peers["compliance_agent"].Received()
	if len(got) != 1 || !strings.Contains(string(got[0].Body), `"shared_context"`) {
		t.Fatalf("compliance agent got %d messages", len(got))
	}
	// The compliance agent finishes and relays the context on to the
	// third agent, which acknowledges with an ACK envelope of its own.
	g.peers["finance_agent"].Set(testkit.ReplyWith(func(req map[string]any) string {
		return `{"message_id":"ack-fin-1","correlation_id":"corr-uuid-5678","sender":{"agent_id":"finance_agent"},"recipient":{"agent_id":"compliance_agent"},"message_type":"ACK","metadata":{"in_reply_to":"` + str(req["message_id"]) + `"}}`
	}))
	status, resp = g.send("compliance_agent", `{"message_id":"msg-uuid-2345","correlation_id":"corr-uuid-5678","sender":{"agent_id":"compliance_agent","role":"validator"},"recipient":{"agent_id":"finance_agent","role":"finance"},"message_type":"REQUEST","payload":{"action":"setup_vendor_payments","data":{"vendor":{"id":"v-123","status":"validated"}},"context":{"shared_context":{"workflow_id":"wf-101","current_agent":"finance_agent"}}}}`)
	if status != http.StatusOK || resp["message_id"] != "ack-fin-1" {
		t.Fatalf("second handoff: %d %v", status, resp)
	}
	if got := g.peers["finance_agent"].Received(); len(got) != 1 || !strings.Contains(string(got[0].Body), `"current_agent":"finance_agent"`) {
		t.Fatalf("finance agent got %d messages", len(got))
	}
	// Each agent sees its own part of the relay, in order.
	for _, tc := range []struct {
		agent string
		n     int
		first string
	}{
		{"vendor_onboarding_agent", 2, "msg-uuid-1234"},
		{"compliance_agent", 4, "msg-uuid-1234"},
		{"finance_agent", 2, "msg-uuid-2345"},
	} {
		_, ids, _ := g.history(tc.agent, "correlation_id=corr-uuid-5678")
		if len(ids) != tc.n || ids[0] != tc.first {
			t.Errorf("history of %s: %v", tc.agent, ids)
		}
	}
	// The vendor agent may not take the third step itself.
	if status, _ := g.send("vendor_onboarding_agent", `{"correlation_id":"corr-uuid-5678","sender":{"agent_id":"vendor_onboarding_agent"},"recipient":{"agent_id":"finance_agent"},"message_type":"REQUEST","payload":{"action":"setup_vendor_payments"}}`); status != http.StatusForbidden {
		t.Errorf("skipping the compliance step: %d", status)
	}
}

// TestSubTaskDelegation is the sub-task delegation pattern of the agent
// communication patterns: the requisition agent asks the
// finance agent and resumes with the answer; a child that is slower than
// metadata.timeout_ms is cut off with a TIMEOUT ERROR.
func TestSubTaskDelegation(t *testing.T) {
	g := newA2A(t, a2aOpts{})
	g.peers["finance_agent"].Set(testkit.ReplyWith(func(req map[string]any) string {
		if p, _ := req["payload"].(map[string]any); p != nil {
			if d, _ := p["data"].(map[string]any); d != nil && d["amount"] == float64(999999) {
				time.Sleep(2500 * time.Millisecond)
			}
		}
		return `{"correlation_id":"` + str(req["correlation_id"]) + `","sender":{"agent_id":"finance_agent","role":"finance"},"recipient":{"agent_id":"requisition_agent","role":"requisition"},"message_type":"RESPONSE","payload":{"action":"budget_result","data":{"approved":true,"remaining":1200}}}`
	}))
	ask := func(amount string, timeout string) (int, map[string]any) {
		return g.send("requisition_agent", `{"correlation_id":"corr-req-7","sender":{"agent_id":"requisition_agent","role":"requisition"},"recipient":{"agent_id":"finance_agent","role":"finance"},"message_type":"REQUEST","payload":{"action":"budget_check","data":{"amount":`+amount+`}},"metadata":{"priority":"medium","timeout_ms":`+timeout+`}}`)
	}
	status, resp := ask("300", "5000")
	data := resp["payload"].(map[string]any)["data"].(map[string]any)
	if status != http.StatusOK || resp["message_type"] != "RESPONSE" || data["approved"] != true {
		t.Fatalf("delegation: %d %v", status, resp)
	}
	start := time.Now()
	status, resp = ask("999999", "200")
	// The child takes 2.5 s; the gateway gives up at 200 ms (with room
	// for a loaded CI machine).
	if status != http.StatusGatewayTimeout || time.Since(start) > 1500*time.Millisecond {
		t.Fatalf("slow child: %d after %s: %v", status, time.Since(start), resp)
	}
	env := resp["envelope"].(map[string]any)
	if e := env["error"].(map[string]any); e["code"] != "TIMEOUT" || env["message_type"] != "ERROR" {
		t.Errorf("timeout envelope %v", env)
	}
	if resp["error"].(map[string]any)["type"] != "upstream_error" {
		t.Errorf("not in OpenAI's error shape: %v", resp)
	}
}

// TestMessageRefusals: every refusal is in OpenAI's error shape with the
// right status, nothing reaches the recipient, and each is audited.
func TestMessageRefusals(t *testing.T) {
	g := newA2A(t, a2aOpts{})
	acl := func(sender, receiver, action string) string {
		return `{"message_type":"request","sender_id":"` + sender + `","receiver_id":"` + receiver + `","workflow_id":"wf_x","action":"` + action + `","payload":{}}`
	}
	big := `{"message_type":"notification","sender_id":"outsider","receiver_id":"orch_1","workflow_id":"wf_x","action":"ping","payload":{"blob":"` + strings.Repeat("x", 2000) + `"}}`
	tests := []struct {
		name, token, body string
		status            int
		code, param, msg  string
	}{
		{"no token", "", acl("orch_1", "planner_1", "plan_workflow"), 401, "invalid_api_key", "", ""},
		{"unauthorized sender", "tok-planner_1", acl("planner_1", "executor_1", "execute_operation"), 403, "policy_denied", "", `may not send "execute_operation" to agent "executor_1"`},
		{"spoofed sender", "tok-planner_1", acl("orch_1", "executor_1", "execute_operation"), 403, "policy_denied", "", `sender "orch_1" is not the authenticated agent "planner_1"`},
		{"unknown recipient", "tok-orch_1", acl("orch_1", "nobody_here", "plan_workflow"), 404, "recipient_not_found", "receiver_id", "nobody_here"},
		{"recipient without endpoint", "tok-orch_1", acl("orch_1", "silent", "plan_workflow"), 422, "recipient_unreachable", "receiver_id", ""},
		{"oversize payload", "tok-outsider", big, 413, "request_too_large", "", ""},
		{"message to itself", "tok-orch_1", acl("orch_1", "orch_1", "plan_workflow"), 403, "policy_denied", "", "may not send a message to itself"},
		{"bad priority", "tok-orch_1", `{"message_type":"request","sender_id":"orch_1","receiver_id":"planner_1","action":"x","priority":"urgent"}`, 400, "invalid_request", "priority", ""},
		{"spoofed id characters", "tok-orch_1", `{"message_type":"request","sender_id":"orch_1","receiver_id":"planner_1","action":"x","message_id":"a b"}`, 400, "invalid_request", "message_id", ""},
		{"stale timestamp", "tok-orch_1", `{"message_type":"request","sender_id":"orch_1","receiver_id":"planner_1","action":"x","timestamp":"2020-01-01T00:00:00Z"}`, 400, "invalid_request", "timestamp", ""},
		{"not JSON", "tok-orch_1", `{"message_type":`, 400, "invalid_request", "", ""},
		{"plan the recipient cannot run", "tok-orch_1", `{"message_type":"request","sender_id":"orch_1","receiver_id":"planner_1","action":"x","payload":{"plan":[["search","H_API",{}]]}}`, 403, "policy_denied", "", `does not support verb "search"`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			status, body, _ := g.do(http.MethodPost, "/relay/messages", tc.token, tc.body)
			var e struct {
				Error struct {
					Message, Type, Code string
					Param               *string
				}
			}
			if err := json.Unmarshal(body, &e); err != nil || status != tc.status || e.Error.Code != tc.code || !strings.Contains(e.Error.Message, tc.msg) {
				t.Fatalf("got %d %s, want %d %s containing %q", status, body, tc.status, tc.code, tc.msg)
			}
			if tc.param != "" && (e.Error.Param == nil || *e.Error.Param != tc.param) {
				t.Errorf("param %v, want %q", e.Error.Param, tc.param)
			}
		})
	}
	for id, p := range g.peers {
		if n := len(p.Received()); n != 0 {
			t.Errorf("%s received %d refused messages", id, n)
		}
	}
	// Everything after authentication is audited as a refusal.
	if got := len(g.entries(kindMessageReject)); got != len(tests)-1 {
		t.Errorf("%d message.reject entries, want %d", got, len(tests)-1)
	}
	if got := len(g.entries("auth.failure")); got != 1 {
		t.Errorf("%d auth.failure entries, want 1", got)
	}
}

// TestEventsQueuedInPriorityOrderAndBroadcast: notifications are
// acknowledged 202 and handed over later, most urgent first; a null
// recipient reaches every agent with an endpoint but the sender.
func TestEventsQueuedInPriorityOrderAndBroadcast(t *testing.T) {
	g := newA2A(t, a2aOpts{workers: 1})
	release := make(chan struct{})
	planner := g.peers["planner_1"]
	planner.Set(func(w http.ResponseWriter, _ *http.Request, body []byte) {
		if strings.Contains(string(body), `"blocker"`) {
			<-release
		}
		w.WriteHeader(http.StatusNoContent)
	})
	notify := func(id, priority, action string) {
		t.Helper()
		status, resp := g.send("orch_1", `{"message_id":"`+id+`","message_type":"notification","sender_id":"orch_1","receiver_id":"planner_1","workflow_id":"wf_q","action":"`+action+`","priority":"`+priority+`","payload":{}}`)
		if status != http.StatusAccepted || resp["status"] != "queued" {
			t.Fatalf("notification %s: %d %v", id, status, resp)
		}
	}
	notify("m0", "low", "blocker")
	planner.WaitFor(1) // the only worker is now busy
	notify("m1", "low", "a")
	notify("m2", "medium", "a")
	notify("m3", "critical", "a")
	notify("m4", "high", "a")
	close(release)
	got := planner.WaitFor(5)
	var order []string
	for _, r := range got {
		var m map[string]any
		_ = json.Unmarshal(r.Body, &m)
		order = append(order, str(m["message_id"]))
	}
	if want := []string{"m0", "m3", "m4", "m2", "m1"}; !slices.Equal(order, want) {
		t.Errorf("delivery order %v, want %v", order, want)
	}

	status, resp := g.send("executor_1", `{"message_type":"notification","sender_id":"executor_1","receiver_id":null,"workflow_id":"wf_12345","action":"task_completed","payload":{"task_id":"task_2","result":"Database updated successfully","affected_records":1}}`)
	if status != http.StatusAccepted {
		t.Fatalf("broadcast: %d %v", status, resp)
	}
	recipients := resp["recipients"].([]any)
	if len(recipients) != 6 || slices.Contains(recipients, any("executor_1")) {
		t.Errorf("broadcast recipients %v", recipients)
	}
	for id, p := range g.peers {
		if id == "executor_1" {
			continue
		}
		found := false
		for deadline := time.Now().Add(5 * time.Second); !found && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
			for _, r := range p.Received() {
				found = found || strings.Contains(string(r.Body), "task_completed")
			}
		}
		if !found {
			t.Errorf("%s did not get the broadcast", id)
		}
	}
	if n := len(g.peers["executor_1"].Received()); n != 0 {
		t.Errorf("the sender got its own broadcast")
	}
	// An agent without a broadcast rule may not broadcast.
	status, _ = g.send("planner_1", `{"message_type":"notification","sender_id":"planner_1","receiver_id":null,"action":"plan_complete"}`)
	if status != http.StatusForbidden {
		t.Errorf("broadcast without a rule: %d", status)
	}
}

// TestRecipientDownRetriedThenErrorAndEscalation: a queued message to an
// endpoint that keeps failing is tried max_retry_attempts times; then the
// gateway's ERROR joins the thread, a person is asked, and their decision
// comes back to the sender as a RESPONSE.
func TestRecipientDownRetriedThenErrorAndEscalation(t *testing.T) {
	g := newA2A(t, a2aOpts{})
	g.peers["executor_1"].Set(func(w http.ResponseWriter, _ *http.Request, _ []byte) { w.WriteHeader(http.StatusServiceUnavailable) })
	status, _ := g.send("orch_1", `{"message_id":"msg_down","message_type":"notification","sender_id":"orch_1","receiver_id":"executor_1","workflow_id":"wf_down","action":"task_assign","payload":{"task_id":"t9"}}`)
	if status != http.StatusAccepted {
		t.Fatalf("queue: %d", status)
	}
	var data []map[string]any
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline) && len(data) < 2; time.Sleep(10 * time.Millisecond) {
		_, _, data = g.history("orch_1", "workflow_id=wf_down")
	}
	if len(data) != 2 || data[1]["message_type"] != "error" || data[1]["sender"] != "gateway" || data[1]["origin"] != "gateway" {
		t.Fatalf("history after the failure: %v", data)
	}
	if n := len(g.peers["executor_1"].Received()); n != 3 {
		t.Errorf("%d delivery attempts, want max_retry_attempts = 3", n)
	}
	env, _ := json.Marshal(data[1]["envelope"])
	if !strings.Contains(string(env), `"in_reply_to":"msg_down"`) || !strings.Contains(string(env), "DELIVERY_FAILED") {
		t.Errorf("error envelope %s", env)
	}
	// The escalation is in the review queue.
	status, body, _ := g.do(http.MethodGet, "/admin/escalations", "tok-reviewer", "")
	var list struct {
		Data []struct {
			RequestID string `json:"request_id"`
			Request   struct {
				RequestType string `json:"request_type"`
				AgentID     string `json:"agent_id"`
			} `json:"request"`
		} `json:"escalations"`
	}
	_ = json.Unmarshal(body, &list)
	if status != http.StatusOK || len(list.Data) != 1 || list.Data[0].Request.RequestType != "MESSAGE" || list.Data[0].Request.AgentID != "orch_1" {
		t.Fatalf("escalations: %d %s", status, body)
	}
	id := list.Data[0].RequestID
	status, body, _ = g.do(http.MethodPost, "/admin/escalations/"+id+"/decision", "tok-reviewer", `{"decision":"approve","reviewer":"security-lead","comment":"retry tomorrow"}`)
	if status != http.StatusOK {
		t.Fatalf("decision: %d %s", status, body)
	}
	// The person's answer reaches the orchestrator's endpoint and the thread.
	got := g.peers["orch_1"].WaitFor(1)
	if !strings.Contains(string(got[0].Body), "human_decision") || !strings.Contains(string(got[0].Body), "retry tomorrow") {
		t.Errorf("orchestrator got %s", got[0].Body)
	}
	_, _, data = g.history("orch_1", "workflow_id=wf_down")
	if len(data) != 3 || data[2]["origin"] != "human" || data[2]["message_type"] != "response" {
		t.Errorf("history after the decision: %v", data)
	}
	if d := g.entries(kindMessageDelivery); len(d) < 1 || !strings.Contains(string(d[0].Summary), `"status":"failed"`) {
		t.Errorf("delivery entries %v", d)
	}
	// Every message of the thread is audited with the hash of its bytes:
	// the agent's, the gateway's ERROR and the reviewer's RESPONSE.
	msgs := g.entries(kindMessage)
	origins := map[string]bool{}
	for _, e := range msgs {
		var sum map[string]any
		_ = json.Unmarshal(e.Summary, &sum)
		if o, _ := sum["origin"].(string); o != "" {
			origins[o] = true
		}
	}
	if len(msgs) != 3 || !origins["gateway"] || !origins["human"] {
		t.Errorf("message entries %d, origins %v", len(msgs), origins)
	}
	for _, e := range data {
		env, _ := json.Marshal(e["envelope"])
		found := false
		for _, m := range msgs {
			found = found || m.PayloadSHA256 == e["payload_sha256"]
		}
		if !found {
			t.Errorf("history entry %v (%s) has no audit entry with its hash", e["message_id"], env)
		}
	}
}

// TestSyncRequestToDeadEndpoint: a REQUEST to an endpoint that refuses
// connections is retried, then answered 502 with the ERROR envelope.
func TestSyncRequestToDeadEndpoint(t *testing.T) {
	g := newA2A(t, a2aOpts{})
	g.peers["finance_agent"].Srv.Close()
	status, resp := g.send("requisition_agent", `{"correlation_id":"corr-dead","sender":{"agent_id":"requisition_agent"},"recipient":{"agent_id":"finance_agent"},"message_type":"REQUEST","payload":{"action":"budget_check"}}`)
	if status != http.StatusBadGateway {
		t.Fatalf("%d %v", status, resp)
	}
	env := resp["envelope"].(map[string]any)
	if env["error"].(map[string]any)["code"] != "DELIVERY_FAILED" || !strings.Contains(str(resp["error"].(map[string]any)["message"]), "could not deliver") {
		t.Errorf("%v", resp)
	}
	// The person who decides learns how often the gateway tried.
	if esc, ok := resp["escalation"].(map[string]any); !ok || !strings.HasPrefix(str(esc["human_review_url"]), "/review/") || !strings.Contains(str(esc["reason"]), "after 3 attempt(s)") {
		t.Errorf("no escalation: %v", resp)
	}
}

// TestErrorEscalation: an agent's fatal ERROR goes to a person at once; a
// retryable one only at its max_retry_attempts-th occurrence.
func TestErrorEscalation(t *testing.T) {
	g := newA2A(t, a2aOpts{})
	samErr := func(severity string, retryable bool) string {
		r := "false"
		if retryable {
			r = "true"
		}
		return `{"correlation_id":"corr-err","sender":{"agent_id":"compliance_agent"},"recipient":{"agent_id":"vendor_onboarding_agent"},"message_type":"ERROR","error":{"code":"VALIDATION_FAILED","message":"Tax ID format is invalid","source":"compliance_agent","severity":"` + severity + `","retryable":` + r + `}}`
	}
	status, resp := g.send("compliance_agent", samErr("CRITICAL", false))
	if status != http.StatusAccepted || resp["escalation"] == nil {
		t.Fatalf("fatal error: %d %v", status, resp)
	}
	for i := 1; i <= 3; i++ {
		status, resp = g.send("compliance_agent", samErr("WARNING", true))
		if status != http.StatusAccepted {
			t.Fatal(status)
		}
		// The fatal one counts too: the 2nd retryable one is the 3rd ERROR.
		if escalated := resp["escalation"] != nil; escalated != (i >= 2) {
			t.Errorf("retryable error %d: escalated=%v", i, escalated)
		}
	}
}

// TestRegistryAndValidation: /registry/query ranks agents, /sacp/validate
// answers VALID or the ERR object.
func TestRegistryAndValidation(t *testing.T) {
	g := newA2A(t, a2aOpts{})
	status, body, _ := g.do(http.MethodPost, "/registry/query", "tok-orch_1", `{"query":{"verb":"predict","inputs":["history"],"output_type":"predictions"}}`)
	var q struct {
		Data []struct {
			AgentName string   `json:"agent_name"`
			Score     float64  `json:"score"`
			Matched   []string `json:"matched"`
		} `json:"data"`
	}
	_ = json.Unmarshal(body, &q)
	if status != http.StatusOK || len(q.Data) != 1 || q.Data[0].AgentName != "planner_1" || q.Data[0].Score != 1 {
		t.Fatalf("query: %d %s", status, body)
	}
	if strings.Contains(string(body), "endpoint") || strings.Contains(string(body), "token") {
		t.Errorf("the registry leaks endpoints or tokens: %s", body)
	}
	// An agent sees its own entry, with what it may send, never endpoints.
	status, body, _ = g.do(http.MethodGet, "/agent/capabilities", "tok-planner_1", "")
	if status != http.StatusOK || !strings.Contains(string(body), `"supported_verbs":["predict"]`) || !strings.Contains(string(body), `"may_message":[{"to":["orch_1"],"actions":["plan_complete","validation_result"]}]`) ||
		!strings.Contains(string(body), `"receives_messages":true`) || strings.Contains(string(body), "http://") {
		t.Errorf("capabilities: %d %s", status, body)
	}
	status, body, _ = g.do(http.MethodPost, "/registry/query", "tok-orch_1", `{"query":{"inputs":["c","history"]}}`)
	_ = json.Unmarshal(body, &q)
	if status != http.StatusOK || len(q.Data) != 2 || q.Data[0].Score != q.Data[1].Score || q.Data[0].AgentName != "executor_1" {
		t.Errorf("inputs query: %s", body)
	}
	if status, _, _ := g.do(http.MethodPost, "/registry/query", "tok-orch_1", `{"query":{}}`); status != http.StatusBadRequest {
		t.Errorf("empty query: %d", status)
	}

	for _, tc := range []struct {
		body   string
		status int
		code   string
	}{
		{`{"msg_id":"abc123","g":"FIND_HOTEL","ctx":{"loc":"Paris","bdg":150},"plan":[["search","H_API",{"c":"Paris","p_max":150}],["rank","RANK",{"c":["p","rt"]}],["present","PRES",{"n":5}]],"out_fmt":"human","state":"PENDING"}`, 200, ""},
		{`{"g":"X","plan":[["search","H_API"]]}`, 422, "MALFORMED_PLAN"},
		{`{"plan":[["search","H_API",{}]]}`, 422, "MISSING_FIELD"},
		{`{"g":"X","plan":[["fly","H_API",{}]]}`, 422, "UNKNOWN_VERB"},
		{`{"g":"X","plan":[["search","NOPE",{}]]}`, 422, "UNKNOWN_TOOL"},
		{`{"g":"X","plan":[["rank","H_API",{}]]}`, 422, "VERB_TOOL_MISMATCH"},
		{`{"g":"X","plan":[]}`, 422, "REQ_CLARIFY"},
	} {
		status, body, _ := g.do(http.MethodPost, "/sacp/validate", "tok-outsider", tc.body)
		var res map[string]any
		_ = json.Unmarshal(body, &res)
		if status != tc.status || (tc.code == "" && res["status"] != "VALID") || (tc.code != "" && (res["status"] != "ERR" || res["code"] != tc.code)) {
			t.Errorf("validate %s: %d %s", tc.body, status, body)
		}
	}
}

// TestSpawnUnderPolicy: an agent with capability spawn registers a new
// agent at once; one without it waits for a person, whose approval
// registers it; either way the library then knows the new tool.
func TestSpawnUnderPolicy(t *testing.T) {
	g := newA2A(t, a2aOpts{})
	spawn := func(agent, name string) (int, map[string]any) {
		status, body, _ := g.do(http.MethodPost, "/registry/spawn", "tok-"+agent, `{"g":"SPAWN_AGENT","ctx":{"missing_capability":"visa_requirements_check","input_hints":["citizenship"]},"plan":[["define","VISA_QUERY_`+name+`",{"description":"Checks visa requirements","inputs":["nationality","destination"],"outputs":["visa_required"]}],["instantiate","`+name+`",{"tool":"VISA_QUERY_`+name+`","verb":"check"}]],"out_fmt":"raw"}`)
		var out map[string]any
		_ = json.Unmarshal(body, &out)
		return status, out
	}
	status, out := spawn("orch_1", "VISA_AGENT")
	if status != http.StatusCreated || out["status"] != "approved" || out["agent"].(map[string]any)["agent_name"] != "VISA_AGENT" {
		t.Fatalf("spawn: %d %v", status, out)
	}
	if status, out = spawn("orch_1", "VISA_AGENT"); status != http.StatusUnprocessableEntity || out["code"] != "MALFORMED_PLAN" {
		t.Errorf("second spawn defining the same tool: %d %v", status, out)
	}
	status, body, _ := g.do(http.MethodPost, "/registry/query", "tok-outsider", `{"query":{"verb":"check","output_type":"visa_required"}}`)
	if status != http.StatusOK || !strings.Contains(string(body), `"agent_name":"VISA_AGENT"`) || !strings.Contains(string(body), `"spawned":true`) {
		t.Errorf("spawned agent not found: %s", body)
	}
	if status, body, _ := g.do(http.MethodPost, "/sacp/validate", "tok-outsider", `{"g":"VISA","plan":[["check","VISA_QUERY_VISA_AGENT",{}]]}`); status != http.StatusOK {
		t.Errorf("plan with the spawned tool: %d %s", status, body)
	}

	// Even a spawner needs a person for an agent with an endpoint: the
	// gateway would POST to any URL the message names.
	status, body, _ = g.do(http.MethodPost, "/registry/spawn", "tok-orch_1", `{"g":"SPAWN_AGENT","plan":[["define","META_Q",{"description":"x"}],["instantiate","META_AGENT",{"tool":"META_Q","verb":"check","endpoint":"https://meta-agent.example.org/latest"}]]}`)
	if status != http.StatusAccepted || !strings.Contains(string(body), "a person must approve the endpoint") {
		t.Errorf("spawn with an endpoint: %d %s", status, body)
	}
	// An endpoint in the metadata range is refused before any person sees it.
	status, body, _ = g.do(http.MethodPost, "/registry/spawn", "tok-orch_1", `{"g":"SPAWN_AGENT","plan":[["define","META_R",{"description":"x"}],["instantiate","META_AGENT2",{"tool":"META_R","verb":"check","endpoint":"http://169.254.169.254/latest"}]]}`)
	if status != http.StatusUnprocessableEntity {
		t.Errorf("spawn with a metadata endpoint: %d %s", status, body)
	}
	status, out = spawn("planner_1", "TAX_AGENT")
	if status != http.StatusAccepted || out["status"] != "escalated" || out["request_id"] == nil {
		t.Fatalf("spawn without capability: %d %v", status, out)
	}
	if _, body, _ := g.do(http.MethodPost, "/registry/query", "tok-outsider", `{"query":{"verb":"check"}}`); strings.Contains(string(body), "TAX_AGENT") {
		t.Fatalf("registered before a person decided")
	}
	id := str(out["request_id"])
	if status, body, _ := g.do(http.MethodGet, "/agent/status/"+id, "tok-planner_1", ""); status != http.StatusOK || !strings.Contains(string(body), "ESCALATED") {
		t.Errorf("status of the escalated spawn: %d %s", status, body)
	}
	if status, body, _ := g.do(http.MethodPost, "/admin/escalations/"+id+"/decision", "tok-admin", `{"decision":"approve","reviewer":"ops","comment":"ok"}`); status != http.StatusOK {
		t.Fatalf("decision: %d %s", status, body)
	}
	if _, body, _ := g.do(http.MethodPost, "/registry/query", "tok-outsider", `{"query":{"verb":"check"}}`); !strings.Contains(string(body), "TAX_AGENT") {
		t.Errorf("approved spawn not registered: %s", body)
	}
	spawns := g.entries("registry.spawn")
	if len(spawns) != 4 { // approved, escalated with endpoint, escalated, registered by review
		t.Errorf("%d registry.spawn entries", len(spawns))
	}
}

// TestRelayOverMutualTLS: an endpoint that requires a client certificate (the
// mTLS of the agent communication patterns) gets the message when the gateway
// presents one signed by its CA, and the gateway verifies the endpoint's
// certificate in turn.
func TestRelayOverMutualTLS(t *testing.T) {
	ca := testcert.NewCA(t)
	dir := t.TempDir()
	put := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	srvCert, srvKey := ca.Issue(t, 10, "")
	pair, err := tls.X509KeyPair(srvCert, srvKey)
	if err != nil {
		t.Fatal(err)
	}
	finance := startPeer(t, &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca.Pool(), MinVersion: tls.VersionTLS13})
	finance.Set(func(w http.ResponseWriter, r *http.Request, _ []byte) {
		if len(r.TLS.PeerCertificates) == 0 || r.TLS.PeerCertificates[0].URIs[0].String() != "spiffe://example.org/gateway" {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	gwCert, gwKey := ca.Issue(t, 11, "spiffe://example.org/gateway")
	tlsYAML := "  tls:\n    ca_file: " + put("ca.pem", ca.PEM) + "\n    cert_file: " + put("gw.pem", gwCert) + "\n    key_file: " + put("gw.key", gwKey) + "\n"
	g := newA2A(t, a2aOpts{peers: map[string]*testkit.Peer{"finance_agent": finance}, messagingExtra: tlsYAML})
	body := `{"correlation_id":"corr-tls","sender":{"agent_id":"requisition_agent"},"recipient":{"agent_id":"finance_agent"},"message_type":"REQUEST","payload":{"action":"budget_check"}}`
	if status, resp := g.send("requisition_agent", body); status != http.StatusOK || resp["message_type"] != "ACK" {
		t.Fatalf("over mTLS: %d %v", status, resp)
	}
	// Without the client certificate the endpoint refuses the handshake.
	bare := newA2A(t, a2aOpts{peers: map[string]*testkit.Peer{"finance_agent": finance}, messagingExtra: "  tls:\n    ca_file: " + filepath.Join(dir, "ca.pem") + "\n"})
	if status, resp := bare.send("requisition_agent", body); status != http.StatusBadGateway {
		t.Errorf("without a client certificate: %d %v", status, resp)
	}
	if n := len(finance.Received()); n != 1 {
		t.Errorf("the endpoint served %d requests, want only the authenticated one", n)
	}
}

// TestRecipientAnswerChecked: a recipient's answer is an envelope like any
// other; one that poses as another agent, answers another request, is
// addressed elsewhere or is not an answer at all never reaches the sender.
func TestRecipientAnswerChecked(t *testing.T) {
	g := newA2A(t, a2aOpts{})
	tests := []struct {
		name, answer, want string
	}{
		{"poses as another agent", `{"message_type":"response","sender_id":"executor_1","receiver_id":"orch_1","in_reply_to":"%s","action":"plan_complete"}`, "bad_answer"},
		{"answers another request", `{"message_type":"response","sender_id":"planner_1","receiver_id":"orch_1","in_reply_to":"msg_other","action":"plan_complete"}`, "bad_answer"},
		{"addressed to someone else", `{"message_type":"response","sender_id":"planner_1","receiver_id":"executor_1","in_reply_to":"%s","action":"plan_complete"}`, "bad_answer"},
		{"a request instead of an answer", `{"message_type":"request","sender_id":"planner_1","receiver_id":"orch_1","action":"plan_workflow"}`, "bad_answer"},
		{"not an envelope", `{"ok":true}`, "bad_answer"},
		{"a redirect elsewhere", "redirect", "redirect_refused"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g.peers["planner_1"].Set(testkit.ReplyWith(func(req map[string]any) string {
				return strings.Replace(tc.answer, "%s", str(req["message_id"]), 1)
			}))
			if tc.answer == "redirect" {
				elsewhere := g.peers["executor_1"]
				g.peers["planner_1"].Set(func(w http.ResponseWriter, r *http.Request, _ []byte) {
					http.Redirect(w, r, elsewhere.Srv.URL+"/messages", http.StatusTemporaryRedirect)
				})
				t.Cleanup(func() {
					if n := len(elsewhere.Received()); n != 0 {
						t.Errorf("the gateway followed the redirect: %d requests elsewhere", n)
					}
				})
			}
			status, resp := g.send("orch_1", `{"message_type":"request","sender_id":"orch_1","receiver_id":"planner_1","workflow_id":"wf_ans_`+itoa(i)+`","action":"plan_workflow","payload":{}}`)
			// The caller reads one sentence whatever the recipient did (no
			// oracle of what is behind an endpoint); the audit entry names
			// the kind of failure.
			msg := str(resp["error"].(map[string]any)["message"])
			if status != http.StatusBadGateway || !strings.Contains(msg, "could not deliver") {
				t.Fatalf("%d %s", status, msg)
			}
			found := false
			for _, e := range g.entries("message.delivery") {
				var sum map[string]any
				_ = json.Unmarshal(e.Summary, &sum)
				if str(sum["message_id"]) == str(resp["envelope"].(map[string]any)["in_reply_to"]) && str(sum["cause"]) == tc.want {
					found = true
				}
			}
			if !found {
				t.Errorf("no message.delivery entry with cause %q", tc.want)
			}
			// The thread holds the request and the gateway's ERROR, not the answer.
			_, _, data := g.history("orch_1", "workflow_id=wf_ans_"+itoa(i))
			if len(data) != 2 || data[1]["sender"] != "gateway" {
				t.Errorf("thread %v", data)
			}
		})
	}
}

// TestServicesConfigHotReload: message rules, the registry and the
// reviewers' tokens change with agents.yaml, registry.yaml and
// gateway.yaml, without a restart; a broken change keeps the last good
// configuration.
func TestServicesConfigHotReload(t *testing.T) {
	g := newA2A(t, a2aOpts{})
	ping := `{"message_type":"notification","sender_id":"outsider","receiver_id":"planner_1","action":"ping"}`
	if status, _ := g.send("outsider", ping); status != http.StatusForbidden {
		t.Fatalf("before: %d", status)
	}
	agents, _ := os.ReadFile(filepath.Join(g.dir, "agents.yaml"))
	changed := strings.Replace(string(agents), "      - to: [orch_1]\n        actions: [ping]", "      - to: [orch_1, planner_1]\n        actions: [ping]", 1)
	if changed == string(agents) {
		t.Fatal("test config changed shape")
	}
	reg, _ := os.ReadFile(filepath.Join(g.dir, "registry.yaml"))
	regChanged := strings.Replace(string(reg), "  tools:\n", "    - name: audit_books\n      outputs: report\n  tools:\n    - id: LEDGER\n      supported_verbs: [audit_books]\n", 1)
	write := func(name, content string) {
		if err := os.WriteFile(filepath.Join(g.dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("agents.yaml", changed)
	write("registry.yaml", regChanged)
	// A reviewer's token is rotated in the same reload.
	gw, _ := os.ReadFile(filepath.Join(g.dir, "gateway.yaml"))
	write("gateway.yaml", strings.Replace(string(gw), roster.HashTokenHex("tok-reviewer"), roster.HashTokenHex("tok-reviewer-2"), 1))
	if status, _, _ := g.do(http.MethodGet, "/admin/escalations", "tok-reviewer", ""); status != http.StatusOK {
		t.Fatalf("reviewer before the rotation: %d", status)
	}
	cfg := g.app.Reload(g.dir, g.cfg)
	if cfg == g.cfg {
		t.Fatal("reload failed")
	}
	if status, resp := g.send("outsider", ping); status != http.StatusAccepted {
		t.Errorf("after the reload: %d %v", status, resp)
	}
	if status, _, _ := g.do(http.MethodGet, "/admin/escalations", "tok-reviewer", ""); status != http.StatusUnauthorized {
		t.Errorf("the revoked reviewer token still works: %d", status)
	}
	if status, _, _ := g.do(http.MethodGet, "/admin/escalations", "tok-reviewer-2", ""); status != http.StatusOK {
		t.Errorf("the new reviewer token does not work: %d", status)
	}
	if status, body, _ := g.do(http.MethodPost, "/sacp/validate", "tok-outsider", `{"g":"X","plan":[["audit_books","LEDGER",{}]]}`); status != http.StatusOK {
		t.Errorf("new verb after the reload: %d %s", status, body)
	}
	// A tool naming an unknown verb does not load; the last good registry serves.
	write("registry.yaml", strings.Replace(regChanged, "supported_verbs: [audit_books]", "supported_verbs: [nope]", 1))
	if got := g.app.Reload(g.dir, cfg); got != cfg {
		t.Fatal("a broken registry.yaml was loaded")
	}
	if status, _, _ := g.do(http.MethodPost, "/sacp/validate", "tok-outsider", `{"g":"X","plan":[["audit_books","LEDGER",{}]]}`); status != http.StatusOK {
		t.Errorf("the last good registry stopped serving: %d", status)
	}

	// All or nothing: a reload that rotates the reviewer's token and takes
	// the outsider's permission away, but whose catalogue does not load,
	// changes nothing anywhere (not the approval door, not the relay).
	write("registry.yaml", regChanged)
	write("agents.yaml", string(agents))
	gw2, _ := os.ReadFile(filepath.Join(g.dir, "gateway.yaml"))
	write("gateway.yaml", strings.Replace(string(gw2), roster.HashTokenHex("tok-reviewer-2"), roster.HashTokenHex("tok-reviewer-3"), 1))
	if err := os.MkdirAll(filepath.Join(g.dir, "specs"), 0o700); err != nil {
		t.Fatal(err)
	}
	write("specs/broken.md", "no front matter\n")
	if got := g.app.Reload(g.dir, cfg); got != cfg {
		t.Fatal("a config whose catalogue does not load was applied")
	}
	if status, _, _ := g.do(http.MethodGet, "/admin/escalations", "tok-reviewer-2", ""); status != http.StatusOK {
		t.Errorf("the failed reload rotated the reviewer token: %d", status)
	}
	if status, resp := g.send("outsider", ping); status != http.StatusAccepted {
		t.Errorf("the failed reload changed the relay's permissions: %d %v", status, resp)
	}
}

// TestMessageRedaction: with protocol.redaction.messages, what the
// detectors find in payloads is masked both ways before it is relayed or
// recorded, and a blocking detector's value is not relayed at all.
func TestMessageRedaction(t *testing.T) {
	g := newA2A(t, a2aOpts{protocolExtra: "  redaction:\n    messages: true\n    block: [ssn]\n"})
	g.peers["planner_1"].Set(testkit.ReplyWith(func(req map[string]any) string {
		return `{"message_type":"response","sender_id":"planner_1","receiver_id":"orch_1","in_reply_to":"` + str(req["message_id"]) + `","workflow_id":"wf_red","action":"plan_complete","payload":{"owner":"carol@example.org","n":42}}`
	}))
	req := `{"message_type":"request","sender_id":"orch_1","receiver_id":"planner_1","workflow_id":"wf_red","action":"plan_workflow","payload":{"customer":{"email":"alice@example.com","limit":100000}}}`
	status, resp := g.send("orch_1", req)
	if status != http.StatusOK {
		t.Fatalf("%d %v", status, resp)
	}
	got := string(g.peers["planner_1"].Received()[0].Body)
	if strings.Contains(got, "alice@example.com") || !strings.Contains(got, `"email":"[REDACTED:email]"`) || !strings.Contains(got, `"limit":100000`) {
		t.Errorf("recipient got %s", got)
	}
	if p := resp["payload"].(map[string]any); p["owner"] != "[REDACTED:email]" || p["n"] != float64(42) {
		t.Errorf("requester got %v", p)
	}
	_, _, data := g.history("orch_1", "workflow_id=wf_red")
	raw, _ := json.Marshal(data)
	if strings.Contains(string(raw), "alice@") || strings.Contains(string(raw), "carol@") {
		t.Errorf("the history holds a redacted value: %s", raw)
	}
	// The audit keeps the hash of what was received, and the counts.
	e := g.entries(kindMessage)
	if len(e) != 1 || e[0].PayloadSHA256 != shaHex([]byte(req)) || !strings.Contains(string(e[0].Summary), `"email":1`) {
		t.Errorf("audit %v", e)
	}
	status, resp = g.send("orch_1", `{"message_type":"notification","sender_id":"orch_1","receiver_id":"planner_1","workflow_id":"wf_red","action":"x","payload":{"ssn":"123-45-6789"}}`)
	if status != http.StatusBadRequest || resp["error"].(map[string]any)["code"] != "content_filter" || strings.Contains(fmt.Sprint(resp), "123-45") {
		t.Errorf("blocked value: %d %v", status, resp)
	}
}
