# METADATA
# title: MCP policy
# description: |
#   data.gateway.mcp.decision decides an agent's MCP request through
#   /mcp/{server} (docs/mcp.md). Input: {agent (its registry entry), server,
#   method, tool: {name, annotations, description} (tools/call, and each tool
#   of a tools/list answer), resource: {uri} (resources/read, subscribe and
#   unsubscribe), prompt: {name} (prompts/get), arguments, authz: {allowed,
#   reason}}. For a tool, authz.allowed says whether the agent's mcp_tools
#   globs name it; for the other methods it is true (the agent has the
#   server). The annotations are the server's own, from the tools/list the
#   gateway reads with its credentials, never the agent's.
#   Default: a tool outside mcp_tools is denied (and not listed); a call of a
#   tool annotated destructiveHint: true goes to a person, whose approval
#   lets that exact call through once; other tools, and the read methods of
#   resources and prompts, are allowed. Anything else is denied.
package gateway.mcp

# The methods that read resources and prompts: allowed by default.
_read_methods := {
	"resources/list", "resources/templates/list", "resources/read",
	"resources/subscribe", "resources/unsubscribe", "prompts/list", "prompts/get",
}

_tool_methods := {"tools/list", "tools/call"}

_method := object.get(input, "method", "")

_tool_name := object.get(input, ["tool", "name"], "")

# A tool the server says may destroy: MCP's destructiveHint, read only when
# the server set it to true (MCP's own default, true for a tool that is not
# readOnlyHint, would send every unannotated tool to a person; see
# docs/mcp.md for a policy that does).
_destructive if object.get(input, ["tool", "annotations", "destructiveHint"], false) == true

# The agent's mcp_tools name the tool (authz.allowed); anything but true,
# absent included, is no permission.
_listed if object.get(input, ["authz", "allowed"], false) == true

_known_method if _method in (_read_methods | _tool_methods)

_unlisted_tool if {
	_method in _tool_methods
	not _listed
}

_escalated if {
	_method == "tools/call"
	_listed
	_destructive
}

# The outcomes, in order of precedence, each ruling out those before it:
# exactly one holds for any input. Written without else so that the
# gateway can settle the policy per agent ahead of a request (an else chain
# is evaluated in full on every call).
_outcomes contains {
	"decision": "deny",
	"reason": sprintf("method %q is not allowed by the MCP policy", [_method]),
} if {
	not _known_method
}

_outcomes contains {
	"decision": "deny",
	"reason": sprintf("tool %q of server %q is not in agent %q's mcp_tools", [_tool_name, object.get(input, "server", ""), object.get(input, ["agent", "id"], "")]),
} if {
	_unlisted_tool
}

_outcomes contains {
	"decision": "escalate",
	"reason": sprintf("tool %q is annotated destructiveHint: true: a person must approve this call", [_tool_name]),
} if {
	_escalated
}

_outcomes contains {"decision": "allow", "reason": ""} if {
	_known_method
	not _unlisted_tool
	not _escalated
}

# METADATA
# title: Decision
# description: "{decision: allow|deny|escalate, reason}"
# entrypoint: true
decision := d if {
	some d in _outcomes
}
