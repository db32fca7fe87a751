package gateway.chat_test

import data.gateway.chat

_agent := {"id": "claude-3", "type": "code-generator"}

test_ordinary_requests_are_allowed[tc.note] if {
	some tc in [
		{"note": "one message", "messages": [{"role": "user", "content": "hi"}]},
		{"note": "with a system prompt", "messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"}]},
		{"note": "empty list", "messages": []},
	]
	count(chat.deny) == 0 with input as {"agent": _agent, "model": "mock-1", "request": {"model": "mock-1", "messages": tc.messages}}
}

test_malformed_requests_are_denied[tc.note] if {
	some tc in [
		{"note": "no request", "input": {"agent": _agent, "model": "mock-1"}, "want": "input.request must be the chat completion request object"},
		{"note": "no messages", "input": {"agent": _agent, "model": "mock-1", "request": {"model": "mock-1"}}, "want": "request.messages must be an array"},
		{"note": "messages not a list", "input": {"agent": _agent, "request": {"messages": "hi"}}, "want": "request.messages must be an array"},
	]
	deny := chat.deny with input as tc.input
	deny == {tc.want}
}

test_rule_reasons_are_collected if {
	messages := [{"role": "user", "content": "x"} | some _ in numbers.range(1, 1001)]
	deny := chat.deny with input as {"agent": _agent, "model": "mock-1", "request": {"messages": messages}}
	deny == {"the conversation has 1001 messages, over the limit of 1000"}
}
