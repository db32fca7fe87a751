package policy

import "context"

// PointMCP is data.gateway.mcp.decision, as named in ShadowEvent.Point.
const PointMCP = "mcp.decision"

// MCPDecision is data.gateway.mcp.decision: what the gateway does with an
// agent's MCP request (docs/mcp.md, "Writing tool policies").
type MCPDecision struct {
	// Decision is allow, deny or escalate (a person decides, and an
	// approval lets the same call through once).
	Decision string
	// Reason says why; the agent reads it in a denial or an escalation.
	Reason string

	DecisionID string
	Revision   string
	FailClosed bool
	Error      string
}

// The values of MCPDecision.Decision.
const (
	MCPAllow    = "allow"
	MCPDeny     = "deny"
	MCPEscalate = "escalate"
)

// MCP evaluates data.gateway.mcp.decision for an agent's MCP request; input
// is {agent, server, method, tool: {name, annotations, description},
// arguments, authz: {allowed, reason}} (resource or prompt in place of tool
// for those methods). Failing closed (an error, undefined, a value of
// another shape) denies; the error follows the rule of Approval.
func (e *Engine) MCP(ctx context.Context, input map[string]any) (MCPDecision, error) {
	in, out, err := e.evaluate(ctx, ptMCP, input)
	d := mcpFrom(out)
	e.afterLive(ptMCP, in, out, mcpSummary(d))
	return d, err
}

var mcpDecisions = map[string]bool{MCPAllow: true, MCPDeny: true, MCPEscalate: true}

func mcpFrom(out outcome) MCPDecision {
	d := MCPDecision{DecisionID: out.id, Revision: out.revision}
	err := out.err
	if err == nil {
		err = decodeMCP(out.value, &d)
	}
	if err != nil {
		rule, msg := failCause(out, err)
		d = MCPDecision{Decision: MCPDeny, Reason: "the MCP policy could not decide (fail closed): " + msg,
			DecisionID: out.id, Revision: out.revision, FailClosed: true, Error: rule + ": " + msg}
	}
	return d
}

func decodeMCP(v any, d *MCPDecision) error {
	m, ok := v.(map[string]any)
	if !ok {
		return badShape("mcp decision is %s, want an object", kind(v))
	}
	var err error
	if d.Decision, err = reqString(m, "decision"); err != nil {
		return err
	}
	if !mcpDecisions[d.Decision] {
		return badShape("mcp decision %q is not allow, deny or escalate", d.Decision)
	}
	d.Reason, err = optString(m, "reason")
	return err
}

func mcpSummary(d MCPDecision) summary {
	text := d.Decision
	if d.Reason != "" {
		text += " [" + d.Reason + "]"
	}
	return summary{key: d.Decision, text: text, failClosed: d.FailClosed, cause: d.Error}
}
