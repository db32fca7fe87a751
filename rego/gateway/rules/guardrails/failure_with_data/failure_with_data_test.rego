package gateway.rules.guardrails.failure_with_data_test

import data.gateway.rules.guardrails.failure_with_data as rule

test_no_finding[tc.note] if {
	some tc in [
		{"note": "success with sensitive data", "response": {"status": "success", "data": {"email": "a@b.example"}, "sensitive_data": ["email"]}},
		{"note": "failure with empty data", "response": {"status": "failure", "data": {}, "sensitive_data": []}},
		{"note": "failure with an error code only", "response": {"status": "failure", "data": {"code": "TIMEOUT", "retry": true}, "sensitive_data": []}},
		{"note": "failure from a gateway that does not say", "response": {"status": "failure", "data": {"a": 1}}},
	]
	count(rule.findings) == 0 with input as {"response": tc.response}
}

test_failure_with_sensitive_data_redacts[tc.note] if {
	some tc in [
		{"note": "an e-mail address", "data": {"contact": "a@b.example"}, "found": ["email"]},
		{"note": "a key in a nested name", "data": {"order": {"id": 7}}, "found": ["api_key"]},
	]
	findings := rule.findings with input as {"response": {"status": "failure", "data": tc.data, "message": "m", "sensitive_data": tc.found}}
	findings == {{"reason": "failure with sensitive data: message redacted (SACP)", "redact_message": true}}
}
