package gateway.rules.messages.recipient_capability_test

import data.gateway.rules.messages.recipient_capability as rule

_recipient := {"id": "pp", "supported_verbs": ["predict", "rank"]}

# The gateway gives the plan's verbs resolved (plan_verbs); the raw plan
# stays in the payload, aliases and all.
_plan(verbs) := {"type": "request", "payload": {"plan": [[v, "T", {}] | some v in verbs]}, "plan_verbs": verbs}

test_plans[tc.note] if {
	some tc in [
		{"note": "supported verbs", "message": _plan(["predict", "rank"]), "want": set()},
		{"note": "unsupported verb", "message": _plan(["predict", "search"]), "want": {`recipient "pp" does not support verb "search" of the plan`}},
		{"note": "join needs no support", "message": _plan(["predict", "join"]), "want": set()},
		{"note": "an alias arrives resolved", "message": {"type": "request", "payload": {"plan": [["r", "RANK", {}]]}, "plan_verbs": ["rank"]}, "want": set()},
		{"note": "no plan", "message": {"type": "request", "payload": {"operation": "update"}, "plan_verbs": []}, "want": set()},
		{"note": "events are not checked", "message": {"type": "event", "payload": {"plan": [["search", "H", {}]]}, "plan_verbs": ["search"]}, "want": set()},
	]
	deny := rule.deny with input as {"message": tc.message, "recipient": _recipient}
	deny == tc.want
}
