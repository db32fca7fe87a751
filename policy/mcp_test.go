package policy

import (
	"context"
	"errors"
	"testing"
)

// TestMCPDecisionShape: only {decision: allow|deny|escalate, reason}
// decides; anything else denies, failing closed with the cause.
func TestMCPDecisionShape(t *testing.T) {
	cases := []struct {
		note  string
		value any
		err   error
		want  string
		fail  bool
	}{
		{"allow", map[string]any{"decision": "allow", "reason": ""}, nil, MCPAllow, false},
		{"escalate with a reason", map[string]any{"decision": "escalate", "reason": "destructive"}, nil, MCPEscalate, false},
		{"an unknown decision", map[string]any{"decision": "maybe"}, nil, MCPDeny, true},
		{"no decision", map[string]any{"reason": "x"}, nil, MCPDeny, true},
		{"a boolean", true, nil, MCPDeny, true},
		{"a reason that is no string", map[string]any{"decision": "allow", "reason": 1}, nil, MCPDeny, true},
		{"an evaluation error", nil, errors.New("boom"), MCPDeny, true},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			d := mcpFrom(outcome{id: "d1", revision: "r1", value: tc.value, err: tc.err, rule: RulePolicyError})
			if d.Decision != tc.want || d.FailClosed != tc.fail || d.DecisionID != "d1" || d.Revision != "r1" {
				t.Errorf("%+v", d)
			}
		})
	}
}

// TestShippedMCPPolicy: the default policy escalates a destructive tool and
// denies one outside mcp_tools, through the engine.
func TestShippedMCPPolicy(t *testing.T) {
	e := newEngine(t, Options{Dir: "../rego", NoWatch: true})
	in := func(allowed, destructive bool) map[string]any {
		return map[string]any{"agent": map[string]any{"id": "a"}, "server": "files", "method": "tools/call", "arguments": map[string]any{},
			"tool":  map[string]any{"name": "rm", "annotations": map[string]any{"destructiveHint": destructive}},
			"authz": map[string]any{"allowed": allowed}}
	}
	for _, tc := range []struct {
		allowed, destructive bool
		want                 string
	}{{true, false, MCPAllow}, {true, true, MCPEscalate}, {false, true, MCPDeny}} {
		d, err := e.MCP(context.Background(), in(tc.allowed, tc.destructive))
		if err != nil || d.Decision != tc.want || d.FailClosed {
			t.Errorf("allowed %v, destructive %v: %+v %v", tc.allowed, tc.destructive, d, err)
		}
	}
}
