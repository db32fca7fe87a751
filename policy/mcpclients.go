package policy

import "context"

// PointMCPClients is data.gateway.mcp_clients.allow, as named in
// ShadowEvent.Point.
const PointMCPClients = "mcp_clients.allow"

// MCPClient evaluates data.gateway.mcp_clients.allow: whether a person
// signed in through the organisation's provider may let their MCP client
// act as an agent at an MCP server (docs/mcp.md). Input is {person:
// {subject, email, groups, admin, reviewer, team_owner, team_reviewer},
// agent, server, client: {id, name, redirect_host}}. A boolean decision
// like workflow.allow: only true allows, and failing closed refuses.
func (e *Engine) MCPClient(ctx context.Context, input map[string]any) (WorkflowDecision, error) {
	return decide(ctx, e, ptMCPClients, input, workflowFrom, workflowSummary)
}
