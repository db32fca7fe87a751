package gateway.mcp_test

import data.gateway.mcp

_agent := {"id": "claude-3", "capabilities": ["read"]}

test_decisions[tc.note] if {
	some tc in [
		{"note": "a listed tool is allowed", "method": "tools/call", "allowed": true, "annotations": {"readOnlyHint": true}, "want": "allow"},
		{"note": "a tool outside mcp_tools is denied", "method": "tools/call", "allowed": false, "annotations": {}, "want": "deny"},
		{"note": "outside mcp_tools it is not listed either", "method": "tools/list", "allowed": false, "annotations": {}, "want": "deny"},
		{"note": "no authz is no permission", "method": "tools/call", "allowed": null, "annotations": {}, "want": "deny"},
		{"note": "a destructive tool escalates", "method": "tools/call", "allowed": true, "annotations": {"destructiveHint": true}, "want": "escalate"},
		{"note": "a destructive tool outside mcp_tools is denied, not escalated", "method": "tools/call", "allowed": false, "annotations": {"destructiveHint": true}, "want": "deny"},
		{"note": "a destructive tool is listed", "method": "tools/list", "allowed": true, "annotations": {"destructiveHint": true}, "want": "allow"},
		{"note": "destructiveHint false is not destructive", "method": "tools/call", "allowed": true, "annotations": {"destructiveHint": false}, "want": "allow"},
		{"note": "a string is not true", "method": "tools/call", "allowed": true, "annotations": {"destructiveHint": "true"}, "want": "allow"},
		{"note": "no annotations", "method": "tools/call", "allowed": true, "annotations": null, "want": "allow"},
		{"note": "a resource read is allowed", "method": "resources/read", "allowed": true, "annotations": {}, "want": "allow"},
		{"note": "a prompt is allowed", "method": "prompts/get", "allowed": true, "annotations": {}, "want": "allow"},
		{"note": "an unknown method is denied", "method": "sampling/createMessage", "allowed": true, "annotations": {}, "want": "deny"},
		{"note": "no method is denied", "method": null, "allowed": true, "annotations": {}, "want": "deny"},
	]
	d := mcp.decision with input as {
		"agent": _agent, "server": "files", "method": tc.method, "arguments": {"path": "a.txt"},
		"tool": {"name": "delete_file", "description": "Deletes a file.", "annotations": tc.annotations},
		"authz": {"allowed": tc.allowed, "reason": ""},
	}
	d.decision == tc.want
	is_string(d.reason)
}

test_denial_names_the_tool_agent_and_server if {
	d := mcp.decision with input as {"agent": _agent, "server": "files", "method": "tools/call", "tool": {"name": "rm"}, "authz": {"allowed": false}}
	d.reason == `tool "rm" of server "files" is not in agent "claude-3"'s mcp_tools`
}

test_empty_input_is_denied if {
	mcp.decision.decision == "deny" with input as {}
}
