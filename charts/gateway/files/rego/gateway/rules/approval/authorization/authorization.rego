# METADATA
# title: authorization
# description: |
#   The RBAC verdict (input.authz, from casbin: capability for the action,
#   target type in allowed_targets) must allow the request, and the request
#   must be made by the agent it names. A missing verdict denies.
package gateway.rules.approval.authorization

_allowed if input.authz.allowed == true

# METADATA
# title: Not authorized
# description: RBAC did not allow the action on the target.
violations contains {
	"rule": "authorization",
	"description": object.get(input, ["authz", "reason"], "no RBAC verdict in the input"),
	"suggestion": "use an action and target type your registry entry allows (GET /agent/capabilities), or ask an operator to extend agents.yaml",
} if {
	not _allowed
}

# METADATA
# title: Identity
# description: request.agent_id, when given, must be the authenticated agent.
violations contains {
	"rule": "authorization",
	"description": sprintf("request.agent_id %q is not the authenticated agent %q", [input.request.agent_id, input.agent.id]),
	"suggestion": "send requests as yourself: agent_id must match your token",
} if {
	input.request.agent_id != input.agent.id
}
