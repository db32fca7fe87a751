package app

import (
	"context"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	a2asdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"encoding/json"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/workflow"
)

// briefer is an A2A agent made with the official Go SDK: it answers a
// message with a task whose artifact holds a data part {"summary": ...}
// and a text part; a message saying "fail" ends its task failed with a
// reason, one saying "slow" is never answered, one saying "which" asks a question (input-required) unless it
// also carries the person's answer ("Q3").
type briefer struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []string
}

func (b *briefer) texts() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.got)
}

func (b *briefer) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2asdk.Event, error] {
	return func(yield func(a2asdk.Event, error) bool) {
		text := partsText(ec.Message.Parts)
		b.mu.Lock()
		b.got = append(b.got, text)
		b.mu.Unlock()
		if ec.StoredTask == nil && !yield(a2asdk.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		status := func(s a2asdk.TaskState, say string) {
			m := a2asdk.NewMessageForTask(a2asdk.MessageRoleAgent, ec, a2asdk.NewTextPart(say))
			yield(a2asdk.NewStatusUpdateEvent(ec, s, m), nil)
		}
		switch {
		case strings.Contains(text, "fail"):
			status(a2asdk.TaskStateFailed, "the source document is unreadable")
			return
		case strings.Contains(text, "slow"):
			<-ctx.Done()
			return
		case strings.Contains(text, "which") && !strings.Contains(text, "Q3"):
			status(a2asdk.TaskStateInputRequired, "Which quarter?")
			return
		}
		parts := []*a2asdk.Part{a2asdk.NewTextPart("done"),
			a2asdk.NewDataPart(map[string]any{"summary": "short: " + text, "points": 3})}
		if !yield(a2asdk.NewArtifactEvent(ec, parts...), nil) {
			return
		}
		yield(a2asdk.NewStatusUpdateEvent(ec, a2asdk.TaskStateCompleted, nil), nil)
	}
}

func (b *briefer) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2asdk.Event, error] {
	return func(yield func(a2asdk.Event, error) bool) {
		yield(a2asdk.NewStatusUpdateEvent(ec, a2asdk.TaskStateCanceled, nil), nil)
	}
}

func newBriefer(t *testing.T) *briefer {
	b := &briefer{}
	mux := http.NewServeMux()
	b.srv = httptest.NewServer(mux)
	card := &a2asdk.AgentCard{
		Name: "Briefer", Description: "Briefs documents.", Version: "1.0.0",
		SupportedInterfaces: []*a2asdk.AgentInterface{a2asdk.NewAgentInterface(b.srv.URL+"/rpc", a2asdk.TransportProtocolJSONRPC)},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"application/json"},
		Skills: []a2asdk.AgentSkill{{ID: "brief", Name: "Brief", Description: "Briefs a document.", Tags: []string{"summary"}}},
	}
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewAgentCardHandler(a2asrv.AgentCardProducerFn(func(context.Context) (*a2asdk.AgentCard, error) {
		return card, nil
	})))
	mux.Handle("/rpc", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(b)))
	t.Cleanup(b.srv.Close)
	return b
}

// newA2ANodeGateway is the whole gateway with workflow "brief": node summ
// is the A2A agent helper (b), node write a SACP writer on the mock
// provider given summ's data.summary. caller may start it and message
// helper; outsider may start it and not message helper. With humanInput,
// helper's questions go to the A2A door's own review.
func newA2ANodeGateway(t *testing.T, b *briefer, humanInput bool) *a2a {
	t.Helper()
	dir := t.TempDir()
	auditDir := filepath.Join(dir, "audit")
	gw := reviewedGatewayYAML(auditDir, "a2anode") + `messaging:
  allowed_networks: [127.0.0.0/8]
`
	agents := fmt.Sprintf(`agents:
  caller:
    type: orchestrator
    token_sha256: %q
    messages:
      - {to: [helper], actions: [message]}
  outsider:
    type: orchestrator
    token_sha256: %q
  writer:
    type: writer
    token_sha256: %q
    response_format: json_standard
    models: [mock-1]
  helper:
    type: worker
    token_sha256: %q
    a2a: {url: %q, human_input: %t}
`, roster.HashTokenHex("tok-caller"), roster.HashTokenHex("tok-outsider"), roster.HashTokenHex("tok-writer"),
		roster.HashTokenHex("tok-helper"), b.srv.URL, humanInput)
	flows := `workflows:
  brief:
    callers: [caller, outsider]
    start: summ
    nodes:
      summ:
        agent: helper
        input: "Brief {{input.doc}}"
        timeout: 10s
      write:
        agent: writer
        input: "Write up: {{summ.data.summary}} ({{summ.data.points}} points)"
    edges:
      - {from: summ, to: write, when: 'response.data.points == 3'}
  quick:
    callers: [caller]
    start: summ
    nodes:
      summ:
        agent: helper
        input: "Brief {{input.doc}}"
        timeout: 1s
`
	return serveApp(t, dir, auditDir, map[string]string{
		config.GatewayFile: gw, config.AgentsFile: agents, config.WorkflowsFile: flows, config.ProtocolFile: "protocol: {}\n",
	})
}

// TestWorkflowA2ANode: a node whose agent is an A2A agent sends the step's
// input as the run's caller through the A2A door, waits for the task and
// maps its artifact's data part into the step's data, which the next
// node's input and the edge's condition use; the message is audited as
// the caller's A2A call.
func TestWorkflowA2ANode(t *testing.T) {
	b := newBriefer(t)
	g := newA2ANodeGateway(t, b, false)
	id := g.startRun("caller", "brief", `{"doc": "the Q3 report"}`)
	v := g.runEnd("caller", "brief", id)
	if v.Status != workflow.Completed || strings.Join(v.Path, ",") != "summ,write" {
		t.Fatalf("run = %s %q, steps %s", v.Status, v.Error, nodesOf(v.Steps))
	}
	if got := b.texts(); len(got) != 1 || got[0] != "Brief the Q3 report" {
		t.Fatalf("the agent got %q", got)
	}
	summ := v.Steps[0]
	if summ.Answer == nil || summ.Answer.Data["summary"] != "short: Brief the Q3 report" || summ.Answer.Message != "done" {
		t.Fatalf("summ's answer = %+v", summ.Answer)
	}
	if want := "Write up: short: Brief the Q3 report (3 points)"; !strings.HasPrefix(v.Steps[1].Input, want) {
		t.Fatalf("write's input = %q, want %q", v.Steps[1].Input, want)
	}
	// Governed as the caller's own A2A message, tied to the step.
	reqs := g.entries("message.request")
	if !slices.ContainsFunc(reqs, func(e audit.Entry) bool {
		return e.AgentID == "caller" && e.RequestID == summ.RequestID && summ.RequestID != ""
	}) {
		t.Fatalf("no message.request of caller with the step's request id %q: %+v", summ.RequestID, reqs)
	}
}

// TestWorkflowA2ANodeFails: a task that ends failed fails the step and the
// run with the agent's reason; a caller the A2A door refuses fails it with
// the door's refusal, and the agent never sees the message; an agent that
// does not answer fails it at the node's timeout.
func TestWorkflowA2ANodeFails(t *testing.T) {
	b := newBriefer(t)
	g := newA2ANodeGateway(t, b, false)
	v := g.runEnd("caller", "brief", g.startRun("caller", "brief", `{"doc": "fail"}`))
	if v.Status != workflow.Failed || len(v.Steps) != 1 || v.Steps[0].Status != "error" ||
		!strings.Contains(v.Steps[0].Error, "TASK_STATE_FAILED") || !strings.Contains(v.Steps[0].Error, "the source document is unreadable") {
		t.Fatalf("failed task: run %s %q, steps %+v", v.Status, v.Error, v.Steps)
	}
	before := len(b.texts())
	v = g.runEnd("outsider", "brief", g.startRun("outsider", "brief", `{"doc": "x"}`))
	if v.Status != workflow.Failed || !strings.Contains(v.Error, "-31403") {
		t.Fatalf("refused caller: run %s %q", v.Status, v.Error)
	}
	if len(b.texts()) != before {
		t.Fatal("the agent got a message the door refused")
	}
	// An agent that does not answer within the node's timeout fails it.
	start := time.Now()
	v = g.runEnd("caller", "quick", g.startRun("caller", "quick", `{"doc": "slow"}`))
	if v.Status != workflow.Failed || !strings.Contains(v.Error, "did not answer within 1s") || time.Since(start) > 8*time.Second {
		t.Fatalf("slow agent: run %s %q after %s", v.Status, v.Error, time.Since(start))
	}
}

// TestWorkflowA2ANodeInputRequired: a task that asks a question pauses the
// run for a person as a clarification does; the person's answer goes to
// the agent with the node's input, and the run completes.
func TestWorkflowA2ANodeInputRequired(t *testing.T) {
	b := newBriefer(t)
	g := newA2ANodeGateway(t, b, false)
	id := g.startRun("caller", "brief", `{"doc": "which report?"}`)
	var v workflow.View
	for deadline := time.Now().Add(10 * time.Second); v.Status != workflow.WaitingForHuman; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("run = %s %q", v.Status, v.Error)
		}
		v = g.runView("caller", "brief", id)
	}
	if v.EscalationID == "" || v.Steps[0].Answer == nil || v.Steps[0].Answer.Message != "Which quarter?" {
		t.Fatalf("paused run = %+v", v)
	}
	if status, body, _ := g.do(http.MethodPost, "/admin/escalations/"+v.EscalationID+"/decision", "tok-ops-lead",
		`{"decision":"approve","reviewer":"ops-lead","comment":"Q3"}`); status != http.StatusOK {
		t.Fatalf("decision: %d %s", status, body)
	}
	v = g.runEnd("caller", "brief", id)
	if v.Status != workflow.Completed || strings.Join(v.Path, ",") != "summ,summ,write" {
		t.Fatalf("resumed run = %s %q, steps %s", v.Status, v.Error, nodesOf(v.Steps))
	}
	if got := b.texts(); len(got) != 2 || !strings.Contains(got[1], "Q3") {
		t.Fatalf("the agent got %q", got)
	}
}

// runView reads a run of agent as it is now.
func (g *a2a) runView(agent, name, id string) workflow.View {
	g.t.Helper()
	_, body, _ := g.do(http.MethodGet, "/workflows/"+name+"/runs/"+id, "tok-"+agent, "")
	var v workflow.View
	_ = json.Unmarshal(body, &v)
	return v
}

// TestWorkflowA2ANodeDoorReview: with a2a.human_input, the agent's question
// goes to the A2A door's review; the step waits for the task, which the
// person's answer lets end, and the run completes without pausing.
func TestWorkflowA2ANodeDoorReview(t *testing.T) {
	b := newBriefer(t)
	g := newA2ANodeGateway(t, b, true)
	id := g.startRun("caller", "brief", `{"doc": "which report?"}`)
	var list struct {
		Escalations []struct {
			ID string `json:"request_id"`
		} `json:"escalations"`
	}
	for deadline := time.Now().Add(10 * time.Second); len(list.Escalations) == 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("no review was opened for the agent's question")
		}
		_, body, _ := g.do(http.MethodGet, "/admin/escalations", "tok-admin", "")
		_ = json.Unmarshal(body, &list)
	}
	if v := g.runView("caller", "brief", id); v.Status != workflow.InProgress {
		t.Fatalf("run = %s, want still in progress while the door's review waits", v.Status)
	}
	if status, body, _ := g.do(http.MethodPost, "/admin/escalations/"+list.Escalations[0].ID+"/decision", "tok-admin",
		`{"decision":"approve","reviewer":"ops","comment":"Q3"}`); status != http.StatusOK {
		t.Fatalf("decision: %d %s", status, body)
	}
	v := g.runEnd("caller", "brief", id)
	if v.Status != workflow.Completed || strings.Join(v.Path, ",") != "summ,write" || v.Steps[0].Answer.Data["summary"] != "short: Q3" {
		t.Fatalf("run = %s %q, path %v, steps %+v", v.Status, v.Error, v.Path, v.Steps)
	}
}
