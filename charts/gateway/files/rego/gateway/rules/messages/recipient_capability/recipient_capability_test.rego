package gateway.rules.messages.recipient_capability_test

import data.gateway.rules.messages.recipient_capability as rule

_recipient := {"id": "pp", "supported_verbs": ["predict", "rank"]}

_plan(steps) := {"type": "request", "payload": {"plan": steps}}

test_plans[tc.note] if {
	some tc in [
		{"note": "supported verbs", "message": _plan([["predict", "PRC_EST", {}], ["rank", "RANK", {}]]), "want": set()},
		{"note": "unsupported verb", "message": _plan([["predict", "PRC_EST", {}], ["search", "H_API", {}]]), "want": {`recipient "pp" does not support verb "search" of the plan`}},
		{"note": "inside a parallel group", "message": _plan([{"parallel": [["predict", "P", {}], ["fetch", "F", {}]]}, ["join", "MERGE", {}]]), "want": {`recipient "pp" does not support verb "fetch" of the plan`}},
		{"note": "no plan", "message": {"type": "request", "payload": {"operation": "update"}}, "want": set()},
		{"note": "events are not checked", "message": {"type": "event", "payload": {"plan": [["search", "H", {}]]}}, "want": set()},
	]
	deny := rule.deny with input as {"message": tc.message, "recipient": _recipient}
	deny == tc.want
}
