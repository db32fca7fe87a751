package app

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/testkit"
	"github.com/sacpgw/gateway/workflow"
)

// pickAgents: starter may message anyone, limited only summarizer_b,
// loner nobody. The writers answer in the SACP JSON protocol on the
// built-in mock provider; none of them checks visas.
const pickAgents = `agents:
  starter:
    type: orchestrator
    messages:
      - to: ["*"]
        actions: ["*"]
  limited:
    type: orchestrator
    messages:
      - to: [summarizer_b]
        actions: [summarize]
  loner:
    type: orchestrator
  collector:
    type: researcher
    response_format: json_standard
    models: [mock-1]
  summarizer:
    type: writer
    response_format: json_standard
    models: [mock-1]
    supported_verbs: [summarize]
    outputs: [summary]
    description: Summarizes long documents into short abstracts
  summarizer_b:
    type: writer
    response_format: json_standard
    models: [mock-1]
    supported_verbs: [summarize]
    outputs: [summary]
    description: Summarizes documents
  translator:
    type: writer
    response_format: json_standard
    models: [mock-1]
    supported_verbs: [translate]
    outputs: [translation]
    description: Translates documents between English and French
`

// pickFlows: seed 001 Appendix D's visa check (no agent can check visas
// until one is spawned), a structural pick and a free-text pick.
const pickFlows = `workflows:
  visa-check:
    callers: [starter]
    start: collect
    nodes:
      collect:
        agent: collector
        input: "Collect the traveller's details: {{input.traveller}}"
      visa:
        agent:
          verb: check
          inputs: [nationality, destination]
          output_type: visa_required
          spawn_endpoint: "%spawn_endpoint%"
        input: "Is a visa required? {{collect.message}}"
        timeout: 20s
    edges:
      - {from: collect, to: visa, when: 'response.status == "success"'}
      - {from: visa, to: end, when: 'response.status == "success"'}
  summarize:
    callers: [starter, limited, loner]
    start: sum
    nodes:
      sum:
        agent: {verb: summarize, output_type: summary}
        input: "Summarize {{input.doc}}"
  translate:
    callers: [starter]
    start: tr
    nodes:
      tr:
        agent: {text: "translate this document into French"}
        input: "Translate {{input.doc}}"
`

// newPickFlow is a gateway on the mock provider with pickFlows, its
// spawned agents answering at the returned peer.
func newPickFlow(t *testing.T) (*a2a, *testkit.Peer) {
	t.Helper()
	peer := newPeer(t)
	return newA2A(t, a2aOpts{agents: pickAgents, files: map[string]string{
		config.WorkflowsFile: strings.ReplaceAll(pickFlows, "%spawn_endpoint%", peer.Srv.URL+"/sacp"),
		config.RegistryFile: `registry:
  verbs:
    - name: summarize
      description: Summarizes a document.
      inputs: ["doc:string"]
      outputs: summary
    - name: translate
      description: Translates a document.
      inputs: ["doc:string"]
      outputs: translation
`,
	}}), peer
}

// startRun starts a run as agent without waiting and returns its id.
func (g *a2a) startRun(agent, name, input string) string {
	g.t.Helper()
	status, body, _ := g.do(http.MethodPost, "/workflows/"+name+"/runs", "tok-"+agent, `{"input": `+input+`}`)
	var v workflow.View
	if err := json.Unmarshal(body, &v); status != http.StatusCreated || err != nil {
		g.t.Fatalf("start %s as %s: %d %s", name, agent, status, body)
	}
	return v.ID
}

// runEnd polls a run of agent until it is final.
func (g *a2a) runEnd(agent, name, id string) workflow.View {
	g.t.Helper()
	var v workflow.View
	for deadline := time.Now().Add(15 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		_, body, _ := g.do(http.MethodGet, "/workflows/"+name+"/runs/"+id, "tok-"+agent, "")
		v = workflow.View{}
		_ = json.Unmarshal(body, &v)
		if v.Status.Final() {
			return v
		}
	}
	g.t.Fatalf("run %s still %s", id, v.Status)
	return v
}

// spawnReview waits for the registry.spawn entry that escalated a spawn
// and returns its review's id.
func (g *a2a) spawnReview() string {
	g.t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, e := range g.entries("registry.spawn") {
			if id := str(summaryOf(e)["escalation_id"]); id != "" {
				return id
			}
		}
	}
	g.t.Fatal("no spawn was escalated")
	return ""
}

// visaRun starts a visa-check run, has a reviewer take decision on the
// spawn it asks for, and returns the run once it ended.
func (g *a2a) visaRun(decision string) (string, workflow.View) {
	g.t.Helper()
	id := g.startRun("starter", "visa-check", `{"traveller": "a French citizen going to Japan"}`)
	review := g.spawnReview()
	if status, body, _ := g.do(http.MethodPost, "/admin/escalations/"+review+"/decision", "tok-reviewer",
		`{"decision":"`+decision+`","reviewer":"security-lead","comment":"decided"}`); status != http.StatusOK {
		g.t.Fatalf("%s the spawn: %d %s", decision, status, body)
	}
	return id, g.runEnd("starter", "visa-check", id)
}

// TestSeed001AppendixDSpawnAndRetry: seed 001 Appendix D end to end on
// the mock provider. The visa node asks the registry for an agent that
// checks visas; none fits, so the registry's SPAWN_AGENT suggestion goes to
// the spawn route with the node's spawn_endpoint; the policy asks a person
// (an endpoint), who approves; the step asks again, finds the new agent
// and messages it through the relay as the run's caller; its answer
// completes the run. The choice is on the step and the trail, and the new
// agent's token on neither.
func TestSeed001AppendixDSpawnAndRetry(t *testing.T) {
	g, peer := newPickFlow(t)
	peer.Set(testkit.ReplyWith(func(req map[string]any) string {
		to, _ := req["recipient"].(map[string]any)
		return fmt.Sprintf(`{"message_id":"visa-answer","sender":{"agent_id":%q},"recipient":{"agent_id":"starter"},"message_type":"RESPONSE",`+
			`"payload":{"action":"check","data":{"thought":"rules","status":"success","data":{"visa_required":false},"message":"No visa needed."}}}`, to["agent_id"])
	}))
	id, v := g.visaRun("approve")
	if v.Status != workflow.Completed || nodesOf(v.Steps) != "collect:success visa:success" {
		t.Fatalf("run %s: %s, steps %s, error %q", id, v.Status, nodesOf(v.Steps), v.Error)
	}
	st := v.Steps[1]
	pk := st.Pick
	if pk == nil || pk.Spawn == nil || pk.Spawn.Status != workflow.SpawnEscalated || pk.Chosen == "" ||
		pk.Chosen != pk.Spawn.Agent || st.Agent != pk.Chosen || pk.Query.Verb != "check" {
		t.Fatalf("visa step's pick: %+v (agent %q), want the spawned agent chosen after an escalated spawn", pk, st.Agent)
	}
	if st.Answer == nil || st.Answer.Data["visa_required"] != false {
		t.Errorf("visa step's answer %+v, want the spawned agent's", st.Answer)
	}
	got := peer.WaitFor(1)
	var req struct {
		CorrelationID string `json:"correlation_id"`
		Sender        struct {
			AgentID string `json:"agent_id"`
		} `json:"sender"`
		MessageType string `json:"message_type"`
		Payload     struct {
			Action string `json:"action"`
			Data   struct {
				Input string `json:"input"`
			} `json:"data"`
		} `json:"payload"`
	}
	if err := json.Unmarshal(got[0].Body, &req); err != nil || req.CorrelationID != id || req.Sender.AgentID != "starter" ||
		req.MessageType != "REQUEST" || req.Payload.Action != "check" || !strings.HasPrefix(req.Payload.Data.Input, "Is a visa required? Mock answer to:") {
		t.Errorf("the spawned agent got %s", got[0].Body)
	}
	picks := g.entries(workflow.KindPick)
	if len(picks) != 1 {
		t.Fatalf("%d workflow.pick entries, want 1", len(picks))
	}
	sum := summaryOf(picks[0])
	if sum["chosen"] != pk.Chosen || sum["run_id"] != id || sum["spawn"] == nil || picks[0].AgentID != "starter" {
		t.Errorf("workflow.pick entry %v", sum)
	}
	raw, _ := json.Marshal(v)
	if strings.Contains(string(raw), "gw-spawn-") {
		t.Errorf("the run carries the spawned agent's token: %s", raw)
	}
	for _, e := range g.entries("registry.spawn") {
		if b, _ := json.Marshal(e); strings.Contains(string(b), "gw-spawn-") {
			t.Errorf("a registry.spawn entry carries a token: %s", b)
		}
	}
	if v.Context.History[1].Agent != pk.Chosen {
		t.Errorf("Global Context history %+v, want the spawned agent's step", v.Context.History)
	}
}

// TestSeed001AppendixARegistryPicks: a node that names a verb and output
// type gets the best structural match, one that names only text the best
// free-text match; a caller that may not message the best agent gets the
// next one it may, and a caller that may message none fails the step with
// the reasons (no spawn: the agents exist, the caller may not reach them).
func TestSeed001AppendixARegistryPicks(t *testing.T) {
	g, _ := newPickFlow(t)
	cases := []struct {
		caller, flow, chosen, ranking string
		skipped                       []string
	}{
		{"starter", "summarize", "summarizer", "structural", nil},
		{"starter", "translate", "translator", "lexical", nil},
		{"limited", "summarize", "summarizer_b", "structural", []string{"summarizer"}},
	}
	for _, c := range cases {
		t.Run(c.caller+"/"+c.flow, func(t *testing.T) {
			id := g.startRun(c.caller, c.flow, `{"doc": "the quarterly report"}`)
			v := g.runEnd(c.caller, c.flow, id)
			if v.Status != workflow.Completed || len(v.Steps) != 1 {
				t.Fatalf("run: %s (%q), steps %s", v.Status, v.Error, nodesOf(v.Steps))
			}
			st := v.Steps[0]
			if st.Agent != c.chosen || st.Pick == nil || st.Pick.Chosen != c.chosen || st.Pick.Ranking != c.ranking || st.Pick.Spawn != nil {
				t.Fatalf("step: agent %q, pick %+v; want %s ranked %s", st.Agent, st.Pick, c.chosen, c.ranking)
			}
			var skipped []string
			for _, s := range st.Pick.Skipped {
				skipped = append(skipped, s.Agent)
				if !strings.HasPrefix(s.Refused, "RBAC: ") {
					t.Errorf("skipped %s for %q, want the RBAC reason", s.Agent, s.Refused)
				}
			}
			if strings.Join(skipped, ",") != strings.Join(c.skipped, ",") {
				t.Errorf("skipped %v, want %v", skipped, c.skipped)
			}
			if !strings.Contains(st.Answer.Message, "Mock answer to: Summarize the quarterly report") &&
				!strings.Contains(st.Answer.Message, "Mock answer to: Translate the quarterly report") {
				t.Errorf("answer %q is not the mock provider's", st.Answer.Message)
			}
		})
	}
	t.Run("loner/summarize", func(t *testing.T) {
		id := g.startRun("loner", "summarize", `{"doc": "x"}`)
		v := g.runEnd("loner", "summarize", id)
		if v.Status != workflow.Failed || !strings.Contains(v.Error, "no agent matching the node may be messaged by loner") ||
			!strings.Contains(v.Error, "summarizer (RBAC: ") || !strings.Contains(v.Error, "summarizer_b (RBAC: ") {
			t.Fatalf("run: %s, error %q; want a failure naming both refusals", v.Status, v.Error)
		}
		if pk := v.Steps[0].Pick; pk == nil || pk.Spawn != nil || pk.Chosen != "" {
			t.Errorf("pick %+v, want no choice and no spawn", pk)
		}
	})
}

// TestSeed001AppendixDSpawnRejected: a person who rejects the spawn fails
// the step and the run; the endpoint is never called.
func TestSeed001AppendixDSpawnRejected(t *testing.T) {
	g, peer := newPickFlow(t)
	_, v := g.visaRun("reject")
	if v.Status != workflow.Failed || !strings.Contains(v.Error, "rejected by a person") {
		t.Fatalf("run: %s, error %q; want a failure saying the spawn was rejected", v.Status, v.Error)
	}
	if pk := v.Steps[1].Pick; pk == nil || pk.Spawn == nil || pk.Chosen != "" {
		t.Errorf("pick %+v, want the escalated spawn and no choice", pk)
	}
	if got := peer.Received(); len(got) != 0 {
		t.Errorf("the endpoint of a rejected spawn got %d messages", len(got))
	}
}
