package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"iter"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	a2asdk "github.com/a2aproject/a2a-go/v2/a2a"
	"github.com/a2aproject/a2a-go/v2/a2aclient"
	"github.com/a2aproject/a2a-go/v2/a2aclient/agentcard"
	"github.com/a2aproject/a2a-go/v2/a2asrv"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/testoidc"
)

// a2aAgent is an A2A agent made with the official Go SDK (a2asrv): its
// card lists the skills summarize and translate; it answers a message
// with a task whose artifact echoes the text and the data it got, plus
// the address alice@example.com. A message whose text says "slow" keeps
// its task working until release is closed (or it is canceled).
type a2aAgent struct {
	srv     *httptest.Server
	mu      sync.Mutex
	got     []*a2asdk.Message
	headers []http.Header
	release chan struct{}
	// card is what the agent publishes.
	card atomic.Pointer[a2asdk.AgentCard]
}

func (ag *a2aAgent) messages() []*a2asdk.Message {
	ag.mu.Lock()
	defer ag.mu.Unlock()
	return slices.Clone(ag.got)
}

func (ag *a2aAgent) Execute(ctx context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2asdk.Event, error] {
	return func(yield func(a2asdk.Event, error) bool) {
		ag.mu.Lock()
		ag.got = append(ag.got, ec.Message)
		ag.mu.Unlock()
		text, data := "", any(nil)
		for _, p := range ec.Message.Parts {
			if t := p.Text(); t != "" {
				text += t
			}
			if d := p.Data(); d != nil {
				data = d
			}
		}
		if ec.StoredTask == nil && !yield(a2asdk.NewSubmittedTask(ec, ec.Message), nil) {
			return
		}
		if ec.StoredTask == nil && strings.Contains(text, "ask me") {
			q := a2asdk.NewMessageForTask(a2asdk.MessageRoleAgent, ec, a2asdk.NewTextPart("Which quarter?"))
			yield(a2asdk.NewStatusUpdateEvent(ec, a2asdk.TaskStateInputRequired, q), nil)
			return
		}
		if strings.Contains(text, "slow") {
			if !yield(a2asdk.NewStatusUpdateEvent(ec, a2asdk.TaskStateWorking, nil), nil) {
				return
			}
			select {
			case <-ag.release:
			case <-ctx.Done():
				return
			}
		}
		parts := []*a2asdk.Part{a2asdk.NewTextPart("echo: " + text + " (written by alice@example.com)")}
		if strings.Contains(text, "file") {
			f := a2asdk.NewRawPart(bytes.Repeat([]byte("R"), 100<<10))
			f.Filename, f.MediaType = "report.bin", "application/octet-stream"
			parts = append(parts, f)
		}
		if data != nil {
			parts = append(parts, a2asdk.NewDataPart(data))
		}
		if !yield(a2asdk.NewArtifactEvent(ec, parts...), nil) {
			return
		}
		yield(a2asdk.NewStatusUpdateEvent(ec, a2asdk.TaskStateCompleted, nil), nil)
	}
}

func (ag *a2aAgent) Cancel(_ context.Context, ec *a2asrv.ExecutorContext) iter.Seq2[a2asdk.Event, error] {
	return func(yield func(a2asdk.Event, error) bool) {
		yield(a2asdk.NewStatusUpdateEvent(ec, a2asdk.TaskStateCanceled, nil), nil)
	}
}

func newA2AAgent(t testing.TB) *a2aAgent {
	ag := &a2aAgent{release: make(chan struct{})}
	mux := http.NewServeMux()
	ag.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ag.mu.Lock()
		ag.headers = append(ag.headers, r.Header.Clone())
		ag.mu.Unlock()
		mux.ServeHTTP(w, r)
	}))
	card := &a2asdk.AgentCard{
		Name: "Helper", Description: "Summarizes and translates documents.", Version: "1.0.0",
		SupportedInterfaces: []*a2asdk.AgentInterface{a2asdk.NewAgentInterface(ag.srv.URL+"/rpc", a2asdk.TransportProtocolJSONRPC)},
		Capabilities:        a2asdk.AgentCapabilities{Streaming: true, PushNotifications: true},
		DefaultInputModes:   []string{"text/plain"}, DefaultOutputModes: []string{"text/plain"},
		SecuritySchemes: a2asdk.NamedSecuritySchemes{"upstream": a2asdk.APIKeySecurityScheme{Name: "X-Upstream-Key", Location: a2asdk.APIKeySecuritySchemeLocationHeader}},
		Skills: []a2asdk.AgentSkill{
			{ID: "summarize", Name: "Summarize", Description: "Condenses a long quarterly report into key points.", Tags: []string{"summary", "reports"}},
			{ID: "translate", Name: "Translate", Description: "Translates text between languages.", Tags: []string{"language"}},
		},
	}
	ag.card.Store(card)
	mux.Handle(a2asrv.WellKnownAgentCardPath, a2asrv.NewAgentCardHandler(a2asrv.AgentCardProducerFn(func(context.Context) (*a2asdk.AgentCard, error) {
		return ag.card.Load(), nil
	})))
	mux.Handle("/rpc", a2asrv.NewJSONRPCHandler(a2asrv.NewHandler(ag)))
	t.Cleanup(ag.srv.Close)
	return ag
}

// agentGatewayYAML is the head of a test gateway.yaml for agents' doors:
// the admin token, the mock provider, the shipped policies and the audit
// block (dir and chain, open for more of its keys), without reviewers.
func agentGatewayYAML(auditDir, chain string) string {
	return `listen: "127.0.0.1:0"
admin:
  token_sha256: "` + roster.HashTokenHex("tok-admin") + `"
upstreams:
  - {name: mock, type: mock, models: ["*"]}
policy:
  dir: ` + policyDir(a2aOpts{}) + `
audit:
  dir: ` + auditDir + `
  chain: ` + chain + `
`
}

// peopleYAML is gateway.yaml's people block signing in at op (client
// secret from $OIDC_SECRET), with the roles given as YAML lines
// ("admins: [gw-admins]").
func peopleYAML(op *testoidc.Provider, roles ...string) string {
	s := `people:
  oidc:
    issuer: ` + op.Issuer + `
    client_id: ` + op.ClientID + `
    client_secret: ${OIDC_SECRET}
    scopes: [openid, email, groups]
    roles:
`
	for _, r := range roles {
		s += "      " + r + "\n"
	}
	return s
}

// reviewedGatewayYAML is the head of a test gateway.yaml: the mock
// provider, the shipped policies, the admin (tok-admin) and reviewer
// ops-lead (tok-ops-lead), and an audit block (dir, chain) that the
// caller may go on with.
func reviewedGatewayYAML(auditDir, chain string) string {
	return `listen: "127.0.0.1:0"
admin:
  token_sha256: "` + roster.HashTokenHex("tok-admin") + `"
  reviewers:
    - name: ops-lead
      token_sha256: "` + roster.HashTokenHex("tok-ops-lead") + `"
upstreams:
  - {name: mock, type: mock, models: ["*"]}
policy:
  dir: ` + policyDir(a2aOpts{}) + `
audit:
  dir: ` + auditDir + `
  chain: ` + chain + `
`
}

// newA2AGateway is the whole gateway in front of ag as agent "helper":
// caller may send it the skill summarize and skill-less messages, other
// anything, intern nothing. Redaction of messages is on (credit cards
// block). Every token is "tok-" + the agent's id.
func newA2AGateway(t testing.TB, ag *a2aAgent) *a2a {
	t.Helper()
	dir := t.TempDir()
	auditDir := filepath.Join(dir, "audit")
	gw := reviewedGatewayYAML(auditDir, "a2a") + `  fail_mode: closed
messaging:
  allowed_networks: [127.0.0.0/8]
`
	agents := fmt.Sprintf(`agents:
  caller:
    type: orchestrator
    token_sha256: %q
    messages:
      - {to: [helper], actions: [summarize, message]}
  other:
    type: orchestrator
    token_sha256: %q
    messages:
      - {to: ["*"], actions: ["*"]}
  intern:
    type: orchestrator
    token_sha256: %q
  helper:
    type: worker
    token_sha256: %q
    description: A document helper.
    a2a: {url: %q, human_input: true}
`, roster.HashTokenHex("tok-caller"), roster.HashTokenHex("tok-other"), roster.HashTokenHex("tok-intern"), roster.HashTokenHex("tok-helper"), ag.srv.URL)
	return serveApp(t, dir, auditDir, map[string]string{
		config.GatewayFile:  gw,
		config.AgentsFile:   agents,
		config.ProtocolFile: "protocol:\n  redaction:\n    messages: true\n    block: [credit_card]\n",
	})
}

// a2aClient is an A2A SDK client of agent helper through the gateway, as
// the agent holding token: it reads the gateway's card and nothing else.
func a2aClient(t *testing.T, g *a2a, token string) (*a2aclient.Client, *a2asdk.AgentCard) {
	t.Helper()
	hc := &http.Client{Transport: bearer{token, http.DefaultTransport}}
	card, err := agentcard.NewResolver(hc).Resolve(t.Context(), g.srv.URL+"/a2a/helper")
	if err != nil {
		t.Fatalf("resolve card: %v", err)
	}
	c, err := a2aclient.NewFromCard(t.Context(), card, a2aclient.WithJSONRPCTransport(hc))
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	t.Cleanup(func() { _ = c.Destroy() })
	return c, card
}

func textMessage(text string, skill string) *a2asdk.SendMessageRequest {
	m := a2asdk.NewMessage(a2asdk.MessageRoleUser, a2asdk.NewTextPart(text))
	if skill != "" {
		m.Metadata = map[string]any{"skill": skill}
	}
	return &a2asdk.SendMessageRequest{Message: m}
}

// TestA2ACardRewritten: the card callers read names the gateway as the
// only interface and its bearer token as the only scheme; nothing of the
// agent's address or its own scheme, no push notifications.
func TestA2ACardRewritten(t *testing.T) {
	ag := newA2AAgent(t)
	g := newA2AGateway(t, ag)
	_, card := a2aClient(t, g, "tok-caller")
	if len(card.SupportedInterfaces) != 1 || card.SupportedInterfaces[0].URL != g.srv.URL+"/a2a/helper" ||
		card.SupportedInterfaces[0].ProtocolBinding != a2asdk.TransportProtocolJSONRPC {
		t.Fatalf("interfaces = %+v, want only the gateway's", card.SupportedInterfaces)
	}
	raw, _ := json.Marshal(card)
	if strings.Contains(string(raw), ag.srv.URL) || strings.Contains(string(raw), "X-Upstream-Key") {
		t.Fatalf("the card shows the agent's address or scheme: %s", raw)
	}
	if _, ok := card.SecuritySchemes["gateway"].(a2asdk.HTTPAuthSecurityScheme); !ok || len(card.SecuritySchemes) != 1 {
		t.Fatalf("security schemes = %+v, want the gateway's bearer only", card.SecuritySchemes)
	}
	if card.Capabilities.PushNotifications || len(card.Skills) != 2 {
		t.Fatalf("capabilities %+v, skills %d", card.Capabilities, len(card.Skills))
	}
	if status, _, _ := g.do(http.MethodGet, "/a2a/helper/.well-known/agent-card.json", "", ""); status != http.StatusUnauthorized {
		t.Fatalf("card without a token: %d, want 401", status)
	}
	if status, _, _ := g.do(http.MethodGet, "/a2a/caller/.well-known/agent-card.json", "tok-caller", ""); status != http.StatusNotFound {
		t.Fatalf("card of an agent without a2a: %d, want 404", status)
	}
	if e := g.entries("a2a.card"); len(e) == 0 || !strings.Contains(string(e[0].Summary), `"summarize"`) {
		t.Fatalf("card read not audited: %+v", e)
	}
}

// TestA2ASkillsInRegistry: the card's skills are found by a registry query.
func TestA2ASkillsInRegistry(t *testing.T) {
	ag := newA2AAgent(t)
	g := newA2AGateway(t, ag)
	a2aClient(t, g, "tok-caller") // reads the card
	status, body, _ := g.do(http.MethodPost, "/registry/query", "tok-caller", `{"query": {"text": "quarterly report key points"}, "top_k": 3}`)
	if status != http.StatusOK || !strings.Contains(string(body), `"helper"`) || !strings.Contains(string(body), `"summarize"`) {
		t.Fatalf("registry query: %d %s", status, body)
	}
}

// TestA2ACardChangeSeen: a card that changes is seen on refresh, audited
// with the skills it added and removed, and the registry finds the new
// skill.
func TestA2ACardChangeSeen(t *testing.T) {
	ag := newA2AAgent(t)
	g := newA2AGateway(t, ag)
	a2aClient(t, g, "tok-caller")
	changed := *ag.card.Load()
	changed.Skills = []a2asdk.AgentSkill{changed.Skills[0], {ID: "classify", Name: "Classify", Description: "Sorts invoices by vendor.", Tags: []string{"invoices"}}}
	ag.card.Store(&changed)
	g.app.a2a.Refresh(t.Context())
	var found bool
	for _, e := range g.entries("a2a.card") {
		s := string(e.Summary)
		found = found || (strings.Contains(s, `"skills_added":["classify"]`) && strings.Contains(s, `"skills_removed":["translate"]`) && strings.Contains(s, `"previous_sha256"`))
	}
	if !found {
		t.Fatalf("card change not audited: %+v", g.entries("a2a.card"))
	}
	status, body, _ := g.do(http.MethodPost, "/registry/query", "tok-caller", `{"query": {"text": "sort invoices by vendor"}, "top_k": 1}`)
	if status != http.StatusOK || !strings.Contains(string(body), `"classify"`) {
		t.Fatalf("registry after the change: %d %s", status, body)
	}
}

// TestA2ASendGovernedAndAudited: a message reaches the agent redacted
// (the address in a data part is masked), the answer comes back redacted
// too, and both are audited with their task and context ids.
func TestA2ASendGovernedAndAudited(t *testing.T) {
	ag := newA2AAgent(t)
	g := newA2AGateway(t, ag)
	c, _ := a2aClient(t, g, "tok-caller")
	req := textMessage("summarize this", "summarize")
	req.Message.Parts = append(req.Message.Parts, a2asdk.NewDataPart(map[string]any{"contact": "bob@example.com"}))
	res, err := c.SendMessage(t.Context(), req)
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	task, ok := res.(*a2asdk.Task)
	if !ok || task.Status.State != a2asdk.TaskStateCompleted || len(task.Artifacts) != 1 {
		t.Fatalf("result = %#v, want a completed task with an artifact", res)
	}
	answer, _ := json.Marshal(task)
	if strings.Contains(string(answer), "alice@example.com") || !strings.Contains(string(answer), "[REDACTED:email]") {
		t.Fatalf("the agent's answer is not redacted: %s", answer)
	}
	got, _ := json.Marshal(ag.messages())
	if strings.Contains(string(got), "bob@example.com") || !strings.Contains(string(got), "[REDACTED:email]") {
		t.Fatalf("the agent got the address: %s", got)
	}
	reqs, resps := g.entries("message.request"), g.entries("message.response")
	if len(reqs) == 0 || !strings.Contains(string(reqs[0].Summary), `"skill":"summarize"`) || reqs[0].AgentID != "caller" {
		t.Fatalf("message.request = %+v", reqs)
	}
	last := string(resps[len(resps)-1].Summary)
	if !strings.Contains(last, `"task_id":"`+string(task.ID)+`"`) || !strings.Contains(last, `"context_id":"`+task.ContextID+`"`) {
		t.Fatalf("message.response without the task's ids: %s", last)
	}
	for _, h := range ag.headers {
		if h.Get("Authorization") != "" {
			t.Fatalf("the caller's token reached the agent: %v", h)
		}
	}
}

// TestA2ADeniedSkill: a skill the caller's messages rules do not allow is
// refused in A2A's error shape (permission denied), audited, and never
// reaches the agent; an agent with no rules may send nothing.
func TestA2ADeniedSkill(t *testing.T) {
	ag := newA2AAgent(t)
	g := newA2AGateway(t, ag)
	c, _ := a2aClient(t, g, "tok-caller")
	_, err := c.SendMessage(t.Context(), textMessage("hola", "translate"))
	if !errors.Is(err, a2asdk.ErrUnauthorized) || !strings.Contains(err.Error(), "translate") {
		t.Fatalf("denied skill: err = %v, want permission denied", err)
	}
	ci, _ := a2aClient(t, g, "tok-intern")
	if _, err := ci.SendMessage(t.Context(), textMessage("hi", "")); !errors.Is(err, a2asdk.ErrUnauthorized) {
		t.Fatalf("agent without rules: err = %v", err)
	}
	if _, err := c.SendMessage(t.Context(), textMessage("hi", "juggle")); !errors.Is(err, a2asdk.ErrInvalidParams) {
		t.Fatalf("unknown skill: err = %v", err)
	}
	if n := len(ag.messages()); n != 0 {
		t.Fatalf("the agent got %d messages", n)
	}
	if rej := g.entries("message.reject"); len(rej) < 3 {
		t.Fatalf("refusals audited: %d", len(rej))
	}
	if _, err := c.SendMessage(t.Context(), textMessage("card 4111 1111 1111 1111", "")); !errors.Is(err, a2asdk.ErrInvalidParams) {
		t.Fatalf("blocked detector: err = %v", err)
	}
}

// TestA2AStreamGetCancelResubscribe: a stream relays the agent's events
// (redacted); the task can be read, resubscribed to and canceled by its
// caller, and by no one else (another agent is told it does not exist).
func TestA2AStreamGetCancelResubscribe(t *testing.T) {
	ag := newA2AAgent(t)
	g := newA2AGateway(t, ag)
	c, _ := a2aClient(t, g, "tok-caller")
	other, _ := a2aClient(t, g, "tok-other")

	// A stream to its end, redacted on the way.
	var states []a2asdk.TaskState
	var streamed strings.Builder
	for ev, err := range c.SendStreamingMessage(t.Context(), textMessage("stream please", "summarize")) {
		if err != nil {
			t.Fatalf("stream: %v", err)
		}
		raw, _ := json.Marshal(ev)
		streamed.Write(raw)
		if s, ok := ev.(*a2asdk.TaskStatusUpdateEvent); ok {
			states = append(states, s.Status.State)
		}
	}
	if !slices.Contains(states, a2asdk.TaskStateCompleted) || strings.Contains(streamed.String(), "alice@example.com") {
		t.Fatalf("stream states %v, events %s", states, streamed.String())
	}

	// A slow task: its first event names it.
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	next, stop := iter.Pull2(c.SendStreamingMessage(ctx, textMessage("slow work", "summarize")))
	defer stop()
	ev, err, _ := next()
	if err != nil {
		t.Fatalf("slow stream: %v", err)
	}
	id := ev.TaskInfo().TaskID
	if id == "" {
		t.Fatalf("first event %#v names no task", ev)
	}

	// Another caller: the task does not exist for it.
	if _, err := other.GetTask(ctx, &a2asdk.GetTaskRequest{ID: id}); !errors.Is(err, a2asdk.ErrTaskNotFound) {
		t.Fatalf("other's get: err = %v, want task not found", err)
	}
	if _, err := other.CancelTask(ctx, &a2asdk.CancelTaskRequest{ID: id}); !errors.Is(err, a2asdk.ErrTaskNotFound) {
		t.Fatalf("other's cancel: err = %v, want task not found", err)
	}
	for _, err := range other.SubscribeToTask(ctx, &a2asdk.SubscribeToTaskRequest{ID: id}) {
		if !errors.Is(err, a2asdk.ErrTaskNotFound) {
			t.Fatalf("other's resubscribe: err = %v, want task not found", err)
		}
		break
	}
	if _, err := other.SendMessage(ctx, &a2asdk.SendMessageRequest{Message: &a2asdk.Message{ID: "m-x", Role: a2asdk.MessageRoleUser,
		TaskID: id, Parts: a2asdk.ContentParts{a2asdk.NewTextPart("hijack")}}}); !errors.Is(err, a2asdk.ErrTaskNotFound) {
		t.Fatalf("other's message to the task: err = %v, want task not found", err)
	}
	if list, err := other.ListTasks(ctx, &a2asdk.ListTasksRequest{}); err != nil || len(list.Tasks) != 0 {
		t.Fatalf("other's list: %+v, %v", list, err)
	}

	// Its caller: get, list, resubscribe, cancel.
	got, err := c.GetTask(ctx, &a2asdk.GetTaskRequest{ID: id})
	if err != nil || got.ID != id {
		t.Fatalf("get: %+v, %v", got, err)
	}
	if list, err := c.ListTasks(ctx, &a2asdk.ListTasksRequest{}); err != nil || !slices.ContainsFunc(list.Tasks, func(t *a2asdk.Task) bool { return t.ID == id }) {
		t.Fatalf("list: %+v, %v", list, err)
	}
	sub, stopSub := iter.Pull2(c.SubscribeToTask(ctx, &a2asdk.SubscribeToTaskRequest{ID: id}))
	defer stopSub()
	if ev, err, ok := sub(); !ok || err != nil || ev.TaskInfo().TaskID != id {
		t.Fatalf("resubscribe: %#v, %v", ev, err)
	}
	canceled, err := c.CancelTask(ctx, &a2asdk.CancelTaskRequest{ID: id})
	if err != nil || canceled.Status.State != a2asdk.TaskStateCanceled {
		t.Fatalf("cancel: %+v, %v", canceled, err)
	}
	if e := g.entries("message.response"); !slices.ContainsFunc(e, func(e audit.Entry) bool {
		return strings.Contains(string(e.Summary), `"state":"TASK_STATE_CANCELED"`)
	}) {
		t.Fatal("the cancel's state change is not audited")
	}
}

// TestA2AInputRequiredAnsweredByPerson: a task that asks for input waits
// for a person (its caller may not answer it meanwhile); the answer the
// person approves is the task's next message, and the task completes.
func TestA2AInputRequiredAnsweredByPerson(t *testing.T) {
	ag := newA2AAgent(t)
	g := newA2AGateway(t, ag)
	c, _ := a2aClient(t, g, "tok-caller")
	res, err := c.SendMessage(t.Context(), textMessage("please ask me", "summarize"))
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	task, ok := res.(*a2asdk.Task)
	if !ok || task.Status.State != a2asdk.TaskStateInputRequired {
		t.Fatalf("result = %#v, want a task waiting for input", res)
	}
	review, _ := task.Metadata["gateway_review"].(map[string]any)
	id, _ := review["escalation_id"].(string)
	if id == "" {
		t.Fatalf("the task does not say a person answers: %+v", task.Metadata)
	}
	_, err = c.SendMessage(t.Context(), &a2asdk.SendMessageRequest{Message: &a2asdk.Message{ID: "m-self", Role: a2asdk.MessageRoleUser,
		TaskID: task.ID, ContextID: task.ContextID, Parts: a2asdk.ContentParts{a2asdk.NewTextPart("Q1")}}})
	if !errors.Is(err, a2asdk.ErrUnsupportedOperation) {
		t.Fatalf("the caller's own answer: err = %v, want refused while a person decides", err)
	}
	status, body, _ := g.do(http.MethodGet, "/admin/escalations", "tok-admin", "")
	if status != http.StatusOK || !strings.Contains(string(body), id) || !strings.Contains(string(body), "Which quarter?") {
		t.Fatalf("escalation: %d %s", status, body)
	}
	if status, body, _ := g.do(http.MethodPost, "/admin/escalations/"+id+"/decision", "tok-admin",
		`{"decision":"approve","reviewer":"ops","comment":"Q3 2026"}`); status != http.StatusOK {
		t.Fatalf("decision: %d %s", status, body)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		got, err := c.GetTask(t.Context(), &a2asdk.GetTaskRequest{ID: task.ID})
		if err != nil {
			t.Fatalf("get: %v", err)
		}
		if got.Status.State == a2asdk.TaskStateCompleted {
			raw, _ := json.Marshal(got.Artifacts)
			if !strings.Contains(string(raw), "Q3 2026") {
				t.Fatalf("the agent did not get the person's answer: %s", raw)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("task still %s", got.Status.State)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if e := g.entries("message.request"); !slices.ContainsFunc(e, func(e audit.Entry) bool {
		return strings.Contains(string(e.Summary), `"escalation_id":"`+id+`"`) && strings.Contains(string(e.Summary), `"by":"admin:ops"`)
	}) {
		t.Fatal("the person's answer is not audited")
	}
}

// TestA2AFilesOverInlineLimitAreBlobs: file bytes larger than
// max_inline_binary, either way, become a link to the gateway's blob
// store that only the side they were sent to may read.
func TestA2AFilesOverInlineLimitAreBlobs(t *testing.T) {
	ag := newA2AAgent(t)
	g := newA2AGateway(t, ag)
	c, _ := a2aClient(t, g, "tok-caller")
	big := bytes.Repeat([]byte("C"), 100<<10)
	req := textMessage("a file for you", "summarize")
	f := a2asdk.NewRawPart(big)
	f.Filename = "input.bin"
	req.Message.Parts = append(req.Message.Parts, f)
	res, err := c.SendMessage(t.Context(), req)
	if err != nil {
		t.Fatalf("send: %v", err)
	}
	link := func(p *a2asdk.Part) string {
		u := string(p.URL())
		if !strings.HasPrefix(u, g.srv.URL+"/blobs/") {
			t.Fatalf("part %+v is not a blob link", p)
		}
		return strings.TrimPrefix(u, g.srv.URL)
	}
	got := ag.messages()[0].Parts
	if len(got) != 2 || got[1].Filename != "input.bin" {
		t.Fatalf("the agent got %+v", got)
	}
	in := link(got[1])
	if status, body, _ := g.do(http.MethodGet, in, "tok-helper", ""); status != http.StatusOK || !bytes.Equal(body, big) {
		t.Fatalf("the agent reads its file: %d (%d bytes)", status, len(body))
	}
	if status, _, _ := g.do(http.MethodGet, in, "tok-other", ""); status != http.StatusNotFound {
		t.Fatalf("another agent reads it: %d", status)
	}
	task := res.(*a2asdk.Task)
	parts := task.Artifacts[0].Parts
	out := link(parts[len(parts)-1])
	if status, body, _ := g.do(http.MethodGet, out, "tok-caller", ""); status != http.StatusOK || len(body) != 100<<10 {
		t.Fatalf("the caller reads the agent's file: %d (%d bytes)", status, len(body))
	}
	if status, _, _ := g.do(http.MethodGet, out, "tok-helper", ""); status != http.StatusNotFound {
		t.Fatalf("the agent reads the caller's copy: %d", status)
	}
}

// TestA2ARefusesOtherVersionsByName: a 0.3 client's method and another
// A2A-Version are told which version is served; push notification configs
// are refused by name.
func TestA2ARefusesOtherVersionsByName(t *testing.T) {
	ag := newA2AAgent(t)
	g := newA2AGateway(t, ag)
	_, body, _ := g.do(http.MethodPost, "/a2a/helper", "tok-caller",
		`{"jsonrpc":"2.0","id":1,"method":"message/send","params":{"message":{"messageId":"m1","role":"user","parts":[{"kind":"text","text":"hi"}]}}}`)
	if !strings.Contains(string(body), `"code":-32009`) || !strings.Contains(string(body), "0.3") {
		t.Fatalf("0.3 method: %s", body)
	}
	_, body, _ = g.do(http.MethodPost, "/a2a/helper", "tok-caller",
		`{"jsonrpc":"2.0","id":2,"method":"CreateTaskPushNotificationConfig","params":{"taskId":"t1","config":{"url":"http://169.254.169.254/"}}}`)
	if !strings.Contains(string(body), `"code":-32003`) || !strings.Contains(string(body), "Push notifications") {
		t.Fatalf("push config: %s", body)
	}
	_, body, _ = g.do(http.MethodPost, "/a2a/helper", "tok-caller",
		`{"jsonrpc":"2.0","id":3,"method":"SendMessage","params":{"message":{"messageId":"m1","role":"ROLE_USER","parts":[{"text":"hi","data":{"x":1}}]}}}`)
	if !strings.Contains(string(body), `"code":-32602`) {
		t.Fatalf("a part with two kinds: %s", body)
	}
	if n := len(ag.messages()); n != 0 {
		t.Fatalf("the agent got %d messages", n)
	}
}
