package gateway.rules.messages.self_send_test

import data.gateway.rules.messages.self_send as rule

test_self_send[tc.note] if {
	some tc in [
		{"note": "to itself", "recipient": "a", "want": 1},
		{"note": "to another", "recipient": "b", "want": 0},
		{"note": "broadcast", "recipient": null, "want": 0},
	]
	deny := rule.deny with input as {"message": {"sender": "a", "recipient": tc.recipient}}
	count(deny) == tc.want
}
