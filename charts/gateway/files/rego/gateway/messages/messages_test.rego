package gateway.messages_test

import data.gateway.messages

_agent := {"id": "orch_1", "type": "orchestrator", "capabilities": ["read"]}

_message := {
	"format": "acl", "id": "msg_001", "type": "request", "priority": "high",
	"sender": "orch_1", "recipient": "planner_1", "action": "plan_workflow",
	"workflow_id": "wf_abc", "payload_bytes": 80,
}

_recipient := {"id": "planner_1", "type": "planner", "capabilities": ["read"]}

test_allowed_message_has_no_reasons if {
	count(messages.deny) == 0 with input as {"agent": _agent, "message": _message, "recipient": _recipient, "authz": {"allowed": true, "reason": "ok"}}
}

test_refusals[tc.note] if {
	some tc in [
		{"note": "rbac refused", "input": {"agent": _agent, "message": _message, "recipient": _recipient, "authz": {"allowed": false, "reason": "no rule"}}, "want": "RBAC: no rule"},
		{"note": "no authz fails closed", "input": {"agent": _agent, "message": _message, "recipient": _recipient}, "want": "RBAC: not allowed"},
		{"note": "no message", "input": {"agent": _agent, "authz": {"allowed": true}}, "want": "input.message must be the envelope object"},
		{"note": "no agent", "input": {"message": _message, "authz": {"allowed": true}}, "want": "input.agent must be the sender's registry entry"},
	]
	deny := messages.deny with input as tc.input
	tc.want in deny
}
