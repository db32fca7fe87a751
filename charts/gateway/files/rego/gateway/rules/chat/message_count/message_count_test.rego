package gateway.rules.chat.message_count_test

import data.gateway.rules.chat.message_count as rule

_messages(n) := [{"role": "user", "content": "x"} | some _ in numbers.range(1, n)]

test_conversations_up_to_the_limit_pass[tc.note] if {
	some tc in [
		{"note": "one", "n": 1},
		{"note": "at the limit", "n": 1000},
	]
	count(rule.deny) == 0 with input as {"request": {"messages": _messages(tc.n)}}
}

test_runaway_conversations_are_denied[tc.note] if {
	some tc in [
		{"note": "one over", "n": 1001},
		{"note": "far over", "n": 5000},
	]
	deny := rule.deny with input as {"request": {"messages": _messages(tc.n)}}
	deny == {sprintf("the conversation has %d messages, over the limit of 1000", [tc.n])}
}
