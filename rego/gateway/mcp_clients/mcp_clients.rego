# METADATA
# title: MCP clients policy
# description: |
#   data.gateway.mcp_clients.allow decides which agent identities a person
#   may let their MCP client (an IDE, a desktop app) act as, when they
#   authorize it through the gateway's authorization server. Input:
#   {person: {subject, email, groups, admin, reviewer, team_owner,
#   team_reviewer}, agent (the agent's policy document), server (the MCP
#   server), client: {id, name, redirect_host}}; the client's name is
#   chosen by whoever registered it: never trust it.
#   Default: admins any agent; a team's owners and reviewers the agents of
#   that team; anybody else none.
package gateway.mcp_clients

# METADATA
# title: Allow
# description: true lets the person's client act as the agent; anything else refuses it.
# entrypoint: true
default allow := false

allow if input.person.admin

allow if {
	input.agent.team != ""
	input.agent.team in input.person.team_owner
}

allow if {
	input.agent.team != ""
	input.agent.team in input.person.team_reviewer
}
