package proxy

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/policy"
)

// TestRuntimeAgentInputFollowsItsEntry: a run-time agent (the admin API's,
// which the store hands out afresh on every lookup) keeps one converted
// document while its entry is unchanged, so that the engine recognises it
// and settles its decisions once; a changed entry is converted again and
// decided by what it says now.
func TestRuntimeAgentInputFollowsItsEntry(t *testing.T) {
	dir := t.TempDir()
	for name, src := range map[string]string{
		"chat/chat.rego": "package gateway.chat\n\nimport data.gateway.rules.chat as rules\n\ndeny contains reason if {\n\tsome reason in rules[_].deny\n}\n",
		"rules/r.rego":   "package gateway.rules.chat.r\n\ndeny contains \"no reviewers\" if input.agent.type == \"reviewer\"\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e, err := policy.New(policy.Options{Dir: dir, NoWatch: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	inputs := NewAgentInputs(map[string]*roster.Agent{"file": {ID: "file", Type: "reviewer"}})
	lookup := func(typ string) *roster.Agent { // a fresh entry, as the store returns
		return &roster.Agent{ID: "rt", Type: typ, Capabilities: []string{"read"}, Models: []string{"m"}}
	}
	first := inputs.of(lookup("coder"))
	if again := inputs.of(lookup("coder")); again != first {
		t.Fatalf("an unchanged run-time agent was converted again")
	}
	deny := func(a *roster.Agent) bool {
		d, err := e.ChatDeny(context.Background(), map[string]any{"agent": inputs.of(a), "model": "m", "dialect": "chat",
			"request": policy.ChatRequest{Body: []byte(`{"messages":[{"role":"user","content":"hi"}]}`), Messages: 1}})
		if err != nil {
			t.Fatal(err)
		}
		return d.Deny
	}
	for range 3 {
		if deny(lookup("coder")) {
			t.Fatal("coder denied")
		}
	}
	if !deny(lookup("reviewer")) {
		t.Fatal("the agent became a reviewer: want its requests denied")
	}
	if inputs.of(lookup("reviewer")) == first {
		t.Fatal("a changed entry kept its old document")
	}
	if !deny(&roster.Agent{ID: "file"}) {
		t.Fatal("a configured agent's document is the one converted at startup")
	}
}
