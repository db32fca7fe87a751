package app

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/testredis"
)

// contextAgents are a2aAgents with seed 003's domains: the vendor agent
// owns the vendor entity and may hand off to the compliance agent, which
// owns the compliance entity.
func contextAgents(t *testing.T) string {
	t.Helper()
	r := strings.NewReplacer(
		"    endpoint: \"%endpoint:vendor_onboarding_agent%\"\n    messages:\n      - to: [compliance_agent]\n        actions: [validate_vendor]\n",
		"    endpoint: \"%endpoint:vendor_onboarding_agent%\"\n    owns: [vendor]\n    messages:\n      - to: [compliance_agent]\n        actions: [validate_vendor, handoff, vendor_update]\n",
		"    endpoint: \"%endpoint:compliance_agent%\"\n",
		"    endpoint: \"%endpoint:compliance_agent%\"\n    owns: [compliance]\n",
	)
	out := r.Replace(a2aAgents)
	if strings.Count(out, "owns:") != 2 {
		t.Fatal("a2aAgents changed: the owns lines were not added")
	}
	return out
}

// samMessage is seed 003 §1.2's SAM envelope in thread corr-uuid-5678.
func samMessage(id, from, to, typ, action, context string) string {
	return `{"message_id":"` + id + `","correlation_id":"corr-uuid-5678","timestamp":"` + time.Now().UTC().Format(time.RFC3339) + `",
	 "sender":{"agent_id":"` + from + `"},"recipient":{"agent_id":"` + to + `"},"message_type":"` + typ + `",
	 "payload":{"action":"` + action + `","data":{},"context":` + context + `},"metadata":{"priority":"high","timeout_ms":5000}}`
}

// vendorEntity is seed 003 §3.1's vendor.
const vendorEntity = `{"entities":{"vendor":{"id":"v-123","name":"Acme Corp","status":"pending_validation"}}}`

// threadContext is GET /relay/context of corr-uuid-5678 as agent.
func (g *a2a) threadContext(agent string) (int, map[string]any) {
	g.t.Helper()
	status, body, _ := g.do(http.MethodGet, "/relay/context?correlation_id=corr-uuid-5678", "tok-"+agent, "")
	var out map[string]any
	_ = json.Unmarshal(body, &out)
	return status, out
}

// TestSeed003ContextObject: seed 003 §3.1, the relay keeps a thread's
// Global Context in the seed's shape from the messages it relays: the
// vendor agent's REQUEST (seed 003 §1.2) writes its vendor entity and
// opens the history; both parties read it, nobody else does.
func TestSeed003ContextObject(t *testing.T) {
	g := newA2A(t, a2aOpts{agents: contextAgents(t)})
	if status, resp := g.send("vendor_onboarding_agent", samMessage("msg-uuid-1234", "vendor_onboarding_agent", "compliance_agent", "REQUEST", "validate_vendor", vendorEntity)); status != http.StatusOK {
		t.Fatalf("validate_vendor: %d %v", status, resp)
	}
	for _, party := range []string{"vendor_onboarding_agent", "compliance_agent"} {
		status, c := g.threadContext(party)
		if status != http.StatusOK {
			t.Fatalf("context as %s: %d %v", party, status, c)
		}
		vendor, _ := c["entities"].(map[string]any)["vendor"].(map[string]any)
		history, _ := c["history"].([]any)
		if c["workflow_id"] != "corr-uuid-5678" || c["status"] != "IN_PROGRESS" || c["current_agent"] != "vendor_onboarding_agent" ||
			vendor["name"] != "Acme Corp" || len(history) != 1 || c["artifacts"] == nil {
			t.Fatalf("context as %s: %v", party, c)
		}
		if h := history[0].(map[string]any); h["agent"] != "vendor_onboarding_agent" || h["action"] != "validate_vendor" || h["timestamp"] == nil {
			t.Errorf("history entry %v", h)
		}
	}
	if status, c := g.threadContext("orch_1"); status != http.StatusNotFound {
		t.Errorf("context as an agent outside the thread: %d %v", status, c)
	}
}

// TestSeed003StateMutabilityRules: seed 003 §3.2. Rule 1: an agent writes
// only the entities of its domain (agents.yaml owns), and only while it is
// the current agent. Rule 2: the history is the gateway's, appended to
// with each message, whatever a message's context says.
func TestSeed003StateMutabilityRules(t *testing.T) {
	g := newA2A(t, a2aOpts{agents: contextAgents(t)})
	if status, resp := g.send("vendor_onboarding_agent", samMessage("m1", "vendor_onboarding_agent", "compliance_agent", "REQUEST", "validate_vendor", vendorEntity)); status != http.StatusOK {
		t.Fatalf("first message: %d %v", status, resp)
	}
	status, resp := g.send("vendor_onboarding_agent", samMessage("m2", "vendor_onboarding_agent", "compliance_agent", "EVENT", "vendor_update",
		`{"entities":{"requisition":{"id":"r-1"}}}`))
	if status != http.StatusForbidden || !strings.Contains(str(resp["error"].(map[string]any)["message"]), `wrote entity "requisition", which it does not own (owns: vendor)`) {
		t.Errorf("a write outside the sender's domain: %d %v", status, resp)
	}
	status, resp = g.send("compliance_agent", samMessage("m3", "compliance_agent", "vendor_onboarding_agent", "EVENT", "review_started",
		`{"entities":{"compliance":{"state":"started"}}}`))
	if status != http.StatusConflict || !strings.Contains(str(resp["error"].(map[string]any)["message"]), "Only the current agent (vendor_onboarding_agent)") {
		t.Errorf("a write by an agent whose turn it is not: %d %v", status, resp)
	}
	status, resp = g.send("compliance_agent", samMessage("m4", "compliance_agent", "vendor_onboarding_agent", "EVENT", "review_started",
		`{"history":[],"current_agent":"compliance_agent"}`))
	if status != http.StatusAccepted {
		t.Fatalf("a message without writes: %d %v", status, resp)
	}
	_, c := g.threadContext("vendor_onboarding_agent")
	if h, _ := c["history"].([]any); len(h) != 2 || c["current_agent"] != "vendor_onboarding_agent" || c["entities"].(map[string]any)["compliance"] != nil {
		t.Errorf("context after the refusals: %v", c)
	}
}

// TestSeed003SequentialHandoff: seed 003 §2.1 and §3.2 rule 3. The vendor
// agent finalizes its state and hands off; while the compliance agent is
// asked, the context is locked (the sender cannot write); its
// acknowledgement makes it the current agent and the sender gets
// "Handoff Complete" (X-Handoff), after which the sender's turn is over.
func TestSeed003SequentialHandoff(t *testing.T) {
	g := newA2A(t, a2aOpts{agents: contextAgents(t)})
	if status, resp := g.send("vendor_onboarding_agent", samMessage("m1", "vendor_onboarding_agent", "compliance_agent", "REQUEST", "validate_vendor", vendorEntity)); status != http.StatusOK {
		t.Fatalf("first message: %d %v", status, resp)
	}
	lockedWrite := make(chan int, 1)
	var during map[string]any
	g.peers["compliance_agent"].Set(func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		status, _ := g.send("vendor_onboarding_agent", samMessage("m-late", "vendor_onboarding_agent", "compliance_agent", "EVENT", "vendor_update", vendorEntity))
		lockedWrite <- status
		_, during = g.threadContext("compliance_agent")
		w.WriteHeader(http.StatusAccepted) // the acknowledgement
	})
	final := `{"entities":{"vendor":{"id":"v-123","name":"Acme Corp","status":"collected"}}}`
	status, body, header := g.do(http.MethodPost, "/relay/messages", "tok-vendor_onboarding_agent",
		samMessage("msg-handoff", "vendor_onboarding_agent", "compliance_agent", "REQUEST", "handoff", final))
	if status != http.StatusOK || header.Get("X-Handoff") != "complete" {
		t.Fatalf("handoff: %d %s (X-Handoff %q)", status, body, header.Get("X-Handoff"))
	}
	if s := <-lockedWrite; s != http.StatusConflict {
		t.Errorf("the sender's write during the handoff: %d, want 409 (locked)", s)
	}
	if h, _ := during["handoff"].(map[string]any); h["state"] != "pending" || during["current_agent"] != "vendor_onboarding_agent" {
		t.Errorf("context while the recipient is asked: %v", during)
	}
	_, c := g.threadContext("vendor_onboarding_agent")
	h, _ := c["handoff"].(map[string]any)
	vendor := c["entities"].(map[string]any)["vendor"].(map[string]any)
	if c["current_agent"] != "compliance_agent" || h["state"] != "complete" || h["from"] != "vendor_onboarding_agent" || h["to"] != "compliance_agent" ||
		h["acknowledged_at"] == nil || vendor["status"] != "collected" {
		t.Fatalf("context after the handoff: %v", c)
	}
	hist, _ := c["history"].([]any)
	if last := hist[len(hist)-1].(map[string]any); last["agent"] != "compliance_agent" || last["action"] != "handoff_acknowledged" {
		t.Errorf("history %v, want the acknowledgement last", hist)
	}
	// The sender's turn is over; the recipient's has begun.
	if status, _ := g.send("vendor_onboarding_agent", samMessage("m5", "vendor_onboarding_agent", "compliance_agent", "EVENT", "vendor_update", vendorEntity)); status != http.StatusConflict {
		t.Errorf("the former current agent writes: %d, want 409", status)
	}
	if status, resp := g.send("compliance_agent", samMessage("m6", "compliance_agent", "vendor_onboarding_agent", "EVENT", "review_started",
		`{"entities":{"compliance":{"state":"started"}}}`)); status != http.StatusAccepted {
		t.Errorf("the new current agent writes its entity: %d %v", status, resp)
	}
}

// TestSeed003HandoffNotAcknowledged: a recipient that answers an ERROR
// does not take the turn: the handoff fails, the lock is released and the
// sender stays the current agent.
func TestSeed003HandoffNotAcknowledged(t *testing.T) {
	g := newA2A(t, a2aOpts{agents: contextAgents(t)})
	g.peers["compliance_agent"].Set(func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"message_id":"err-1","correlation_id":"corr-uuid-5678","sender":{"agent_id":"compliance_agent"},"message_type":"ERROR",` +
			`"error":{"code":"BUSY","message":"not now","source":"compliance_agent","severity":"WARNING","retryable":true}}`))
	})
	status, body, header := g.do(http.MethodPost, "/relay/messages", "tok-vendor_onboarding_agent",
		samMessage("msg-handoff", "vendor_onboarding_agent", "compliance_agent", "REQUEST", "handoff", vendorEntity))
	if status != http.StatusOK || header.Get("X-Handoff") != "" {
		t.Fatalf("refused handoff: %d %s (X-Handoff %q)", status, body, header.Get("X-Handoff"))
	}
	_, c := g.threadContext("vendor_onboarding_agent")
	if h, _ := c["handoff"].(map[string]any); h["state"] != "failed" || c["current_agent"] != "vendor_onboarding_agent" {
		t.Fatalf("context after a refused handoff: %v", c)
	}
	if status, resp := g.send("vendor_onboarding_agent", samMessage("m2", "vendor_onboarding_agent", "compliance_agent", "EVENT", "vendor_update", vendorEntity)); status != http.StatusAccepted {
		t.Errorf("the sender writes after the failed handoff: %d %v", status, resp)
	}
}

// TestSeed003HandoffAcrossReplicas: the Global Context is the gateway's,
// not a replica's: with the Redis backend a handoff made through one
// replica is seen, and enforced, by another.
func TestSeed003HandoffAcrossReplicas(t *testing.T) {
	rd := testredis.Start(t)
	a := newA2A(t, a2aOpts{agents: contextAgents(t), redisURL: rd.URL(), chain: "replica-a"})
	b := newA2A(t, a2aOpts{agents: contextAgents(t), redisURL: rd.URL(), chain: "replica-b", peers: a.peers})
	if status, body, header := a.do(http.MethodPost, "/relay/messages", "tok-vendor_onboarding_agent",
		samMessage("msg-handoff", "vendor_onboarding_agent", "compliance_agent", "REQUEST", "handoff", vendorEntity)); status != http.StatusOK || header.Get("X-Handoff") != "complete" {
		t.Fatalf("handoff on A: %d %s", status, body)
	}
	if status, c := b.threadContext("compliance_agent"); status != http.StatusOK || c["current_agent"] != "compliance_agent" {
		t.Fatalf("context on B: %d %v", status, c)
	}
	if status, _ := b.send("vendor_onboarding_agent", samMessage("m2", "vendor_onboarding_agent", "compliance_agent", "EVENT", "vendor_update", vendorEntity)); status != http.StatusConflict {
		t.Errorf("the former current agent writes on B: %d, want 409", status)
	}
}
