package policy

import (
	"context"
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
