package policy

import (
	"context"
	"fmt"
	"sync"
	"testing"
)

// TestMemoOnlyForFixedPaths: an MCP residual is remembered by what it
// reads only when it reads the input at fixed member paths; one that reads
// the input as a whole or a member chosen at run time is evaluated per
// request. Either way the differential corpus decides as full evaluation
// does (a remembered value never stands for a request it does not fit,
// such as one whose read member is an object, or is inside the arguments).
func TestMemoOnlyForFixedPaths(t *testing.T) {
	for _, tc := range []struct {
		name, rule string
		memo       bool
	}{
		{"tool name", `_outcomes contains {"decision": "deny", "reason": input.tool.name} if input.tool.name != "read_file"
_outcomes contains {"decision": "allow", "reason": ""} if input.tool.name == "read_file"`, true},
		{"object.get paths", `_outcomes contains {"decision": "escalate", "reason": object.get(input, ["tool", "name"], "")} if {
	object.get(input, ["tool", "annotations", "readOnlyHint"], false) != true
}
_outcomes contains {"decision": "allow", "reason": object.get(input, "method", "")} if {
	object.get(input, ["tool", "annotations", "readOnlyHint"], false) == true
}`, true},
		{"arguments", `_outcomes contains {"decision": "deny", "reason": "a.txt"} if input.arguments.path == "a.txt"
_outcomes contains {"decision": "allow", "reason": ""} if not input.arguments.path == "a.txt"`, true},
		{"annotations as a whole", `_outcomes contains {"decision": "deny", "reason": "annotated"} if count(object.get(input, ["tool", "annotations"], {})) > 0
_outcomes contains {"decision": "allow", "reason": ""} if count(object.get(input, ["tool", "annotations"], {})) == 0`, true},
		{"the whole input", `_outcomes contains {"decision": "deny", "reason": "big"} if count(input) > 4
_outcomes contains {"decision": "allow", "reason": ""} if count(input) <= 4`, false},
		{"a member chosen at run time", `_outcomes contains {"decision": "deny", "reason": k} if {
	some k, _ in input.tool
	startswith(k, "desc")
}
_outcomes contains {"decision": "allow", "reason": ""} if {
	not input.tool.description
	not input.tool.descr
}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeChatPolicy(t, dir, nil)
			write(t, dir, "mcp/mcp.rego", "package gateway.mcp\n\n"+tc.rule+"\n\ndecision := d if {\n\tsome d in _outcomes\n}\n")
			mcpDecisionsAgree(t, dir)
			e := newEngine(t, Options{Dir: dir, NoWatch: true})
			in := map[string]any{"agent": diffAgents()[0], "server": "fs", "method": "tools/call",
				"tool": map[string]any{"name": "read_file"}, "authz": AuthzInput(Authz{Allowed: true})}
			_, _ = e.MCP(context.Background(), in)
			p := e.live.Load()
			p.fast.pending.Wait()
			if fp := p.fastPathFor(ptMCP, in); (fp.memo != nil) != tc.memo {
				t.Errorf("remembered: got %v, want %v (fast path %d)", fp.memo != nil, tc.memo, fp.kind)
			}
		})
	}
}

// TestMemoConcurrent: decisions of one agent at once, some remembering and
// some reading what was remembered, agree with full evaluation (go test
// -race checks the memo's sharing).
func TestMemoConcurrent(t *testing.T) {
	fast := newEngine(t, Options{Dir: defaultDir, NoWatch: true})
	full := newEngine(t, Options{Dir: defaultDir, NoWatch: true, noPartial: true})
	agent := diffAgents()[0]
	ctx := context.Background()
	inputs := make([]map[string]any, 0, 8)
	for i, name := range []string{"read_file", "rm", "read_file", "ls", "rm", "cat", "ls", "read_file"} {
		destructive := mustJSONInput(`{"destructiveHint":` + map[bool]string{true: "true", false: "false"}[name == "rm"] + `}`)
		inputs = append(inputs, map[string]any{"agent": agent, "server": "fs", "method": "tools/call",
			"tool": map[string]any{"name": name, "annotations": destructive}, "authz": AuthzInput(Authz{Allowed: i%3 != 0}),
			"arguments": RawJSON(`{"path":"a.txt"}`)})
	}
	if _, err := fast.MCP(ctx, inputs[0]); err != nil {
		t.Fatal(err)
	}
	fast.live.Load().fast.pending.Wait()
	want := make([]MCPDecision, len(inputs))
	for i, in := range inputs {
		want[i], _ = full.MCP(ctx, in)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 64)
	for g := range 8 {
		wg.Go(func() {
			for j := range 50 {
				i := (g + j) % len(inputs)
				got, _ := fast.MCP(ctx, inputs[i])
				if got.Decision != want[i].Decision || got.Reason != want[i].Reason {
					errs <- fmt.Sprintf("input %d: fast %s %q, full %s %q", i, got.Decision, got.Reason, want[i].Decision, want[i].Reason)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}
