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
	return decide(ctx, e, ptMCP, input, mcpFrom, mcpSummary)
}

var mcpDecisions = map[string]bool{MCPAllow: true, MCPDeny: true, MCPEscalate: true}

func mcpFrom(out outcome) MCPDecision {
	d := decodeOr(out, decodeMCP, func(rule, msg string) MCPDecision {
		return MCPDecision{Decision: MCPDeny, Reason: "the MCP policy could not decide (fail closed): " + msg, FailClosed: true, Error: rule + ": " + msg}
	})
	d.DecisionID, d.Revision = out.id, out.revision
	return d
}

func decodeMCP(v any) (MCPDecision, error) {
	f := object(v, "mcp decision")
	d := MCPDecision{Decision: f.oneOf("decision", mcpDecisions, "mcp decision", "allow, deny or escalate"), Reason: f.str("reason")}
	return d, f.err
}

func mcpSummary(d MCPDecision) summary {
	text := d.Decision
	if d.Reason != "" {
		text += " [" + d.Reason + "]"
	}
	return summary{key: d.Decision, text: text, failClosed: d.FailClosed, cause: d.Error}
}
