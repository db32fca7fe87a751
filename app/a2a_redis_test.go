package app

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestMessagingTwoReplicasShareRedis: two gateways on one Redis behave as
// one: an agent spawned on one is known to the other, a queued message is
// delivered exactly once by whichever replica takes it, and the history
// and the escalations written by one are read through the other.
func TestMessagingTwoReplicasShareRedis(t *testing.T) { forEachRedis(t, testMessagingTwoReplicas) }

func testMessagingTwoReplicas(t *testing.T, target string) {
	a := newA2A(t, a2aOpts{redisURL: target, chain: "replica-a"})
	b := newA2A(t, a2aOpts{redisURL: target, chain: "replica-b", peers: a.peers})

	status, body, _ := a.do(http.MethodPost, "/registry/spawn", "tok-orch_1", `{"g":"SPAWN_AGENT","plan":[["define","VISA_Q",{"description":"Visa rules","inputs":["nationality"],"outputs":["visa_required"]}],["instantiate","VISA_AGENT",{"tool":"VISA_Q","verb":"check"}]]}`)
	if status != http.StatusCreated {
		t.Fatalf("spawn on A: %d %s", status, body)
	}
	found := false
	for deadline := time.Now().Add(3 * time.Second); !found && time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		_, body, _ = b.do(http.MethodPost, "/registry/query", "tok-outsider", `{"query":{"verb":"check"}}`)
		found = strings.Contains(string(body), "VISA_AGENT")
	}
	if !found {
		t.Fatalf("replica B does not know the agent spawned on A: %s", body)
	}
	if status, body, _ := b.do(http.MethodPost, "/registry/spawn", "tok-orch_1", `{"g":"SPAWN_AGENT","plan":[["define","VISA_Q2",{"description":"x"}],["instantiate","VISA_AGENT",{"tool":"VISA_Q2","verb":"check"}]]}`); status != http.StatusConflict {
		t.Errorf("the same name spawned on B: %d %s", status, body)
	}

	const n = 20
	for i := range n {
		via := a
		if i%2 == 1 {
			via = b
		}
		status, resp := via.send("orch_1", `{"message_id":"r`+itoa(i)+`","message_type":"notification","sender_id":"orch_1","receiver_id":"planner_1","workflow_id":"wf_redis","action":"task_assign","payload":{}}`)
		if status != http.StatusAccepted {
			t.Fatalf("notification %d: %d %v", i, status, resp)
		}
	}
	// An id already used through A is refused through B.
	if status, _ := b.send("orch_1", `{"message_id":"r0","message_type":"notification","sender_id":"orch_1","receiver_id":"planner_1","workflow_id":"wf_redis","action":"task_assign","payload":{}}`); status != http.StatusConflict {
		t.Errorf("repeat through the other replica: %d", status)
	}
	a.peers["planner_1"].WaitFor(n)
	time.Sleep(300 * time.Millisecond) // a duplicate would arrive now
	got := a.peers["planner_1"].Received()
	seen := map[string]int{}
	for _, r := range got {
		var m map[string]any
		_ = json.Unmarshal(r.Body, &m)
		seen[str(m["message_id"])]++
	}
	if len(got) != n || len(seen) != n {
		t.Errorf("%d deliveries of %d distinct messages, want %d exactly once", len(got), len(seen), n)
	}
	// The deliveries are audited (in the chain of whichever replica made them).
	if len(a.entries(kindMessageDelivery)) == 0 && len(b.entries(kindMessageDelivery)) == 0 {
		t.Errorf("no delivery audited")
	}
	_, ids, _ := b.history("planner_1", "workflow_id=wf_redis")
	if len(ids) != n {
		t.Errorf("history read through B has %d of %d messages", len(ids), n)
	}

	// An ERROR escalated on A is in B's review queue.
	status, resp := a.send("executor_1", `{"message_type":"error","sender_id":"executor_1","receiver_id":"orch_1","workflow_id":"wf_redis","action":"execution_failed","error":"Customer CUST999 not found","payload":{"error_code":"NOT_FOUND"}}`)
	if status != http.StatusAccepted {
		t.Fatalf("error: %d %v", status, resp)
	}
	if status, resp = a.send("executor_1", `{"message_type":"error","sender_id":"executor_1","receiver_id":"orch_1","workflow_id":"wf_redis","action":"execution_failed","error":"again","payload":{"error_code":"NOT_FOUND"}}`); status != http.StatusAccepted || resp["escalation"] != nil {
		t.Fatalf("second retryable error: %d %v", status, resp)
	}
	status, resp = b.send("executor_1", `{"message_type":"error","sender_id":"executor_1","receiver_id":"orch_1","workflow_id":"wf_redis","action":"execution_failed","error":"third","payload":{"error_code":"NOT_FOUND"}}`)
	esc, ok := resp["escalation"].(map[string]any)
	if status != http.StatusAccepted || !ok {
		t.Fatalf("third retryable error across replicas was not escalated: %d %v", status, resp)
	}
	_, body, _ = a.do(http.MethodGet, "/admin/escalations", "tok-admin", "")
	if !strings.Contains(string(body), str(esc["request_id"])) {
		t.Errorf("escalation opened on B missing on A: %s", body)
	}
}
