package policy

import (
	"context"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// A decision is input-free only when nothing it can reach reads the input
// or the clock: then its value is the same for every request.
func TestInputFree(t *testing.T) {
	const chat = "data.gateway.chat.deny"
	tests := []struct {
		note    string
		modules map[string]string
		want    bool
	}{
		{"an empty set", map[string]string{"c": "package gateway.chat\ndeny := set()"}, true},
		{"constant reasons", map[string]string{"c": "package gateway.chat\ndeny contains \"closed for maintenance\" if data.gateway.flags.maintenance\n",
			"f": "package gateway.flags\nmaintenance := true"}, true},
		{"reads input", map[string]string{"c": "package gateway.chat\ndeny contains \"x\" if input.request.model == \"m\""}, false},
		{"input as a whole", map[string]string{"c": "package gateway.chat\ndeny contains \"x\" if count(object.keys(input)) > 9"}, false},
		{"rule packages, all constant", map[string]string{
			"c": "package gateway.chat\nimport data.gateway.rules.chat as rules\ndeny contains r if some r in rules[_].deny",
			"a": "package gateway.rules.chat.a\ndeny := {\"a\"} if false",
			"b": "package gateway.rules.chat.b\ndeny := set()",
		}, true},
		{"one rule package reads input", map[string]string{
			"c": "package gateway.chat\nimport data.gateway.rules.chat as rules\ndeny contains r if some r in rules[_].deny",
			"a": "package gateway.rules.chat.a\ndeny := set()",
			"b": "package gateway.rules.chat.b\ndeny contains \"b\" if input.model == \"x\"",
		}, false},
		{"a function reads input", map[string]string{"c": "package gateway.chat\nf(x) := x if input.on\ndeny contains \"x\" if f(1) == 1"}, false},
		{"input passed to a function", map[string]string{"c": "package gateway.chat\nf(x) := x\ndeny contains \"x\" if f(input.a) == 1"}, false},
		{"the clock", map[string]string{"c": "package gateway.chat\ndeny contains \"night\" if time.now_ns() < 0"}, false},
		{"random", map[string]string{"c": "package gateway.chat\ndeny contains \"unlucky\" if rand.intn(\"d\", 6) == 0"}, false},
		{"an else branch reads input", map[string]string{"c": "package gateway.chat\nv := 1 if false else := input.x\ndeny contains \"x\" if v == 2"}, false},
		{"no rules at all", map[string]string{"c": "package gateway.other\nx := 1"}, false},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			mods := map[string]*ast.Module{}
			for name, src := range tc.modules {
				mods[name] = ast.MustParseModuleWithOpts(src, ast.ParserOptions{RegoVersion: ast.RegoV1})
			}
			c := ast.NewCompiler()
			if c.Compile(mods); c.Failed() {
				t.Fatal(c.Errors)
			}
			if got := inputFree(c, chat); got != tc.want {
				t.Errorf("inputFree = %v, want %v", got, tc.want)
			}
		})
	}
}

// An input-free decision is computed when the policies load: every request
// gets that value (with its own decision id) without an evaluation, and a
// reload to a policy that reads the input evaluates again.
func TestInputFreeDecisionSkipsEvaluation(t *testing.T) {
	dir := t.TempDir()
	write(t, dir, "chat.rego", "package gateway.chat\ndeny contains \"closed for maintenance\" if data.gateway.flags.maintenance\n")
	write(t, dir, "flags.rego", "package gateway.flags\nmaintenance := true\n")
	e := newEngine(t, Options{Dir: dir, NoWatch: true})
	if e.live.Load().constant[ptChat] == nil {
		t.Fatal("the input-free chat decision was not computed at load")
	}
	ctx := context.Background()
	in := benchChatInput()
	a, err := e.ChatDeny(ctx, in)
	b, _ := e.ChatDeny(ctx, map[string]any{"request": "anything"})
	if err != nil || !a.Deny || len(a.Reasons) != 1 || a.Reasons[0] != "closed for maintenance" || !b.Deny || a.DecisionID == b.DecisionID {
		t.Fatalf("decisions %+v %+v %v", a, b, err)
	}
	if n := testing.AllocsPerRun(100, func() { _, _ = e.ChatDeny(ctx, in) }); n > 40 {
		t.Errorf("%.0f allocations per input-free decision: it was evaluated", n)
	}
	if got := e.Stats().Decisions; got < 2 {
		t.Errorf("decisions counted %d", got)
	}

	write(t, dir, "chat.rego", chatPolicy("asked to"))
	if err := e.Reload(); err != nil {
		t.Fatal(err)
	}
	if e.live.Load().constant[ptChat] != nil {
		t.Fatal("a decision that reads the input was kept as a constant")
	}
	if d, _ := e.ChatDeny(ctx, map[string]any{"deny": true}); !d.Deny || d.Reasons[0] != "asked to" {
		t.Fatalf("after reload %+v", d)
	}
	if d, _ := e.ChatDeny(ctx, map[string]any{"deny": false}); d.Deny {
		t.Fatalf("after reload, not asked %+v", d)
	}
}
