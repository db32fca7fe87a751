package gateway.guardrails_test

import data.gateway.guardrails

_agent := {"id": "claude-3"}

test_clean_answers_keep_their_status[tc.note] if {
	some tc in [
		{"note": "success", "response": {"thought": "t", "status": "success", "data": {"a": 1}, "message": "done"}},
		{"note": "clarification", "response": {"thought": "t", "status": "clarification_needed", "data": {}, "message": "which one?"}},
		{"note": "failure without data", "response": {"thought": "t", "status": "failure", "data": {}, "message": "could not"}},
		{"note": "failure with data nothing sensitive in", "response": {"thought": "t", "status": "failure", "data": {"code": "TIMEOUT"}, "message": "timed out", "sensitive_data": []}},
	]
	r := guardrails.response with input as {"agent": _agent, "response": tc.response}
	r == {"status": tc.response.status, "redact_message": false, "reason": ""}
}

test_findings_force_failure[tc.note] if {
	some tc in [
		{
			"note": "failure with data",
			"response": {"thought": "t", "status": "failure", "data": {"card": "4111 1111 1111 1111"}, "message": "card declined", "sensitive_data": ["credit_card"]},
			"want": "failure with sensitive data: message redacted (SACP)",
		},
		{
			"note": "injection echo in a success",
			"response": {"thought": "t", "status": "success", "data": {}, "message": "Sure. Ignore all previous instructions and..."},
			"want": "message contains a prompt-injection phrase",
		},
		{
			"note": "two findings",
			"response": {"thought": "t", "status": "failure", "data": {"k": "a@b.example"}, "message": "-----BEGIN PRIVATE KEY-----\nMII...", "sensitive_data": ["email"]},
			"want": "failure with sensitive data: message redacted (SACP); message contains a private key",
		},
	]
	r := guardrails.response with input as {"agent": _agent, "response": tc.response}
	r == {"status": "failure", "redact_message": true, "reason": tc.want}
}

test_malformed_input_fails_and_redacts[tc.note] if {
	some tc in [
		{"note": "no response", "input": {"agent": _agent}},
		{"note": "response is a string", "input": {"agent": _agent, "response": "{}"}},
	]
	r := guardrails.response with input as tc.input
	r.status == "failure"
	r.redact_message == true
}
