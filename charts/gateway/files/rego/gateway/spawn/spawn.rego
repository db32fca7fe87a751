# METADATA
# title: Spawn policy
# description: |
#   data.gateway.spawn.decision decides a compact SACP SPAWN_AGENT message
#   (POST /registry/spawn). Input: {agent (the requester's registry entry),
#   message, spawn: {agent_name, verb, tool, description, inputs, outputs,
#   missing_capability, endpoint}}. Default: an agent with capability
#   "spawn" may register new agents; a spawn that names an endpoint (the
#   gateway would POST messages to it) and any request from another agent
#   go to a human; a message that is not a SPAWN_AGENT is rejected.
package gateway.spawn

# The message's goal, written g or goal (the gateway refuses a message
# that has both).
_goal := object.get(input, ["message", "g"], object.get(input, ["message", "goal"], ""))

# METADATA
# title: Decision
# description: "{status: approved|rejected|escalated, reasons: [...]}"
# entrypoint: true
decision := {
	"status": "rejected",
	"reasons": ["input.message must be a SPAWN_AGENT message (g: SPAWN_AGENT)"],
} if {
	_goal != "SPAWN_AGENT"
} else := {
	"status": "escalated",
	"reasons": [sprintf("the new agent would receive messages at %q: a person must approve the endpoint", [input.spawn.endpoint])],
} if {
	object.get(input, ["spawn", "endpoint"], "") != ""
} else := {
	"status": "approved",
	"reasons": [sprintf("agent %q has capability \"spawn\"", [input.agent.id])],
} if {
	"spawn" in object.get(input, ["agent", "capabilities"], [])
} else := {
	"status": "escalated",
	"reasons": [sprintf("agent %q lacks capability \"spawn\": a person must approve the new agent", [object.get(input, ["agent", "id"], "")])],
}
