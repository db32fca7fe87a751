package messaging

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/internal/testkit"
)

// testRegistry is the library of the plan tests, the test's own so that
// edits to the shipped config/registry.yaml do not move them.
const testRegistry = `registry:
  verbs:
    - name: search
      aliases: [s]
      description: Finds items.
      inputs: ["c:string", "p_max:number"]
      outputs: list
    - name: rank
      description: Orders items.
      inputs: ["c:array"]
      outputs: list
    - name: predict
      description: Predicts values.
      inputs: ["method:string"]
      outputs: predictions
    - name: join
      description: Merges a parallel group.
      inputs: []
      outputs: object
  tools:
    - id: H_API
      description: Hotel search.
      supported_verbs: [search]
    - id: H_API2
      description: Another hotel search.
      supported_verbs: [search]
    - id: RANK
      description: Ranker.
      supported_verbs: [rank]
    - id: PRC_EST
      description: Price estimator.
      supported_verbs: [predict]
    - id: MERGE
      description: Merges results.
      supported_verbs: [join]
`

// groupAgents are three more agents for group sends: two executors beside
// the harness's one, and a dispatcher whose RBAC reaches two of the three.
const groupAgents = `  executor_b:
    type: executor
    endpoint: "%endpoint:executor_b%"
    supported_verbs: [search]
    supported_tools: [H_API]
  executor_c:
    type: executor
    endpoint: "%endpoint:executor_c%"
    supported_verbs: [rank]
    supported_tools: [RANK]
  dispatcher:
    type: dispatcher
    endpoint: "%endpoint:dispatcher%"
    messages:
      - to: [executor, executor_b, orch]
        actions: ["*"]
`

var groupPeers = []string{"executor_b", "executor_c", "dispatcher"}

func aclEvent(sender, receiver, wf, payload string) string {
	return `{"message_type":"notification","sender_id":"` + sender + `","receiver_id":"` + receiver + `","workflow_id":"` + wf + `","action":"run_plan","payload":` + payload + `}`
}

// planErrBody is the ERR answer to a refused plan.
type planErrBody struct {
	Status  string `json:"status"`
	Code    string `json:"code"`
	Details string `json:"details"`
	Path    string `json:"path"`
	ReplyTo string `json:"reply_to"`
}

// TestPlanChecked: an envelope whose payload is a compact SACP message is
// checked against the library (the codes of /sacp/validate) and against
// the recipient's supported verbs and tools (aliases resolved) before it is
// queued or relayed; a refused one reaches nobody, is answered 422 in the
// compact ERR shape replying to the message, audited as message.reject
// with its reason and counted as refused.
func TestPlanChecked(t *testing.T) {
	h := newHarness(t, harnessOpts{registry: testRegistry})
	h.run()
	tests := []struct {
		name, agent, body string
		// code is the refusal's; "" for a plan that goes through (to).
		code, path, reason string
		to                 string
	}{
		{"valid plan", "orch", aclEvent("orch", "executor", "wf_p1", `{"g":"hotels","plan":[["search","H_API",{"c":"Paris"}],["rank","RANK",{}]]}`), "", "", "", "executor"},
		{"alias of a supported verb", "orch", aclEvent("orch", "executor", "wf_p2", `{"g":"hotels","plan":[["s","H_API",{"c":"Paris"}]]}`), "", "", "", "executor"},
		{"goal spelled out", "orch", aclEvent("orch", "executor", "wf_p3", `{"goal":"hotels","plan":[["search","H_API",{}]]}`), "", "", "", "executor"},
		{"SAM payload with its action", "orch", `{"correlation_id":"c_p1","sender":{"agent_id":"orch"},"recipient":{"agent_id":"planner"},"message_type":"EVENT","payload":{"action":"run","g":"forecast","plan":[["predict","PRC_EST",{"method":"arima"}]]}}`, "", "", "", "planner"},
		{"payload without a plan", "orch", aclEvent("orch", "executor", "wf_p4", `{"g":"hotels","steps":[1]}`), "", "", "", "executor"},
		{"unknown verb", "orch", aclEvent("orch", "executor", "wf_r1", `{"g":"hotels","plan":[["fly","H_API",{}]]}`), "UNKNOWN_VERB", "plan[0][0]", "unknown verb", ""},
		{"param of the wrong type", "orch", aclEvent("orch", "executor", "wf_r2", `{"g":"hotels","plan":[["search","H_API",{"p_max":"cheap"}]]}`), "INVALID_PARAMS", "plan[0][2].p_max", "must be a number", ""},
		{"no goal", "orch", aclEvent("orch", "executor", "wf_r3", `{"plan":[["search","H_API",{}]]}`), "MISSING_FIELD", "g", "", ""},
		{"look-alike plan key", "orch", aclEvent("orch", "executor", "wf_r4", `{"g":"hotels","Plan":[["search","H_API",{}]]}`), "MALFORMED_MESSAGE", "Plan", "", ""},
		{"plan not an array", "orch", aclEvent("orch", "executor", "wf_r5", `{"g":"hotels","plan":"search everything"}`), "MALFORMED_PLAN", "plan", "", ""},
		{"recipient lacks the verb", "orch", aclEvent("orch", "planner", "wf_r6", `{"g":"hotels","plan":[["search","H_API",{}]]}`), "UNKNOWN_VERB", "plan[0][0]", `agent "planner" does not support verb "search"`, ""},
		{"recipient lacks the tool", "orch", aclEvent("orch", "executor", "wf_r7", `{"g":"hotels","plan":[["search","H_API2",{}]]}`), "UNKNOWN_TOOL", "plan[0][1]", `agent "executor" does not support tool "H_API2"`, ""},
		{"recipient lacks a branch's verb", "orch", aclEvent("orch", "planner", "wf_r8", `{"g":"x","plan":[{"parallel":[["predict","PRC_EST",{}],["rank","RANK",{}]]},["join","MERGE",{}]]}`), "UNKNOWN_VERB", "plan[0].parallel[1][0]", "parallel branch 2", ""},
		{"join's library tool not the recipient's", "orch", aclEvent("orch", "executor", "wf_r9", `{"g":"x","plan":[{"parallel":[["search","H_API",{}],["rank","RANK",{}]]},["join","MERGE",{}]]}`), "UNKNOWN_TOOL", "plan[1][1]", `tool "MERGE"`, ""},
		{"recipient declares no verbs", "executor", aclEvent("executor", "orch", "wf_r10", `{"g":"x","plan":[["search","H_API",{}]]}`), "UNKNOWN_VERB", "plan", `agent "orch" declares no supported_verbs: it cannot be sent a plan`, ""},
		{"a spawn is not relayed", "orch", aclEvent("orch", "executor", "wf_r11", `{"g":"SPAWN_AGENT","plan":[["define","NEW_T",{"description":"d","inputs":[],"outputs":["x"]}],["instantiate","new_agent",{"verb":"search","tool":"NEW_T"}]]}`), "UNKNOWN_VERB", "plan[0][0]", "only POST /registry/spawn runs", ""},
		// The messages policy gets the plan's verbs resolved: an alias of a
		// verb the recipient supports is not denied there.
		{"REQUEST with an alias", "orch", `{"message_id":"rq_alias","message_type":"request","sender_id":"orch","receiver_id":"executor","workflow_id":"wf_p5","action":"run","payload":{"g":"x","plan":[["s","H_API",{}]]}}`, "", "", "", "executor"},
		{"REQUEST too", "orch", `{"message_id":"rq_p","message_type":"request","sender_id":"orch","receiver_id":"executor","workflow_id":"wf_r12","action":"run","payload":{"g":"x","plan":[["search","H_API2",{}]]}}`, "UNKNOWN_TOOL", "plan[0][1]", "", ""},
	}
	refused := 0
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := map[string]int{}
			for id, p := range h.peers {
				before[id] = len(p.Received())
			}
			rejects := len(h.records(KindMessageReject))
			w := h.send(tc.agent, tc.body)
			if tc.code == "" {
				// Queued (202), or a REQUEST relayed and answered (200).
				if w.Code != http.StatusAccepted && w.Code != http.StatusOK {
					t.Fatalf("%d %s", w.Code, w.Body)
				}
				got := h.peers[tc.to].WaitFor(before[tc.to] + 1)
				if !strings.Contains(string(got[len(got)-1].Body), `"g":"`) && !strings.Contains(string(got[len(got)-1].Body), `"goal":"`) {
					t.Errorf("%s got %s", tc.to, got[len(got)-1].Body)
				}
				return
			}
			refused++
			if w.Code != http.StatusUnprocessableEntity || !strings.HasPrefix(w.Header().Get("Content-Type"), "application/json") {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			var e planErrBody
			if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
				t.Fatalf("not the ERR shape: %s", w.Body)
			}
			var raw map[string]any
			_ = json.Unmarshal(w.Body.Bytes(), &raw)
			if e.Status != "ERR" || e.ReplyTo == "" || e.Code != tc.code || e.Path != tc.path || !strings.Contains(e.Details, tc.reason) || len(raw) != 4+btoi(tc.path != "") {
				t.Errorf("ERR %s, want code %s path %s reason ~%q", w.Body, tc.code, tc.path, tc.reason)
			}
			if sent := decode(t, []byte(tc.body))["message_id"]; sent != nil && e.ReplyTo != sent {
				t.Errorf("reply_to %q, want the message's id %v", e.ReplyTo, sent)
			}
			rs := h.records(KindMessageReject)
			if len(rs) != rejects+1 {
				t.Fatalf("%d message.reject entries, want %d", len(rs), rejects+1)
			}
			sum := testkit.SummaryOf(rs[len(rs)-1])
			if sum["status"] != 422 || sum["error_code"] != tc.code || sum["reason"] != e.Details || sum["message_id"] != e.ReplyTo {
				t.Errorf("message.reject %v", sum)
			}
			if v, _ := sum["checks"].(map[string]any)["plan"].(map[string]any); v["code"] != tc.code {
				t.Errorf("checks.plan %v", sum["checks"])
			}
			for id, p := range h.peers {
				if n := len(p.Received()); n != before[id] {
					t.Errorf("%s received the refused plan", id)
				}
			}
		})
	}
	if st := h.svc.Stats(); st.Refused != int64(refused) {
		t.Errorf("stats %+v, want %d refused", st, refused)
	}
	// The refused messages are not in their threads.
	for i := 1; i <= 12; i++ {
		if n := len(h.thread("workflow", fmt.Sprint("wf_r", i))); n != 0 {
			t.Errorf("wf_r%d holds %d entries", i, n)
		}
	}
}

// TestPlanInAnswerChecked: a recipient's answer to a REQUEST is relayed to
// the requester, so its plan is held to the same rules: one the requester
// cannot run never reaches it; the requester gets the gateway's ERROR.
func TestPlanInAnswerChecked(t *testing.T) {
	h := newHarness(t, harnessOpts{registry: testRegistry})
	h.peers["planner"].Set(testkit.ReplyWith(func(req map[string]any) string {
		return `{"message_type":"response","sender_id":"planner","receiver_id":"orch","in_reply_to":"` + str(req["message_id"]) + `","action":"plan_complete","payload":{"g":"hotels","plan":[["search","H_API",{}]]}}`
	}))
	w := h.send("orch", `{"message_type":"request","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_ans","action":"plan"}`)
	if w.Code != http.StatusBadGateway || strings.Contains(w.Body.String(), "H_API") {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	d := h.records(KindMessageDelivery)
	if len(d) != 1 || testkit.SummaryOf(d[0])["cause"] != "bad_answer" {
		t.Errorf("message.delivery %+v", d)
	}
	if !strings.Contains(h.logs.String(), "declares no supported_verbs") {
		t.Errorf("the log does not say why: %s", h.logs.String())
	}
	// A plan the requester can run goes through.
	h2 := newHarness(t, harnessOpts{registry: testRegistry, agents: `  asker:
    type: planner
    supported_verbs: [predict]
    supported_tools: [PRC_EST]
    messages:
      - to: [executor]
        actions: ["*"]
`})
	h2.peers["executor"].Set(testkit.ReplyWith(func(req map[string]any) string {
		return `{"message_type":"response","sender_id":"executor","receiver_id":"asker","in_reply_to":"` + str(req["message_id"]) + `","action":"ok","payload":{"g":"fc","plan":[["predict","PRC_EST",{}]]}}`
	}))
	if w := h2.send("asker", `{"message_type":"request","sender_id":"asker","receiver_id":"executor","workflow_id":"wf_ok","action":"plan"}`); w.Code != http.StatusOK {
		t.Fatalf("runnable plan in the answer: %d %s", w.Code, w.Body)
	}
}

// TestGroupPlanLeavesOut: a group send's plan goes to the agents of the
// type that can run it; the others are left out (and said so in the
// audit); when none can, the send is refused with the ERR.
func TestGroupPlanLeavesOut(t *testing.T) {
	h := newHarness(t, harnessOpts{registry: testRegistry, agents: groupAgents, peers: groupPeers})
	w := h.send("orch", `{"message_type":"notification","sender_id":"orch","receiver_type":"executor","workflow_id":"wf_gp","action":"run","payload":{"g":"x","plan":[["search","H_API",{}]]}}`)
	if w.Code != http.StatusAccepted || fmt.Sprint(jsonBody(t, w)["recipients"]) != "[executor executor_b]" {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	plan, _ := testkit.SummaryOf(h.records(KindMessage)[0])["checks"].(map[string]any)["plan"].(map[string]any)
	if left, _ := plan["left_out"].(map[string]any); len(left) != 1 || !strings.Contains(str(left["executor_c"]), "UNKNOWN_VERB") {
		t.Errorf("checks.plan %v", plan)
	}
	w = h.send("orch", `{"message_type":"notification","sender_id":"orch","receiver_type":"executor","workflow_id":"wf_gp2","action":"run","payload":{"g":"x","plan":[["predict","PRC_EST",{}]]}}`)
	var e planErrBody
	if w.Code != http.StatusUnprocessableEntity || json.Unmarshal(w.Body.Bytes(), &e) != nil || e.Code != "UNKNOWN_VERB" {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
