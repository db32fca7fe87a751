package app

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/testredis"
	"github.com/sacpgw/gateway/workflow"
)

// flowAgents: every token is "tok-" + id. researcher and validator speak
// SACP; starter may start workflows, outsider may not.
const flowAgents = `agents:
  starter:
    type: orchestrator
  outsider:
    type: orchestrator
  researcher:
    type: researcher
    response_format: json_standard
    models: ["model-r"]
  validator:
    type: validator
    response_format: json_standard
    models: ["model-v"]
  plain:
    type: chat
    models: ["model-p"]
`

// scripted is an OpenAI-compatible provider whose SACP answers a test
// writes: answer gets the user message of the call and returns the SACP
// object (marshalled into the completion's content).
type scripted struct {
	srv   *httptest.Server
	mu    sync.Mutex
	calls []string // the user messages, in order
	// answer returns the SACP object for a user message.
	answer atomic.Pointer[func(user string) map[string]any]
	// block, when set, holds every call until it is closed.
	block atomic.Pointer[chan struct{}]
}

func newScripted(t testing.TB) *scripted {
	s := &scripted{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		user := ""
		for _, m := range req.Messages {
			if m.Role == "user" {
				user = m.Content
			}
		}
		s.mu.Lock()
		s.calls = append(s.calls, user)
		s.mu.Unlock()
		if ch := s.block.Load(); ch != nil {
			select {
			case <-*ch:
			case <-r.Context().Done():
				return
			}
		}
		obj := (*s.answer.Load())(user)
		content, _ := json.Marshal(obj)
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": string(content)}}},
			"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
		})
	}))
	t.Cleanup(s.srv.Close)
	s.script(func(string) map[string]any { return sacpAnswer("success", map[string]any{}, "ok") })
	return s
}

func (s *scripted) script(f func(user string) map[string]any) { s.answer.Store(&f) }

func (s *scripted) userMessages() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.calls...)
}

func sacpAnswer(status string, data map[string]any, message string) map[string]any {
	return map[string]any{"thought": "t", "status": status, "data": data, "message": message}
}

// flow is a gateway built by Build with a workflows.yaml, its provider
// scripted by the test.
type flow struct {
	*a2a
	up *scripted
	// stop shuts this replica down (once; also at cleanup).
	stop func()
}

type flowOpts struct {
	workflows string
	redisURL  string
	chain     string
	auditDir  string
	up        *scripted
	// policy is an extra Rego file put beside copies of the repository's.
	policy string
	// escalation is protocol.yaml's timeouts.escalation (default 1h).
	escalation string
}

func newFlow(t testing.TB, o flowOpts) *flow {
	t.Helper()
	dir := t.TempDir()
	if o.auditDir == "" {
		o.auditDir = filepath.Join(dir, "audit")
	}
	if o.chain == "" {
		o.chain = "flow"
	}
	if o.escalation == "" {
		o.escalation = "1h"
	}
	up := o.up
	if up == nil {
		up = newScripted(t)
	}
	var agents strings.Builder
	for _, line := range strings.Split(flowAgents, "\n") {
		agents.WriteString(line + "\n")
		if strings.HasPrefix(line, "  ") && !strings.HasPrefix(line, "   ") && strings.HasSuffix(line, ":") {
			id := strings.TrimSuffix(strings.TrimSpace(line), ":")
			agents.WriteString("    token_sha256: \"" + roster.HashTokenHex("tok-"+id) + "\"\n")
		}
	}
	state := ""
	if o.redisURL != "" {
		state = "state:\n  backend: redis\n" + redisYAML(o.redisURL) + "  timeout: 1s\n"
	}
	pdir := policyDir(a2aOpts{})
	if o.policy != "" {
		pdir = filepath.Join(dir, "rego")
		copyDir(t, policyDir(a2aOpts{}), pdir)
		if err := os.WriteFile(filepath.Join(pdir, "gateway", "workflow", "workflow.rego"), []byte(o.policy), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	gw := `listen: "127.0.0.1:0"
admin:
  token_sha256: "` + roster.HashTokenHex("tok-admin") + `"
  reviewers:
    - name: security-lead
      token_sha256: "` + roster.HashTokenHex("tok-reviewer") + `"
upstreams:
  - {name: scripted, type: openai, base_url: ` + up.srv.URL + `/v1, max_retries: 0, models: ["*"]}
policy:
  dir: ` + pdir + `
audit:
  dir: ` + o.auditDir + `
  chain: ` + o.chain + `
  fail_mode: closed
` + state
	files := map[string]string{
		config.GatewayFile:   gw,
		config.AgentsFile:    agents.String(),
		config.ProtocolFile:  "protocol:\n  limits:\n    max_retry_attempts: 2\n  timeouts:\n    escalation: " + o.escalation + "\n",
		config.WorkflowsFile: o.workflows,
	}
	cfg, a, auditLog := buildFromFiles(t, dir, files)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	srv := httptest.NewServer(a.server.Handler())
	var once sync.Once
	stop := func() {
		once.Do(func() {
			srv.Close()
			cancel()
			<-done
			a.Close()
			auditLog.Close()
		})
	}
	t.Cleanup(stop)
	return &flow{a2a: &a2a{t: t, srv: srv, app: a, auditDir: o.auditDir, dir: dir, cfg: cfg}, up: up, stop: stop}
}

func copyDir(t testing.TB, from, to string) {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// start starts a run as agent and waits for it to end or pause.
func (f *flow) start(agent, name, input string) (int, workflow.View, []byte) {
	f.t.Helper()
	status, body, _ := f.do(http.MethodPost, "/workflows/"+name+"/runs?wait=10s", "tok-"+agent, `{"input": `+input+`}`)
	var v workflow.View
	_ = json.Unmarshal(body, &v)
	return status, v, body
}

func (f *flow) run(agent, name, id string) (int, workflow.View) {
	f.t.Helper()
	status, body, _ := f.do(http.MethodGet, "/workflows/"+name+"/runs/"+id, "tok-"+agent, "")
	var v workflow.View
	_ = json.Unmarshal(body, &v)
	return status, v
}

// waitStatus polls the run until it has status want.
func (f *flow) waitStatus(name, id string, want workflow.Status) workflow.View {
	f.t.Helper()
	var v workflow.View
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		_, v = f.run("starter", name, id)
		if v.Status == want {
			return v
		}
	}
	f.t.Fatalf("run %s: status %s, want %s (error %q)", id, v.Status, want, v.Error)
	return v
}

func nodesOf(steps []workflow.Step) string {
	var out []string
	for _, s := range steps {
		out = append(out, s.Node+":"+s.Status)
	}
	return strings.Join(out, " ")
}

const chainFlow = `workflows:
  find-email:
    callers: [starter]
    start: research
    nodes:
      research:
        agent: researcher
        input: "Find the e-mail of the CEO of {{input.company}}."
        owns: [vendor]
      validate:
        agent: validator
        input: "Validate: {{research.data.guesses}} for {{research.data.ceo}}"
      high:
        agent: validator
        input: "High confidence: {{validate.message}}"
      fallback:
        agent: validator
        input: "Fallback after {{research.message}}"
    edges:
      - {from: research, to: validate, when: 'response.status == "success"'}
      - {from: research, to: fallback, when: 'response.status == "failure"'}
      - {from: validate, to: high, when: 'response.data.score > 0.8'}
      - {from: validate, to: end}
      - {from: high, to: end}
      - {from: fallback, to: failed}
`

// TestWorkflowEdgesAndMapping: each edge kind (condition on status, on a
// number in data, no condition, to end, to failed) and the data mapping
// into the next node's input, through real governed calls.
func TestWorkflowEdgesAndMapping(t *testing.T) {
	f := newFlow(t, flowOpts{workflows: chainFlow})
	var score atomic.Value
	var researchStatus atomic.Value
	f.up.script(func(user string) map[string]any {
		switch {
		case strings.HasPrefix(user, "Find the e-mail"):
			return sacpAnswer(researchStatus.Load().(string), map[string]any{"ceo": "John Doe", "guesses": []any{"john.doe", "jdoe"},
				"entities": map[string]any{"vendor": map[string]any{"name": "Acme"}}}, "found John Doe")
		case strings.HasPrefix(user, "Validate:"):
			return sacpAnswer("success", map[string]any{"score": score.Load().(float64), "valid": "jdoe@acme.com"}, "jdoe@acme.com is valid")
		default:
			return sacpAnswer("success", map[string]any{}, "done: "+user)
		}
	})
	cases := []struct {
		name     string
		research string
		score    float64
		want     workflow.Status
		path     string
	}{
		{"success, low score: unconditional edge to end", "success", 0.5, workflow.Completed, "research:success validate:success"},
		{"success, high score: conditional edge", "success", 0.9, workflow.Completed, "research:success validate:success high:success"},
		{"failure: to the fallback, then failed", "failure", 0, workflow.Failed, "research:failure fallback:success"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			researchStatus.Store(c.research)
			score.Store(c.score)
			status, v, body := f.start("starter", "find-email", `{"company": "Acme Corp"}`)
			if status != http.StatusCreated {
				t.Fatalf("start: %d %s", status, body)
			}
			if v.Status != c.want || nodesOf(v.Steps) != c.path {
				t.Fatalf("run: status %s path %q, want %s %q (error %q)", v.Status, nodesOf(v.Steps), c.want, c.path, v.Error)
			}
			if c.research == "success" {
				in := v.Steps[1].Input
				if in != `Validate: ["john.doe","jdoe"] for John Doe` {
					t.Errorf("validate's input %q: the list must be inserted as JSON and the string as is", in)
				}
				if ent, _ := v.Context.Entities["vendor"].(map[string]any); ent["name"] != "Acme" {
					t.Errorf("context entities %v: research owns vendor and wrote it", v.Context.Entities)
				}
				if len(v.Context.History) != len(v.Steps) {
					t.Errorf("history %v: one entry per answered step", v.Context.History)
				}
			}
			if c.score > 0.8 {
				// The answers a node gets are the governed ones: redacted.
				if in := v.Steps[2].Input; in != "High confidence: [REDACTED:email] is valid" {
					t.Errorf("high's input %q: the e-mail in validate's message must arrive redacted", in)
				}
			}
			if c.research == "failure" && !strings.Contains(v.Error, "failed") {
				t.Errorf("error %q should name the edge to failed", v.Error)
			}
		})
	}
	// The calls were governed: each step has its llm.response entry, linked to the run.
	responses := f.entries(audit.KindLLMResponse)
	linked := 0
	for _, e := range responses {
		if sum := summaryOf(e); sum["run_id"] != nil && sum["node"] != nil {
			linked++
		}
	}
	if linked < 7 {
		t.Errorf("%d llm.response entries carry run_id and node, want the 7 steps'", linked)
	}
	for _, kind := range []string{workflow.KindStart, workflow.KindStep, workflow.KindEnd} {
		if len(f.entries(kind)) == 0 {
			t.Errorf("no %s entry", kind)
		}
	}
}

// TestWorkflowMissingPathFailsTheStep: a template path that does not
// resolve fails the step, naming the path, and calls nobody.
func TestWorkflowMissingPathFailsTheStep(t *testing.T) {
	f := newFlow(t, flowOpts{workflows: chainFlow})
	f.up.script(func(user string) map[string]any {
		return sacpAnswer("success", map[string]any{"ceo": "John Doe"}, "found") // no guesses
	})
	_, v, body := f.start("starter", "find-email", `{"company": "Acme"}`)
	if v.Status != workflow.Failed {
		t.Fatalf("run %s: want FAILED: %s", v.Status, body)
	}
	if !strings.Contains(v.Error, "research.data.guesses") {
		t.Errorf("error %q must name the path", v.Error)
	}
	if got := len(f.up.userMessages()); got != 1 {
		t.Errorf("%d calls: the validate step must not call its agent with a hole in its input", got)
	}
	// The same for a missing input field.
	_, v, _ = f.start("starter", "find-email", `{"name": "Acme"}`)
	if v.Status != workflow.Failed || !strings.Contains(v.Error, "input.company") {
		t.Errorf("run %s %q: want FAILED naming input.company", v.Status, v.Error)
	}
}

const negotiationFlow = `workflows:
  negotiate:
    callers: [starter]
    start: research
    max_negotiation_rounds: 2
    nodes:
      research:
        agent: researcher
        input: "Research {{input.topic}}"
      validate:
        agent: validator
        input: "Check {{research.message}}"
    edges:
      - {from: research, to: validate}
      - {from: validate, to: end, when: 'response.status == "success"'}
`

// TestWorkflowNegotiation: a retry_with_instruction answer sends the run
// back to the previous node with the instruction, at most
// max_negotiation_rounds times; then the run fails.
func TestWorkflowNegotiation(t *testing.T) {
	f := newFlow(t, flowOpts{workflows: negotiationFlow})
	var accept atomic.Int32 // the validator accepts at this research attempt (0: never)
	var research atomic.Int32
	f.up.script(func(user string) map[string]any {
		if strings.HasPrefix(user, "Research") {
			n := research.Add(1)
			return sacpAnswer("success", map[string]any{}, fmt.Sprintf("draft %d", n))
		}
		if a := accept.Load(); a != 0 && strings.Contains(user, fmt.Sprintf("draft %d", a)) {
			return sacpAnswer("success", map[string]any{}, "accepted")
		}
		return sacpAnswer("retry_with_instruction", map[string]any{"instruction": "use the official domain"}, "not usable")
	})

	accept.Store(2)
	_, v, body := f.start("starter", "negotiate", `{"topic": "acme"}`)
	if v.Status != workflow.Completed {
		t.Fatalf("run %s (%s): want COMPLETED after one negotiation: %s", v.Status, v.Error, body)
	}
	if got := nodesOf(v.Steps); got != "research:success validate:retry_with_instruction research:success validate:success" {
		t.Errorf("path %q", got)
	}
	if !strings.Contains(v.Steps[2].Input, "use the official domain") {
		t.Errorf("research's second input %q lacks the instruction", v.Steps[2].Input)
	}
	if v.Steps[1].Next != "research" {
		t.Errorf("the retry step's next is %q, want research", v.Steps[1].Next)
	}

	// Never accepted: two rounds, then the run fails (bounded).
	research.Store(0)
	accept.Store(0)
	_, v, _ = f.start("starter", "negotiate", `{"topic": "acme"}`)
	if v.Status != workflow.Failed || !strings.Contains(v.Error, "negotiation") {
		t.Fatalf("run %s %q: want FAILED after the negotiation rounds", v.Status, v.Error)
	}
	if got := strings.Count(nodesOf(v.Steps), "research:"); got != 3 {
		t.Errorf("research ran %d times, want 3 (the first and two rounds): %s", got, nodesOf(v.Steps))
	}
}

const pauseFlow = `workflows:
  ask:
    callers: [starter]
    start: research
    nodes:
      research:
        agent: researcher
        input: "Research {{input.topic}}"
    edges:
      - {from: research, to: end, when: 'response.status == "success"'}
`

// TestWorkflowHumanPause: clarification_needed suspends the run and opens
// an escalation; the reviewer's answer is the node's next input and the
// run resumes; a rejection fails the run.
func TestWorkflowHumanPause(t *testing.T) {
	f := newFlow(t, flowOpts{workflows: pauseFlow})
	f.up.script(func(user string) map[string]any {
		if strings.Contains(user, "answered your question") {
			return sacpAnswer("success", map[string]any{}, "thanks, using "+user[strings.LastIndex(user, ":")+2:])
		}
		return sacpAnswer("clarification_needed", map[string]any{}, "Which Acme: Acme Corp or Acme Ltd?")
	})
	_, v, body := f.start("starter", "ask", `{"topic": "acme"}`)
	if v.Status != workflow.WaitingForHuman || v.EscalationID == "" {
		t.Fatalf("run %s: want WAITING_FOR_HUMAN with an escalation: %s", v.Status, body)
	}
	if len(f.entries(workflow.KindSuspend)) != 1 {
		t.Error("no workflow.suspend entry")
	}
	// The escalation is listed for reviewers, with the question.
	status, list, _ := f.do(http.MethodGet, "/admin/escalations", "tok-reviewer", "")
	if status != http.StatusOK || !strings.Contains(string(list), v.EscalationID) || !strings.Contains(string(list), "Which Acme") {
		t.Fatalf("escalations %d: %s", status, list)
	}
	// The review's copy of the Global Context says what the API says.
	if !strings.Contains(string(list), `\"status\":\"WAITING_FOR_HUMAN\"`) {
		t.Errorf("the escalation's context does not say WAITING_FOR_HUMAN: %s", list)
	}
	status, out, _ := f.do(http.MethodPost, "/admin/escalations/"+v.EscalationID+"/decision", "tok-reviewer",
		`{"decision": "approve", "reviewer": "security-lead", "comment": "Acme Corp"}`)
	if status != http.StatusOK {
		t.Fatalf("decision: %d %s", status, out)
	}
	v = f.waitStatus("ask", v.ID, workflow.Completed)
	if got := nodesOf(v.Steps); got != "research:clarification_needed research:success" {
		t.Errorf("path %q", got)
	}
	if !strings.HasSuffix(v.Steps[1].Input, "Acme Corp") || v.Steps[1].Attempt != 2 {
		t.Errorf("second step input %q attempt %d: the reviewer's answer is the next input", v.Steps[1].Input, v.Steps[1].Attempt)
	}
	if len(f.entries(workflow.KindResume)) != 1 {
		t.Error("no workflow.resume entry")
	}

	// Rejected: the run fails with the reviewer's reason.
	_, v, _ = f.start("starter", "ask", `{"topic": "acme"}`)
	status, out, _ = f.do(http.MethodPost, "/admin/escalations/"+v.EscalationID+"/decision", "tok-reviewer",
		`{"decision": "reject", "reviewer": "security-lead", "comment": "out of scope"}`)
	if status != http.StatusOK {
		t.Fatalf("decision: %d %s", status, out)
	}
	v = f.waitStatus("ask", v.ID, workflow.Failed)
	if !strings.Contains(v.Error, "out of scope") {
		t.Errorf("error %q should carry the reviewer's comment", v.Error)
	}
}

// TestWorkflowPauseExpires: a review nobody answers in time fails the run.
func TestWorkflowPauseExpires(t *testing.T) {
	f := newFlow(t, flowOpts{workflows: pauseFlow, escalation: "50ms"})
	f.up.script(func(string) map[string]any {
		return sacpAnswer("WAITING_FOR_HUMAN", map[string]any{}, "I need a person to pick the vendor")
	})
	_, v, body := f.start("starter", "ask", `{"topic": "acme"}`)
	if v.Status != workflow.WaitingForHuman {
		t.Fatalf("run %s: %s", v.Status, body)
	}
	time.Sleep(100 * time.Millisecond)
	if n := f.app.approval.ExpireEscalations(context.Background()); n != 1 {
		t.Fatalf("%d escalations expired, want 1", n)
	}
	v = f.waitStatus("ask", v.ID, workflow.Failed)
	if !strings.Contains(v.Error, "expired") {
		t.Errorf("error %q", v.Error)
	}
	if ends := f.entries(workflow.KindEnd); len(ends) != 1 || !strings.Contains(string(ends[0].Summary), `"FAILED"`) {
		t.Errorf("workflow.end entries: %v", ends)
	}
}

const ownerFlow = `workflows:
  owners:
    callers: [starter]
    start: research
    nodes:
      research:
        agent: researcher
        input: "Research {{input.topic}}"
        owns: [vendor]
      validate:
        agent: validator
        input: "Validate {{research.message}}"
        owns: [verdict]
    edges:
      - {from: research, to: validate}
`

// TestWorkflowOwnerOnlyWrites: a node writing an entity it does not own
// fails the step; the entity keeps the owner's value.
func TestWorkflowOwnerOnlyWrites(t *testing.T) {
	f := newFlow(t, flowOpts{workflows: ownerFlow})
	f.up.script(func(user string) map[string]any {
		if strings.HasPrefix(user, "Research") {
			return sacpAnswer("success", map[string]any{"entities": map[string]any{"vendor": "acme"}}, "researched")
		}
		return sacpAnswer("success", map[string]any{"entities": map[string]any{"vendor": "evil", "verdict": "ok"}}, "validated")
	})
	_, v, body := f.start("starter", "owners", `{"topic": "acme"}`)
	if v.Status != workflow.Failed {
		t.Fatalf("run %s: want FAILED: %s", v.Status, body)
	}
	if !strings.Contains(v.Error, `"vendor"`) || !strings.Contains(v.Error, "does not own") {
		t.Errorf("error %q", v.Error)
	}
	if v.Context.Entities["vendor"] != "acme" || v.Context.Entities["verdict"] != nil {
		t.Errorf("entities %v: the refused step must write nothing", v.Context.Entities)
	}
}

// TestWorkflowCancel: a cancel stops the call in flight and ends the run;
// a second cancel is a 409.
func TestWorkflowCancel(t *testing.T) {
	f := newFlow(t, flowOpts{workflows: pauseFlow})
	hold := make(chan struct{})
	f.up.block.Store(&hold)
	defer close(hold)
	status, body, _ := f.do(http.MethodPost, "/workflows/ask/runs", "tok-starter", `{"input": {"topic": "x"}}`)
	if status != http.StatusCreated {
		t.Fatalf("start: %d %s", status, body)
	}
	var started struct {
		RunID  string `json:"run_id"`
		Status string `json:"status"`
	}
	_ = json.Unmarshal(body, &started)
	if started.Status != string(workflow.InProgress) {
		t.Fatalf("start answered %s", body)
	}
	for deadline := time.Now().Add(5 * time.Second); len(f.up.userMessages()) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("the step never called its agent")
		}
	}
	// Another agent cannot see or cancel it.
	if status, _, _ := f.do(http.MethodPost, "/workflows/ask/runs/"+started.RunID+"/cancel", "tok-outsider", ""); status != http.StatusNotFound {
		t.Errorf("outsider's cancel: %d, want 404", status)
	}
	if status, _ := f.run("outsider", "ask", started.RunID); status != http.StatusNotFound {
		t.Errorf("outsider's read: %d, want 404", status)
	}
	status, body, _ = f.do(http.MethodPost, "/workflows/ask/runs/"+started.RunID+"/cancel", "tok-starter", "")
	if status != http.StatusOK || !strings.Contains(string(body), `"CANCELLED"`) {
		t.Fatalf("cancel: %d %s", status, body)
	}
	status, body, _ = f.do(http.MethodPost, "/workflows/ask/runs/"+started.RunID+"/cancel", "tok-starter", "")
	if status != http.StatusConflict || !strings.Contains(string(body), "run_ended") {
		t.Errorf("second cancel: %d %s", status, body)
	}
	time.Sleep(100 * time.Millisecond)
	if _, v := f.run("starter", "ask", started.RunID); v.Status != workflow.Cancelled || len(v.Steps) != 0 {
		t.Errorf("run %s with %d steps: the cancelled call's answer must not be recorded", v.Status, len(v.Steps))
	}
}

// TestWorkflowStartIsDecidedByPolicy: callers is the default; a Rego
// policy decides; a bad body is a 400 and an unknown workflow a 404.
func TestWorkflowStartIsDecidedByPolicy(t *testing.T) {
	f := newFlow(t, flowOpts{workflows: pauseFlow, policy: `package gateway.workflow

default allow := false

allow if {
	input.agent.id in input.workflow.callers
	input.input.topic != "forbidden"
}
`})
	cases := []struct {
		name, agent, workflow, body string
		status                      int
		code                        string
	}{
		{"a caller", "starter", "ask", `{"input": {"topic": "acme"}}`, http.StatusCreated, ""},
		{"not a caller", "outsider", "ask", `{"input": {"topic": "acme"}}`, http.StatusForbidden, "policy_denied"},
		{"the policy reads the input", "starter", "ask", `{"input": {"topic": "forbidden"}}`, http.StatusForbidden, "policy_denied"},
		{"unknown workflow", "starter", "nope", `{"input": {}}`, http.StatusNotFound, "workflow_not_found"},
		{"repeated name", "starter", "ask", `{"input": {"topic": "a", "topic": "forbidden"}}`, http.StatusBadRequest, "invalid_request"},
		{"unknown member", "starter", "ask", `{"input": {}, "run_as": "x"}`, http.StatusBadRequest, "invalid_request"},
		{"input not an object", "starter", "ask", `{"input": [1]}`, http.StatusBadRequest, "invalid_request"},
		{"no token", "", "ask", `{"input": {}}`, http.StatusUnauthorized, "invalid_api_key"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			token := ""
			if c.agent != "" {
				token = "tok-" + c.agent
			}
			status, body, _ := f.do(http.MethodPost, "/workflows/"+c.workflow+"/runs", token, c.body)
			if status != c.status {
				t.Fatalf("%d %s, want %d", status, body, c.status)
			}
			if c.code != "" && !strings.Contains(string(body), `"code":"`+c.code+`"`) {
				t.Errorf("body %s, want code %s", body, c.code)
			}
		})
	}
	starts := f.entries(workflow.KindStart)
	refused := 0
	for _, e := range starts {
		if summaryOf(e)["allowed"] == false {
			refused++
		}
	}
	if refused != 2 {
		t.Errorf("%d refused starts on record, want 2", refused)
	}
}

// TestWorkflowDescribe: the definition routes and the graph of a run.
func TestWorkflowDescribe(t *testing.T) {
	f := newFlow(t, flowOpts{workflows: chainFlow})
	status, body, _ := f.do(http.MethodGet, "/workflows", "tok-starter", "")
	if status != http.StatusOK || !strings.Contains(string(body), `"find-email"`) {
		t.Fatalf("list: %d %s", status, body)
	}
	status, body, _ = f.do(http.MethodGet, "/workflows/find-email", "tok-starter", "")
	if status != http.StatusOK || !strings.Contains(string(body), "flowchart") || !strings.Contains(string(body), `"start":"research"`) {
		t.Fatalf("describe: %d %s", status, body)
	}
	f.up.script(func(user string) map[string]any {
		return sacpAnswer("failure", map[string]any{}, "no")
	})
	_, v, _ := f.start("starter", "find-email", `{"company": "x"}`)
	resp, err := http.DefaultClient.Do(mustRequest(t, http.MethodGet, f.srv.URL+"/workflows/find-email/runs/"+v.ID+"/graph.svg", "tok-starter"))
	if err != nil {
		t.Fatal(err)
	}
	svg, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "image/svg+xml" || !strings.Contains(string(svg), "<svg") {
		t.Fatalf("graph: %d %s", resp.StatusCode, svg)
	}
	if strings.Contains(string(svg), "<script") {
		t.Error("the graph must carry no script")
	}
}

func summaryOf(e audit.Entry) map[string]any {
	var m map[string]any
	_ = json.Unmarshal(e.Summary, &m)
	return m
}

func mustRequest(t testing.TB, method, url, token string) *http.Request {
	t.Helper()
	req, err := http.NewRequest(method, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	return req
}

// TestWorkflowTakenOverByAnotherReplica: two gateways on one real
// redis-server; the replica running a step stops, and the other one takes
// the run over, repeats the step that was in flight and finishes the run.
func TestWorkflowTakenOverByAnotherReplica(t *testing.T) {
	forEachRedis(t, testWorkflowTakenOver)
}

func testWorkflowTakenOver(t *testing.T, target string) {
	up := newScripted(t)
	dir := t.TempDir()
	a := newFlow(t, flowOpts{workflows: negotiationFlow, redisURL: target, chain: "replica-a", auditDir: dir, up: up})
	b := newFlow(t, flowOpts{workflows: negotiationFlow, redisURL: target, chain: "replica-b", auditDir: dir, up: up})
	hold := make(chan struct{})
	up.block.Store(&hold)
	up.script(func(user string) map[string]any { return sacpAnswer("success", map[string]any{}, "ok: "+user) })

	status, body, _ := a.do(http.MethodPost, "/workflows/negotiate/runs", "tok-starter", `{"input": {"topic": "acme"}}`)
	if status != http.StatusCreated {
		t.Fatalf("start on A: %d %s", status, body)
	}
	var started struct {
		RunID string `json:"run_id"`
	}
	_ = json.Unmarshal(body, &started)
	for deadline := time.Now().Add(5 * time.Second); len(up.userMessages()) == 0; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("A never called the first agent")
		}
	}
	// B sees the run A advances.
	if status, v := b.run("starter", "negotiate", started.RunID); status != http.StatusOK || v.Status != workflow.InProgress {
		t.Fatalf("B reads the run: %d %s", status, v.Status)
	}
	a.stop() // A goes away with the call in flight
	up.block.Store(nil)
	close(hold)
	v := b.waitStatus("negotiate", started.RunID, workflow.Completed)
	if got := nodesOf(v.Steps); got != "research:success validate:success" {
		t.Errorf("path %q: the interrupted step runs again on B, once", got)
	}
	if calls := up.userMessages(); len(calls) != 3 {
		t.Errorf("%d calls, want 3 (the interrupted one, its repeat, the next node): %q", len(calls), calls)
	}
}

const blobFlow = `workflows:
  scan:
    callers: [starter]
    start: capture
    nodes:
      capture:
        agent: researcher
        input: "Capture {{input.doc}}"
      read:
        agent: validator
        input: "Read {{capture.data.image}}"
      look:
        agent: validator
        input: "Look at {{blob capture.data.image}}"
    edges:
      - {from: capture, to: read}
      - {from: read, to: look}
`

// TestWorkflowBlobRoundTrip: a large base64 value in an answer is stored
// once and replaced by a reference; the next node gets the reference, a
// node that asks with {{blob}} gets the bytes; GET /blobs/{sha} serves them
// to the run's agents and to nobody else.
func TestWorkflowBlobRoundTrip(t *testing.T) {
	f := newFlow(t, flowOpts{workflows: blobFlow})
	raw := make([]byte, 100<<10)
	for i := range raw {
		raw[i] = byte(i * 7)
	}
	encoded := "data:image/png;base64," + base64.StdEncoding.EncodeToString(raw)
	f.up.script(func(user string) map[string]any {
		if strings.HasPrefix(user, "Capture") {
			return sacpAnswer("success", map[string]any{"image": encoded, "caption": "a small string stays inline"}, "captured")
		}
		return sacpAnswer("success", map[string]any{}, fmt.Sprintf("got %d bytes of input", len(user)))
	})
	_, v, body := f.start("starter", "scan", `{"doc": "invoice"}`)
	if v.Status != workflow.Completed {
		t.Fatalf("run %s: %s", v.Status, body)
	}
	sum := sha256.Sum256(raw)
	ref := workflow.RefPrefix + hex.EncodeToString(sum[:])
	img, _ := v.Steps[0].Answer.Data["image"].(map[string]any)
	if img["$ref"] != ref || img["media_type"] != "image/png" || img["size"] != float64(len(raw)) {
		t.Fatalf("capture's image %v: want a reference %s", img, ref)
	}
	if v.Steps[0].Answer.Data["caption"] != "a small string stays inline" {
		t.Errorf("caption %v", v.Steps[0].Answer.Data["caption"])
	}
	if first, _ := json.Marshal(v.Steps[:2]); len(first) > 8<<10 {
		t.Errorf("the first two steps are %d bytes: the blob must not be in them", len(first))
	}
	if !strings.Contains(v.Steps[1].Input, ref) || strings.Contains(v.Steps[1].Input, "base64,") {
		t.Errorf("read's input carries the reference, not the bytes: %.200s", v.Steps[1].Input)
	}
	if !strings.Contains(v.Steps[2].Input, encoded) {
		t.Errorf("look's input must carry the bytes ({{blob}}): %.200s", v.Steps[2].Input)
	}
	if len(v.Context.Artifacts) != 1 || v.Context.Artifacts[0].URL != ref {
		t.Errorf("artifacts %v", v.Context.Artifacts)
	}
	sha := hex.EncodeToString(sum[:])
	for _, c := range []struct {
		agent  string
		status int
	}{{"starter", 200}, {"researcher", 200}, {"validator", 200}, {"outsider", 404}, {"plain", 404}} {
		resp, err := http.DefaultClient.Do(mustRequest(t, http.MethodGet, f.srv.URL+"/blobs/"+sha, "tok-"+c.agent))
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != c.status {
			t.Errorf("%s reads the blob: %d, want %d", c.agent, resp.StatusCode, c.status)
			continue
		}
		if c.status == 200 && (!bytes.Equal(got, raw) || resp.Header.Get("Content-Type") != "image/png" || resp.Header.Get("Content-Disposition") != "attachment") {
			t.Errorf("%s got %d bytes, type %q", c.agent, len(got), resp.Header.Get("Content-Type"))
		}
	}
	if status, _, _ := f.do(http.MethodGet, "/blobs/not-a-sha", "tok-starter", ""); status != http.StatusNotFound {
		t.Errorf("a malformed id: %d", status)
	}
}

// TestWorkflowsHotReload: an edited workflows.yaml takes effect without a
// restart; a broken one is refused and the last good definitions serve.
func TestWorkflowsHotReload(t *testing.T) {
	f := newFlow(t, flowOpts{workflows: pauseFlow})
	if status, _, _ := f.do(http.MethodGet, "/workflows/owners", "tok-starter", ""); status != http.StatusNotFound {
		t.Fatalf("owners before the reload: %d", status)
	}
	path := filepath.Join(f.dir, config.WorkflowsFile)
	if err := os.WriteFile(path, []byte(ownerFlow), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := f.app.Reload(f.dir, f.cfg)
	if cfg == f.cfg {
		t.Fatal("the reload was refused")
	}
	if status, _, _ := f.do(http.MethodGet, "/workflows/owners", "tok-starter", ""); status != http.StatusOK {
		t.Errorf("owners after the reload: %d", status)
	}
	if status, _, _ := f.do(http.MethodGet, "/workflows/ask", "tok-starter", ""); status != http.StatusNotFound {
		t.Errorf("ask is gone from the file, still served: %d", status)
	}
	// A condition that does not compile: refused as a whole.
	if err := os.WriteFile(path, []byte(strings.Replace(ownerFlow, "- {from: research, to: validate}", "- {from: research, to: validate, when: 'response.status =='}", 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := f.app.Reload(f.dir, cfg); got != cfg {
		t.Fatal("a broken workflows.yaml was applied")
	}
	if status, _, _ := f.do(http.MethodGet, "/workflows/owners", "tok-starter", ""); status != http.StatusOK {
		t.Errorf("the last good definitions must keep serving: %d", status)
	}
}

// TestWorkflowSignedURLs: a signed URL in a step's data passes to the next
// agents only when Rego allows its host; by default none does, and plain
// http is refused; the refused URL is in no error or answer on record.
func TestWorkflowSignedURLs(t *testing.T) {
	policy := `package gateway.workflow

default allow := false

allow if input.agent.id in input.workflow.callers

default signed_url_allowed := false

signed_url_allowed if input.url.host == "bucket.example.com"
`
	const secret = "X-Amz-Signature=c2VjcmV0"
	cases := []struct {
		name, policy, url string
		want              workflow.Status
	}{
		{"the shipped policy refuses every host", "", "https://bucket.example.com/a.pdf?" + secret, workflow.Failed},
		{"an allowed host passes", policy, "https://bucket.example.com/a.pdf?" + secret, workflow.Completed},
		{"another host is refused", policy, "https://evil.example.net/a.pdf?" + secret, workflow.Failed},
		{"plain http is refused", policy, "http://bucket.example.com/a.pdf?" + secret, workflow.Failed},
		{"an unsigned URL is ordinary data", "", "https://www.example.org/about", workflow.Completed},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := newFlow(t, flowOpts{workflows: ownerFlow, policy: c.policy})
			f.up.script(func(user string) map[string]any {
				return sacpAnswer("success", map[string]any{"doc": map[string]any{"url": c.url}}, "here")
			})
			_, v, body := f.start("starter", "owners", `{"topic": "x"}`)
			if v.Status != c.want {
				t.Fatalf("run %s (%s), want %s", v.Status, v.Error, c.want)
			}
			if c.want == workflow.Failed && strings.Contains(string(body), "c2VjcmV0") {
				t.Errorf("the refused URL's signature is on record: %s", body)
			}
		})
	}
}

const loopFlow = `workflows:
  loop:
    callers: [starter]
    start: poll
    max_steps: 3
    nodes:
      poll:
        agent: researcher
        input: "Poll {{input.topic}}"
        timeout: 1s
    edges:
      - {from: poll, to: end, when: 'response.data.done == true'}
      - {from: poll, to: poll}
`

// TestWorkflowBounds: a cycle runs until max_steps, then the run fails;
// a node's timeout fails the step whose agent does not answer in time.
func TestWorkflowBounds(t *testing.T) {
	f := newFlow(t, flowOpts{workflows: loopFlow})
	f.up.script(func(string) map[string]any { return sacpAnswer("success", map[string]any{"done": false}, "not yet") })
	_, v, body := f.start("starter", "loop", `{"topic": "x"}`)
	if v.Status != workflow.Failed || !strings.Contains(v.Error, "max_steps (3)") || len(v.Steps) != 3 {
		t.Fatalf("run %s %q with %d steps: want FAILED at max_steps after 3: %s", v.Status, v.Error, len(v.Steps), body)
	}
	if v.Steps[2].Attempt != 3 {
		t.Errorf("third visit's attempt %d", v.Steps[2].Attempt)
	}

	hold := make(chan struct{})
	defer close(hold)
	f.up.block.Store(&hold)
	began := time.Now()
	_, v, _ = f.start("starter", "loop", `{"topic": "x"}`)
	if v.Status != workflow.Failed || !strings.Contains(v.Error, "did not answer within 1s") {
		t.Fatalf("run %s %q: want FAILED on the node's timeout", v.Status, v.Error)
	}
	if d := time.Since(began); d > 5*time.Second {
		t.Errorf("the step took %s, its timeout is 1s", d)
	}
}

// TestWorkflowSignedURLsInEveryString: a signed URL to a host the policy
// does not allow fails the step wherever the answer carries it (inside a
// sentence of message, thought or next_step_hint, deep in data, written
// scheme-relative), so the next node is never given it; the allowed host
// passes inside prose too.
func TestWorkflowSignedURLsInEveryString(t *testing.T) {
	policy := `package gateway.workflow

default allow := false

allow if input.agent.id in input.workflow.callers

default signed_url_allowed := false

signed_url_allowed if input.url.host == "bucket.example.com"
`
	const evil = "https://evil.example.net/a.pdf?X-Amz-Signature=c2VjcmV0"
	answer := func(field, value string) map[string]any {
		a := map[string]any{"thought": "t", "status": "success", "data": map[string]any{}, "message": "researched"}
		switch field {
		case "data":
			a["data"] = map[string]any{"sources": []any{map[string]any{"note": value}}}
		default:
			a[field] = value
		}
		return a
	}
	cases := []struct {
		name, field, value string
		want               workflow.Status
	}{
		{"inside a sentence in message", "message", "The report is at " + evil + ", as asked.", workflow.Failed},
		{"inside a sentence in thought", "thought", "I found it (" + evil + ") quickly", workflow.Failed},
		{"inside a sentence in next_step_hint", "next_step_hint", "Download " + evil + " next", workflow.Failed},
		{"nested data", "data", "see " + evil, workflow.Failed},
		{"scheme-relative", "message", "The report is at //evil.example.net/a.pdf?X-Amz-Signature=c2VjcmV0 now", workflow.Failed},
		{"scheme-relative to an allowed host is not https", "message", "at //bucket.example.com/a.pdf?X-Amz-Signature=c2VjcmV0", workflow.Failed},
		{"an allowed host inside prose", "message", "The report is at https://bucket.example.com/a.pdf?X-Amz-Signature=c2VjcmV0.", workflow.Completed},
	}
	f := newFlow(t, flowOpts{workflows: ownerFlow, policy: policy})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			before := len(f.up.userMessages())
			f.up.script(func(user string) map[string]any {
				if strings.HasPrefix(user, "Research") {
					return answer(c.field, c.value)
				}
				return sacpAnswer("success", map[string]any{}, "validated")
			})
			_, v, body := f.start("starter", "owners", `{"topic": "x"}`)
			if v.Status != c.want {
				t.Fatalf("run %s (%s), want %s: %s", v.Status, v.Error, c.want, body)
			}
			calls := f.up.userMessages()[before:]
			if c.want == workflow.Failed {
				if len(calls) != 1 {
					t.Errorf("%d calls, want only the research node's: %q", len(calls), calls)
				}
				if !strings.Contains(v.Error, "signed URL") || strings.Contains(string(body), "c2VjcmV0") {
					t.Errorf("error %q; the refused URL's signature must not be on record: %s", v.Error, body)
				}
			}
		})
	}
}

// loopForever is a cycle allowed 1,000 steps, under a caller's step_limit
// of 5 an hour.
const loopForever = `step_limit: 5/hour
workflows:
  loop:
    callers: [starter]
    start: poll
    max_steps: 1000
    nodes:
      poll:
        agent: researcher
        input: "Poll {{input.topic}}"
    edges:
      - {from: poll, to: end, when: 'response.data.done == true'}
      - {from: poll, to: poll}
`

// TestWorkflowStepsAreChargedToTheCaller: one start of a workflow that may
// take 1,000 steps makes only as many provider calls as the caller's
// step_limit allows; the run then fails with a clear error on record, and
// a start while the limit is spent is a 429 in the API's error shape. With
// Redis the limit is shared: a start on another replica is refused too.
func TestWorkflowStepsAreChargedToTheCaller(t *testing.T) {
	for _, backend := range []string{"memory", "redis"} {
		t.Run(backend, func(t *testing.T) {
			o := flowOpts{workflows: loopForever, up: newScripted(t), auditDir: t.TempDir()}
			if backend == "redis" {
				o.redisURL = testredis.Start(t).URL()
			}
			a := newFlow(t, o)
			other := a
			if backend == "redis" {
				o.chain = "replica-b"
				other = newFlow(t, o)
			}
			a.up.script(func(string) map[string]any { return sacpAnswer("success", map[string]any{"done": false}, "not yet") })
			_, v, body := a.start("starter", "loop", `{"topic": "x"}`)
			if v.Status != workflow.Failed || !strings.Contains(v.Error, "step_limit (5/hour") || len(v.Steps) != 5 {
				t.Fatalf("run %s %q with %d steps, want FAILED on the step_limit after 5: %s", v.Status, v.Error, len(v.Steps), body)
			}
			if n := len(a.up.userMessages()); n != 5 {
				t.Errorf("%d provider calls for one start, want 5", n)
			}
			found := false
			for _, e := range a.entries(workflow.KindEnd) {
				s := summaryOf(e)
				found = found || (s["run_id"] == v.ID && s["status"] == "FAILED" && strings.Contains(str(s["error"]), "step_limit"))
			}
			if !found {
				t.Error("no workflow.end entry says the run stopped on the step_limit")
			}

			status, body, h := other.do(http.MethodPost, "/workflows/loop/runs", "tok-starter", `{"input": {"topic": "x"}}`)
			var e struct {
				Error struct{ Type, Code, Message string }
			}
			_ = json.Unmarshal(body, &e)
			if status != http.StatusTooManyRequests || e.Error.Code != "rate_limit_exceeded" || e.Error.Type != "rate_limit_error" ||
				!strings.Contains(e.Error.Message, "step_limit") || h.Get("Retry-After") == "" {
				t.Fatalf("a start over the step_limit: %d %s (Retry-After %q), want 429 rate_limit_exceeded", status, body, h.Get("Retry-After"))
			}
			if n := len(a.up.userMessages()); n != 5 {
				t.Errorf("the refused start made calls: %d in all, want 5", n)
			}
			refused := false
			for _, e := range other.entries(workflow.KindStart) {
				s := summaryOf(e)
				refused = refused || (s["allowed"] == false && s["limit"] == "step_limit")
			}
			if !refused {
				t.Error("no workflow.start entry records the refused start")
			}
		})
	}
}
