package gateway.spawn_test

import data.gateway.spawn

_message := {
	"g": "SPAWN_AGENT",
	"ctx": {"missing_capability": "visa_requirements_check"},
	"plan": [["instantiate", "VISA_AGENT", {"tool": "VISA_QUERY", "verb": "check"}]],
	"out_fmt": "raw",
}

test_spawner_is_approved if {
	d := spawn.decision with input as {"agent": {"id": "orchestrator", "capabilities": ["read", "spawn"]}, "message": _message}
	d.status == "approved"
}

test_decisions[tc.note] if {
	some tc in [
		{"note": "no capability escalates", "agent": {"id": "claude-3", "capabilities": ["read", "write"]}, "message": _message, "want": "escalated"},
		{"note": "no agent escalates", "agent": null, "message": _message, "want": "escalated"},
		{"note": "wrong message is rejected", "agent": {"id": "o", "capabilities": ["spawn"]}, "message": {"g": "PLAN"}, "want": "rejected"},
		{"note": "no message is rejected", "agent": {"id": "o", "capabilities": ["spawn"]}, "message": null, "want": "rejected"},
		{"note": "an endpoint needs a person even for a spawner", "agent": {"id": "o", "capabilities": ["spawn"]}, "message": _message, "spawn": {"endpoint": "http://169.254.169.254/"}, "want": "escalated"},
		{"note": "an empty endpoint is none", "agent": {"id": "o", "capabilities": ["spawn"]}, "message": _message, "spawn": {"endpoint": ""}, "want": "approved"},
	]
	d := spawn.decision with input as {"agent": tc.agent, "message": tc.message, "spawn": object.get(tc, "spawn", {})}
	d.status == tc.want
	count(d.reasons) == 1
}

test_goal_is_g if {
	d := spawn.decision with input as {"agent": {"id": "orch", "capabilities": ["spawn"]}, "message": {"goal": "SPAWN_AGENT"}, "spawn": {"endpoint": ""}}
	d.status == "approved"
}
