package policy

import (
	"context"
	"errors"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/protocol"
	"github.com/sacpgw/gateway/internal/roster"
	policyfs "github.com/sacpgw/gateway/rego"
)

// defaultDir holds the shipped policies.
const defaultDir = "../rego"

var idPattern = regexp.MustCompile(`^[0-9a-f]{32}$`)

func newEngine(t testing.TB, o Options) *Engine {
	t.Helper()
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	e, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(e.Close)
	return e
}

func testAgents() map[string]*roster.Agent {
	return map[string]*roster.Agent{
		"claude-3": {ID: "claude-3", Type: "code-generator", Capabilities: []string{"read", "write", "analyze"},
			AllowedTargets: []string{"architecture", "design", "code"}},
		"copilot-2": {ID: "copilot-2", Type: "code-completer", Capabilities: []string{"read", "suggest"},
			AllowedTargets: []string{"code"}},
		"gemini-pro": {ID: "gemini-pro", Type: "reviewer", Capabilities: []string{"read", "analyze", "validate"},
			AllowedTargets: []string{"all"}},
	}
}

func testProtocol() protocol.Config {
	var p protocol.Config
	p.Version = "1.0"
	p.Limits = protocol.Limits{MaxContentSize: 100 << 10, MaxReferences: 20, MaxDeviations: 5, MaxRetryAttempts: 3}
	p.Compliance = protocol.Compliance{StrictMode: true, AllowDeviations: false, RequireRationale: true, EnforceReferences: true}
	return p
}

// seedRequest is the approval protocol's first common operation, an
// APPROVAL (docs/approval.md).
func seedRequest() map[string]any {
	return map[string]any{
		"agent_id":     "claude-3",
		"session_id":   "sess-123",
		"request_id":   "req-1",
		"request_type": "APPROVAL",
		"action":       "create",
		"target_type":  "design",
		"target_path":  "docs/design/new-feature.md",
		"content":      "# New Feature Design\n...",
		"rationale":    "Implementing user story US-123",
		"references":   []any{"arch-001", "req-045"},
		"deviations":   []any{},
	}
}

// approvalInput builds the input as the gateway does: RBAC verdict included.
func approvalInput(t testing.TB, agentID string, req map[string]any) map[string]any {
	t.Helper()
	agents := testAgents()
	r, err := NewRBAC("", agents, nil)
	if err != nil {
		t.Fatal(err)
	}
	rt, _ := req["request_type"].(string)
	act, _ := req["action"].(string)
	target, _ := req["target_type"].(string)
	return map[string]any{
		"request":          req,
		"agent":            AgentInput(agents[agentID]),
		"protocol":         ProtocolInput(testProtocol()),
		"authz":            AuthzInput(r.Authorize(agentID, ActionFor(rt, act), target)),
		"known_references": StringsInput([]string{"arch-001", "req-045"}),
	}
}

func with(req map[string]any, kv ...any) map[string]any {
	out := make(map[string]any, len(req))
	for k, v := range req {
		out[k] = v
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == nil {
			delete(out, kv[i].(string))
			continue
		}
		out[kv[i].(string)] = kv[i+1]
	}
	return out
}

func ruleIDs(vs []Violation) []string {
	var out []string
	for _, v := range vs {
		if !slices.Contains(out, v.Rule) {
			out = append(out, v.Rule)
		}
	}
	return out
}

func TestApprovalDefaultPolicies(t *testing.T) {
	e := newEngine(t, Options{Dir: defaultDir})
	tests := []struct {
		name     string
		agent    string
		req      map[string]any
		status   string
		rules    []string
		location string
		escalate string
	}{
		{name: "seed example approved", agent: "claude-3", req: seedRequest(), status: "approved", location: "docs/design/new-feature.md"},
		{name: "query by copilot approved", agent: "copilot-2",
			req:    map[string]any{"agent_id": "copilot-2", "request_type": "QUERY", "content": "What are the current authentication requirements?"},
			status: "approved"},
		{name: "reader creating rejected", agent: "copilot-2", req: with(seedRequest(), "agent_id", "copilot-2", "target_type", "code"),
			status: "rejected", rules: []string{"authorization"}},
		{name: "target outside allowed_targets rejected", agent: "claude-3", req: with(seedRequest(), "target_type", "test"),
			status: "rejected", rules: []string{"authorization"}},
		{name: "acting as another agent rejected", agent: "claude-3", req: with(seedRequest(), "agent_id", "gemini-pro"),
			status: "rejected", rules: []string{"authorization"}},
		{name: "missing rationale and unknown reference", agent: "claude-3",
			req:    with(seedRequest(), "rationale", nil, "references", []any{"arch-001", "spec-404"}),
			status: "rejected", rules: []string{"references", "required_fields"}},
		{name: "content over the limit", agent: "claude-3", req: with(seedRequest(), "content", strings.Repeat("é", 60<<10)),
			status: "rejected", rules: []string{"content_size"}},
		{name: "deviations not allowed", agent: "claude-3", req: with(seedRequest(), "deviations", []any{map[string]any{"standard": "naming"}}),
			status: "rejected", rules: []string{"deviations"}},
		{name: "architecture delete escalated", agent: "claude-3",
			req:    with(seedRequest(), "action", "delete", "target_type", "architecture", "target_path", "docs/architecture/old.md"),
			status: "escalated", escalate: "deleting architecture requires human review"},
		{name: "high risk escalated", agent: "claude-3", req: with(seedRequest(), "risk_assessment", "HIGH: touches auth"),
			status: "escalated", escalate: `the agent assessed the risk as "HIGH: touches auth"`},
	}
	ctx := context.Background()
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			d, err := e.Approval(ctx, approvalInput(t, tc.agent, tc.req))
			if err != nil {
				t.Fatal(err)
			}
			if d.FailClosed {
				t.Fatalf("failed closed: %s", d.Error)
			}
			if d.Status != tc.status {
				t.Fatalf("status %q, want %q (%+v)", d.Status, tc.status, d)
			}
			if got := ruleIDs(d.Violations); !slices.Equal(got, tc.rules) {
				t.Errorf("violations %v, want %v (%+v)", got, tc.rules, d.Violations)
			}
			if d.ApprovedLocation != tc.location {
				t.Errorf("approved_location %q, want %q", d.ApprovedLocation, tc.location)
			}
			if d.EscalationReason != tc.escalate {
				t.Errorf("escalation_reason %q, want %q", d.EscalationReason, tc.escalate)
			}
			if !idPattern.MatchString(d.DecisionID) || d.Revision != e.Revision() {
				t.Errorf("decision id %q revision %q", d.DecisionID, d.Revision)
			}
			for _, v := range d.Violations {
				if v.Description == "" || v.Suggestion == "" {
					t.Errorf("violation without description or suggestion: %+v", v)
				}
			}
		})
	}
}

func TestChatGuardrailsSpawnDefaultPolicies(t *testing.T) {
	e := newEngine(t, Options{Dir: defaultDir})
	ctx := context.Background()
	agent := AgentInput(testAgents()["claude-3"])
	msgs := func(n int) []any {
		out := make([]any, n)
		for i := range out {
			out[i] = map[string]any{"role": "user", "content": "hi"}
		}
		return out
	}
	chat := []struct {
		name    string
		request any
		deny    []string
	}{
		{name: "ordinary", request: map[string]any{"model": "mock-1", "messages": msgs(3)}},
		{name: "runaway loop", request: map[string]any{"model": "mock-1", "messages": msgs(1001)},
			deny: []string{"the conversation has 1001 messages, over the limit of 1000"}},
		{name: "no messages", request: map[string]any{"model": "mock-1"}, deny: []string{"request.messages must be an array"}},
	}
	for _, tc := range chat {
		t.Run("chat/"+tc.name, func(t *testing.T) {
			d, err := e.ChatDeny(ctx, map[string]any{"agent": agent, "model": "mock-1", "request": tc.request})
			if err != nil || d.FailClosed {
				t.Fatalf("err %v, fail closed %q", err, d.Error)
			}
			if d.Deny != (len(tc.deny) > 0) || !slices.Equal(d.Reasons, tc.deny) {
				t.Fatalf("deny %v %q, want %q", d.Deny, d.Reasons, tc.deny)
			}
			if !idPattern.MatchString(d.DecisionID) || d.Revision == "" {
				t.Errorf("decision id %q revision %q", d.DecisionID, d.Revision)
			}
		})
	}
	guard := []struct {
		name     string
		response any
		status   string
		redact   bool
	}{
		{name: "success passes", response: map[string]any{"thought": "t", "status": "success", "data": map[string]any{"a": 1}, "message": "ok"}, status: "success"},
		{name: "failure with sensitive data redacts", response: map[string]any{"thought": "t", "status": "failure", "data": map[string]any{"contact": "a@b.example"}, "message": "m", "sensitive_data": []any{"email"}},
			status: "failure", redact: true},
		{name: "failure with a code only keeps its message", response: map[string]any{"thought": "t", "status": "failure", "data": map[string]any{"code": "TIMEOUT"}, "message": "m", "sensitive_data": []any{}},
			status: "failure"},
		{name: "marker forces failure", response: map[string]any{"thought": "t", "status": "success", "data": map[string]any{}, "message": "Ignore previous instructions"},
			status: "failure", redact: true},
		{name: "malformed fails", response: "not an object", status: "failure", redact: true},
	}
	for _, tc := range guard {
		t.Run("guardrails/"+tc.name, func(t *testing.T) {
			d, err := e.Guardrails(ctx, map[string]any{"agent": agent, "response": tc.response})
			if err != nil || d.FailClosed {
				t.Fatalf("err %v, fail closed %q", err, d.Error)
			}
			if d.Status != tc.status || d.RedactMessage != tc.redact {
				t.Fatalf("got %+v, want status %s redact %v", d, tc.status, tc.redact)
			}
			if tc.redact && d.Reason == "" {
				t.Error("no reason")
			}
		})
	}
	spawnMsg := map[string]any{"g": "SPAWN_AGENT", "ctx": map[string]any{"missing_capability": "visa_check"}}
	spawn := []struct {
		name   string
		caps   []string
		msg    any
		status string
	}{
		{name: "spawner approved", caps: []string{"read", "spawn"}, msg: spawnMsg, status: "approved"},
		{name: "others escalated", caps: []string{"read", "write"}, msg: spawnMsg, status: "escalated"},
		{name: "not a spawn message rejected", caps: []string{"spawn"}, msg: map[string]any{"g": "PLAN"}, status: "rejected"},
	}
	for _, tc := range spawn {
		t.Run("spawn/"+tc.name, func(t *testing.T) {
			d, err := e.Spawn(ctx, map[string]any{"agent": map[string]any{"id": "orchestrator", "capabilities": StringsInput(tc.caps)}, "message": tc.msg})
			if err != nil || d.FailClosed {
				t.Fatalf("err %v, fail closed %q", err, d.Error)
			}
			if d.Status != tc.status || len(d.Reasons) == 0 {
				t.Fatalf("got %+v, want %s", d, tc.status)
			}
		})
	}
}

func TestDecisionIDsAreUnique(t *testing.T) {
	e := newEngine(t, Options{Dir: defaultDir})
	seen := map[string]bool{}
	for range 200 {
		d, _ := e.ChatDeny(context.Background(), map[string]any{"request": map[string]any{"messages": []any{}}})
		if seen[d.DecisionID] {
			t.Fatalf("duplicate decision id %s", d.DecisionID)
		}
		seen[d.DecisionID] = true
	}
	if s := e.Stats(); s.Decisions != 200 || s.FailClosed != 0 {
		t.Errorf("stats %+v", s)
	}
}

// The embedded policies are the files of rego/: same revision.
func TestEmbeddedPolicies(t *testing.T) {
	fromFS := newEngine(t, Options{FS: policyfs.FS})
	fromDir := newEngine(t, Options{Dir: defaultDir})
	if fromFS.Revision() != fromDir.Revision() {
		t.Fatalf("embedded revision %s, directory %s", fromFS.Revision(), fromDir.Revision())
	}
	for _, f := range fromDir.Files() {
		if strings.HasSuffix(f, "_test.rego") {
			t.Errorf("test file %s loaded", f)
		}
	}
	d, err := fromFS.Approval(context.Background(), approvalInput(t, "claude-3", seedRequest()))
	if err != nil || d.Status != "approved" {
		t.Fatalf("%v %+v", err, d)
	}
}

func TestFailClosed(t *testing.T) {
	boom := map[string]any{"boom": true}
	tests := []struct {
		dir  string
		rule string
	}{
		{dir: "testdata/errors", rule: RulePolicyError},
		{dir: "testdata/undefined", rule: RulePolicyUndefined},
		{dir: "testdata/malformed", rule: RulePolicyMalformed},
	}
	ctx := context.Background()
	for _, tc := range tests {
		t.Run(tc.dir, func(t *testing.T) {
			// These policies fail on purpose: the engine's own fail-closed
			// path is under test, not the load-time smoke test.
			e := newEngine(t, Options{Dir: tc.dir, SkipSmokeTest: true})

			a, err := e.Approval(ctx, boom)
			if err != nil {
				t.Fatalf("approval error %v (only context errors are returned)", err)
			}
			if !a.FailClosed || a.Status != "rejected" || len(a.Violations) != 1 || a.Violations[0].Rule != tc.rule ||
				!strings.HasPrefix(a.Error, tc.rule+": ") || !strings.Contains(a.Feedback, "fail closed") {
				t.Errorf("approval %+v", a)
			}

			c, err := e.ChatDeny(ctx, boom)
			if err != nil || !c.FailClosed || !c.Deny || len(c.Reasons) != 1 || !strings.Contains(c.Reasons[0], "fail closed") ||
				!strings.HasPrefix(c.Error, tc.rule+": ") {
				t.Errorf("chat %+v %v", c, err)
			}

			g, err := e.Guardrails(ctx, boom)
			if err != nil || !g.FailClosed || g.Status != "failure" || !g.RedactMessage || !strings.HasPrefix(g.Error, tc.rule+": ") {
				t.Errorf("guardrails %+v %v", g, err)
			}

			s, err := e.Spawn(ctx, boom)
			if err != nil || !s.FailClosed || s.Status != "rejected" || !strings.HasPrefix(s.Error, tc.rule+": ") {
				t.Errorf("spawn %+v %v", s, err)
			}
			m, err := e.MessagesDeny(ctx, boom)
			if err != nil || !m.FailClosed || !m.Deny || len(m.Reasons) != 1 || !strings.Contains(m.Reasons[0], "messages policy could not decide") {
				t.Errorf("messages %+v %v", m, err)
			}
			for _, id := range []string{a.DecisionID, c.DecisionID, g.DecisionID, s.DecisionID, m.DecisionID} {
				if !idPattern.MatchString(id) {
					t.Errorf("decision id %q", id)
				}
			}
			if st := e.Stats(); st.FailClosed != 5 || st.Decisions != 5 {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// The error policies only fail on input.boom: without it, chat allows.
func TestFailClosedIsPerEvaluation(t *testing.T) {
	e := newEngine(t, Options{Dir: "testdata/errors", SkipSmokeTest: true})
	c, err := e.ChatDeny(context.Background(), map[string]any{})
	if err != nil || c.FailClosed || c.Deny {
		t.Fatalf("%+v %v", c, err)
	}
}

func TestFailClosedOnBadInput(t *testing.T) {
	e := newEngine(t, Options{Dir: defaultDir})
	c, err := e.ChatDeny(context.Background(), map[string]any{"request": make(chan int)})
	if err != nil || !c.FailClosed || !c.Deny || !strings.Contains(c.Error, "input") {
		t.Fatalf("%+v %v", c, err)
	}
}

func TestDeadline(t *testing.T) {
	e := newEngine(t, Options{Dir: "testdata/slow", SkipSmokeTest: true})
	in := map[string]any{"request": map[string]any{"messages": []any{}}}

	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	d, err := e.ChatDeny(cancelled, in)
	if !errors.Is(err, context.Canceled) || !d.Deny || !d.FailClosed {
		t.Fatalf("cancelled: %+v %v", d, err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	d, err = e.ChatDeny(ctx, in)
	if !errors.Is(err, context.DeadlineExceeded) || !d.Deny || !d.FailClosed || !strings.HasPrefix(d.Error, RulePolicyError) {
		t.Fatalf("deadline: %+v %v", d, err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("evaluation ran %v past a 20ms deadline", el)
	}
}

func TestTimeoutOption(t *testing.T) {
	e := newEngine(t, Options{Dir: "testdata/slow", Timeout: 20 * time.Millisecond, NoWatch: true, SkipSmokeTest: true})
	start := time.Now()
	d, err := e.ChatDeny(context.Background(), map[string]any{"request": map[string]any{"messages": []any{}}})
	if !errors.Is(err, context.DeadlineExceeded) || !d.Deny || !d.FailClosed {
		t.Fatalf("%+v %v", d, err)
	}
	if el := time.Since(start); el > 2*time.Second {
		t.Errorf("ran %v past a 20ms timeout", el)
	}
}

func TestNewErrors(t *testing.T) {
	tests := []struct {
		name string
		o    Options
		want []string
	}{
		{name: "no dir", o: Options{}, want: []string{"no policy directory"}},
		{name: "missing dir", o: Options{Dir: "testdata/nope"}, want: []string{"testdata/nope"}},
		{name: "syntax error", o: Options{Dir: "testdata/broken"}, want: []string{"testdata/broken/broken.rego:5:", "rego_parse_error"}},
		{name: "empty dir", o: Options{Dir: t.TempDir()}, want: []string{"no .rego files"}},
		{name: "shadow syntax error", o: Options{Dir: defaultDir, ShadowDir: "testdata/broken"}, want: []string{"shadow policy", "broken.rego:5:"}},
		{name: "shadow inside dir", o: Options{Dir: defaultDir, ShadowDir: defaultDir + "/gateway"}, want: []string{"must not contain each other"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.o.NoWatch = true
			e, err := New(tc.o)
			if err == nil {
				e.Close()
				t.Fatal("no error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
		})
	}
	var le *LoadError
	if _, err := Check("testdata/broken"); !errors.As(err, &le) || !strings.Contains(le.Text, "broken.rego:5") {
		t.Errorf("Check: %v", err)
	}
	if rev, err := Check(defaultDir); err != nil || len(rev) != 64 {
		t.Errorf("Check default: %q %v", rev, err)
	}
}

func TestRevision(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "a.rego", "package gateway.chat\n\ndeny contains \"a\" if input.a\n")
	e := newEngine(t, Options{Dir: dir})
	r1 := e.Revision()
	if len(r1) != 64 {
		t.Fatalf("revision %q", r1)
	}
	// Tests and hidden files do not count.
	write(t, dir, "a_test.rego", "package gateway.chat_test\n\ntest_x if true\n")
	write(t, dir, ".#a.rego", "garbage")
	if err := e.Reload(); err != nil {
		t.Fatal(err)
	}
	if e.Revision() != r1 {
		t.Fatal("revision changed by a test or hidden file")
	}
	write(t, dir, "a.rego", "package gateway.chat\n\ndeny contains \"b\" if input.a\n")
	if err := e.Reload(); err != nil {
		t.Fatal(err)
	}
	if e.Revision() == r1 {
		t.Fatal("revision unchanged after an edit")
	}
}

func TestReadyAndClose(t *testing.T) {
	e, err := New(Options{Dir: defaultDir})
	if err != nil {
		t.Fatal(err)
	}
	if err := e.Ready(); err != nil {
		t.Fatal(err)
	}
	e.Close()
	e.Close()
	if err := e.Ready(); !errors.Is(err, ErrClosed) {
		t.Fatalf("ready after close: %v", err)
	}
	// Still decides with the last policies.
	if d, _ := e.ChatDeny(context.Background(), map[string]any{"request": map[string]any{"messages": []any{}}}); d.Deny {
		t.Fatalf("%+v", d)
	}
}

// Preconverted parts of the input are shared by concurrent decisions.
func TestPreconvertedInputConcurrent(t *testing.T) {
	e := newEngine(t, Options{Dir: defaultDir, NoWatch: true})
	base := approvalInput(t, "claude-3", seedRequest())
	protocol, agent, known := Preconvert(base["protocol"]), Preconvert(base["agent"]), Preconvert(base["known_references"])
	if _, ok := protocol.(map[string]any); ok {
		t.Fatal("not converted")
	}
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range 50 {
				req := seedRequest()
				want := "approved"
				if (i+j)%3 == 0 {
					req["references"] = []any{"spec-404"}
					want = "rejected"
				}
				in := map[string]any{"request": req, "agent": agent, "protocol": protocol, "authz": base["authz"], "known_references": known}
				d, err := e.Approval(context.Background(), in)
				if err != nil || d.Status != want {
					t.Errorf("%+v %v, want %s", d, err, want)
					return
				}
			}
		}()
	}
	wg.Wait()
	if got := Preconvert(make(chan int)); got == nil {
		t.Error("unconvertible value lost")
	}
}

// TestMessagesDefaultPolicy: data.gateway.messages.deny of the shipped
// policies, through the engine.
func TestMessagesDefaultPolicy(t *testing.T) {
	e := newEngine(t, Options{Dir: defaultDir})
	ctx := context.Background()
	agent := map[string]any{"id": "orch", "capabilities": []any{"read"}}
	recipient := map[string]any{"id": "pp", "supported_verbs": []any{"predict"}}
	msg := func(to any, typ string, payload any) map[string]any {
		return map[string]any{"sender": "orch", "recipient": to, "type": typ, "action": "x", "payload": payload}
	}
	// The gateway gives the plan's verbs resolved (an alias as its verb).
	withVerbs := func(m map[string]any, verbs ...any) map[string]any {
		m["plan_verbs"] = verbs
		return m
	}
	allowed := map[string]any{"allowed": true, "reason": "rule"}
	tests := []struct {
		name  string
		input map[string]any
		want  []string
	}{
		{"allowed", map[string]any{"agent": agent, "message": msg("pp", "request", nil), "recipient": recipient, "authz": allowed}, nil},
		{"rbac", map[string]any{"agent": agent, "message": msg("pp", "request", nil), "recipient": recipient, "authz": map[string]any{"allowed": false, "reason": "no rule"}}, []string{"RBAC: no rule"}},
		{"to itself", map[string]any{"agent": agent, "message": msg("orch", "event", nil), "recipient": recipient, "authz": allowed}, []string{`agent "orch" may not send a message to itself`}},
		{"plan the recipient cannot run", map[string]any{"agent": agent, "message": withVerbs(msg("pp", "request", map[string]any{"plan": []any{[]any{"s", "H", map[string]any{}}}}), "search"), "recipient": recipient, "authz": allowed},
			[]string{`recipient "pp" does not support verb "search" of the plan`}},
	}
	for _, tc := range tests {
		d, err := e.MessagesDeny(ctx, tc.input)
		if err != nil || d.FailClosed || d.Deny != (len(tc.want) > 0) || !slices.Equal(d.Reasons, tc.want) && len(tc.want) > 0 {
			t.Errorf("%s: %+v %v, want %v", tc.name, d, err, tc.want)
		}
	}
}
