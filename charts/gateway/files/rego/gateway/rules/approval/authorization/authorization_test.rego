package gateway.rules.approval.authorization_test

import data.gateway.fixtures_test as fixtures
import data.gateway.rules.approval.authorization as rule

test_authorized_requests_pass[tc.note] if {
	some tc in [
		{"note": "allowed, same agent", "input": fixtures.input_for(fixtures.request)},
		{"note": "allowed, no agent_id in the request", "input": fixtures.without("agent_id")},
	]
	count(rule.violations) == 0 with input as tc.input
}

test_unauthorized_requests_violate[tc.note] if {
	some tc in [
		{
			"note": "rbac denied",
			"input": object.union(fixtures.input_for(fixtures.request), {"authz": {"allowed": false, "reason": `agent "copilot-2" lacks capability "write"`}}),
			"want": `agent "copilot-2" lacks capability "write"`,
		},
		{
			"note": "no verdict",
			"input": object.remove(fixtures.input_for(fixtures.request), ["authz"]),
			"want": "no RBAC verdict in the input",
		},
		{
			"note": "allowed is not true",
			"input": object.union(fixtures.input_for(fixtures.request), {"authz": {"allowed": "yes", "reason": "?"}}),
			"want": "?",
		},
		{
			"note": "acting as another agent",
			"input": fixtures.with_fields({"agent_id": "gemini-pro"}),
			"want": `request.agent_id "gemini-pro" is not the authenticated agent "claude-3"`,
		},
	]
	violations := rule.violations with input as tc.input
	some v in violations
	v.rule == "authorization"
	v.description == tc.want
}
