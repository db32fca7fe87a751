package policy

import (
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sacpgw/gateway/internal/roster"
)

// modelFile is the shipped model; the built-in DefaultRBACModel must
// decide the same.
const modelFile = "../config/rbac_model.conf"

func TestRBACAuthorize(t *testing.T) {
	agents := testAgents()
	agents["builder"] = &roster.Agent{ID: "builder", Capabilities: []string{"write", "write"}, AllowedTargets: []string{"test", "docs"}}
	agents["nobody"] = &roster.Agent{ID: "nobody"}
	tests := []struct {
		agent, action, target string
		allowed               bool
		reason                string
	}{
		{"claude-3", "create", "design", true, `agent "claude-3" may create design (capability "write")`},
		{"claude-3", "modify", "architecture", true, ""},
		{"claude-3", "DELETE", "code", true, ""},
		{"claude-3", "read", "code", true, `capability "read"`},
		{"claude-3", "query", "", true, `agent "claude-3" may query (capability "read")`},
		{"claude-3", "create", "test", false, `target type "test" is not in allowed_targets of agent "claude-3" ([architecture, design, code])`},
		{"claude-3", "create", "docs", false, `target type "docs" is not in allowed_targets`},
		// reader creating
		{"copilot-2", "create", "code", false, `agent "copilot-2" lacks capability "write" required for action "create" (has [read, suggest])`},
		{"copilot-2", "read", "code", true, ""},
		{"copilot-2", "query", "", true, ""},
		{"copilot-2", "read", "design", false, `target type "design" is not in allowed_targets of agent "copilot-2" ([code])`},
		// [all]
		{"gemini-pro", "read", "architecture", true, ""},
		{"gemini-pro", "read", "docs", true, ""},
		{"gemini-pro", "read", "test", true, ""},
		{"gemini-pro", "modify", "docs", false, `lacks capability "write"`},
		{"gemini-pro", "read", "wiki", false, `unknown target type "wiki"`},
		{"gemini-pro", "read", "all", false, `unknown target type "all"`},
		{"gemini-pro", "read", "*", false, `unknown target type "*"`},
		{"builder", "create", "test", true, ""},
		{"builder", "query", "", false, `lacks capability "read"`},
		{"builder", "create", "code", false, "not in allowed_targets"},
		{"nobody", "read", "code", false, `lacks capability "read" required for action "read" (has none)`},
		{"claude-3", "read", "", false, `action "read" needs a target type`},
		{"claude-3", "query", "design", true, ""},
		{"claude-3", "rename", "code", false, `unknown action "rename"`},
		{"mallory", "read", "code", false, `agent "mallory" is not registered`},
		{"", "read", "code", false, "is not registered"},
	}
	for _, model := range []string{"", modelFile} {
		r, err := NewRBAC(model, agents, []string{"security-lead"})
		if err != nil {
			t.Fatalf("NewRBAC(%q): %v", model, err)
		}
		for _, tc := range tests {
			name := model + ":" + tc.agent + "/" + tc.action + "/" + tc.target
			got := r.Authorize(tc.agent, tc.action, tc.target)
			if got.Allowed != tc.allowed {
				t.Errorf("%s: allowed %v, want %v (%s)", name, got.Allowed, tc.allowed, got.Reason)
			}
			if got.Reason == "" || !strings.Contains(got.Reason, tc.reason) {
				t.Errorf("%s: reason %q, want it to contain %q", name, got.Reason, tc.reason)
			}
		}
	}
}

func TestRBACPeople(t *testing.T) {
	tests := []struct {
		role, action string
		want         bool
	}{
		{"admin", "decide", true},
		{"admin", "list", true},
		{"admin", "configure", true},
		{"reviewer", "decide", true},
		{"reviewer", "list", true},
		{"reviewer", "read", true},
		{"reviewer", "configure", false},
		{"security-lead", "decide", true},
		{"security-lead", "delete", false},
		{"stranger", "decide", false},
		{"claude-3", "decide", false},
		{"", "list", false},
	}
	for _, model := range []string{"", modelFile} {
		r, err := NewRBAC(model, testAgents(), []string{"security-lead"})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range tests {
			if got := r.AuthorizePerson(tc.role, tc.action); got != tc.want {
				t.Errorf("%s: %s %s = %v, want %v", model, tc.role, tc.action, got, tc.want)
			}
		}
	}
	// Agents are not people: an agent id is no role.
	r, _ := NewRBAC("", testAgents(), nil)
	if r.AuthorizePerson("reviewer", "decide") != true || r.AuthorizePerson("security-lead", "decide") {
		t.Error("reviewer list not honoured")
	}
}

func TestRBACErrors(t *testing.T) {
	if _, err := NewRBAC("testdata/nope.conf", testAgents(), nil); err == nil || !strings.Contains(err.Error(), "testdata/nope.conf") {
		t.Errorf("missing model: %v", err)
	}
	if _, err := NewRBAC("", map[string]*roster.Agent{"x": nil}, nil); err == nil {
		t.Error("nil agent accepted")
	}
	// No agents at all is a valid (deny-all) policy.
	r, err := NewRBAC("", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r.Authorize("claude-3", "read", "code").Allowed {
		t.Error("allowed without agents")
	}
}

func TestActionFor(t *testing.T) {
	for _, tc := range []struct{ rt, act, want string }{
		{"QUERY", "", "query"},
		{"query", "read", "query"},
		{"APPROVAL", "Create", "create"},
		{"VALIDATE", "delete", "delete"},
	} {
		if got := ActionFor(tc.rt, tc.act); got != tc.want {
			t.Errorf("ActionFor(%q, %q) = %q, want %q", tc.rt, tc.act, got, tc.want)
		}
	}
	if CapabilityFor("modify") != "write" || CapabilityFor("query") != "read" || CapabilityFor("x") != "" {
		t.Error("CapabilityFor")
	}
}

func TestRBACConcurrent(t *testing.T) {
	r, err := NewRBAC(modelFile, testAgents(), []string{"security-lead"})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 200 {
				if i%2 == 0 && !r.Authorize("claude-3", "create", "design").Allowed {
					t.Error("denied")
					return
				}
				if i%2 == 1 && !r.AuthorizePerson("security-lead", "decide") {
					t.Error("denied")
					return
				}
			}
		}()
	}
	wg.Wait()
}

func TestRBACAuthorizeMessage(t *testing.T) {
	agents := map[string]*roster.Agent{
		"orch":    {ID: "orch", Capabilities: []string{"read", "write"}, AllowedTargets: []string{"all"}, Messages: []roster.MessageRule{{To: []string{"planner"}, Actions: []string{"plan_workflow"}}, {To: []string{"broadcast"}, Actions: []string{"*"}}}},
		"planner": {ID: "planner", Messages: []roster.MessageRule{{To: []string{"*"}, Actions: []string{"plan_complete", "send:x"}}}},
		"mute":    {ID: "mute", Capabilities: []string{"read"}},
	}
	tests := []struct {
		sender, recipient, action string
		allowed                   bool
		reason                    string
	}{
		{"orch", "planner", "plan_workflow", true, `agent "orch" may send "plan_workflow" to agent "planner"`},
		{"orch", "planner", "execute_operation", false, `agent "orch" may not send "execute_operation" to agent "planner"`},
		{"orch", "mute", "plan_workflow", false, "may not send"},
		{"orch", "", "workflow_complete", true, `to everyone (broadcast)`},
		{"planner", "orch", "plan_complete", true, ""},
		{"planner", "mute", "plan_complete", true, ""},
		{"planner", "orch", "plan_workflow", false, ""},
		{"planner", "", "plan_complete", false, "broadcast"},
		{"mute", "orch", "anything", false, ""},
		{"ghost", "orch", "x", false, `agent "ghost" is not registered`},
		// A messages rule grants nothing on approval targets, and
		// approval capabilities grant no message.
		{"orch", "planner", "create", false, ""},
	}
	for _, model := range []string{"", modelFile} {
		r, err := NewRBAC(model, agents, nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range tests {
			got := r.AuthorizeMessage(tc.sender, tc.recipient, tc.action)
			if got.Allowed != tc.allowed || !strings.Contains(got.Reason, tc.reason) {
				t.Errorf("model %q: %s -> %q %s: got %+v, want allowed=%v reason containing %q", model, tc.sender, tc.recipient, tc.action, got, tc.allowed, tc.reason)
			}
		}
		if a := r.Authorize("planner", "read", "code"); a.Allowed {
			t.Errorf("model %q: a messages rule granted an approval action: %+v", model, a)
		}
	}
}

// TestRBACMessageVerdictsCached: repeated questions get the same answers
// from the cache, and the cache stays bounded however many actions agents
// invent.
func TestRBACMessageVerdictsCached(t *testing.T) {
	agents := map[string]*roster.Agent{
		"a": {ID: "a", Messages: []roster.MessageRule{{To: []string{"b"}, Actions: []string{"go"}}}},
		"b": {ID: "b"},
	}
	r, err := NewRBAC("", agents, nil)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if !r.AuthorizeMessage("a", "b", "go").Allowed || r.AuthorizeMessage("a", "b", "stop").Allowed || r.AuthorizeMessage("b", "a", "go").Allowed {
			t.Fatal("cached verdicts differ from the policy")
		}
	}
	for i := range maxMessageVerdicts + 100 {
		r.AuthorizeMessage("a", "b", "x"+strings.Repeat("y", i%7)+string(rune('a'+i%26))+strconv.Itoa(i))
	}
	if n := r.messageCount.Load(); n != maxMessageVerdicts {
		t.Errorf("%d cached verdicts, want the cap %d", n, maxMessageVerdicts)
	}
	if !r.AuthorizeMessage("a", "b", "go").Allowed || r.AuthorizeMessage("a", "b", "new-one").Allowed {
		t.Error("verdicts wrong once the cache is full")
	}
}
