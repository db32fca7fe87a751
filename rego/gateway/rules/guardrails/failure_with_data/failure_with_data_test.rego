package gateway.rules.guardrails.failure_with_data_test

import data.gateway.rules.guardrails.failure_with_data as rule

test_no_finding[tc.note] if {
	some tc in [
		{"note": "success with data", "response": {"status": "success", "data": {"a": 1}}},
		{"note": "failure with empty data", "response": {"status": "failure", "data": {}}},
		{"note": "failure with data not an object", "response": {"status": "failure", "data": "x"}},
	]
	count(rule.findings) == 0 with input as {"response": tc.response}
}

test_failure_with_data_redacts[tc.note] if {
	some tc in [
		{"note": "fallback object", "data": {"raw_output": "The actual raw text"}},
		{"note": "nested data", "data": {"order": {"id": 7}}},
	]
	findings := rule.findings with input as {"response": {"status": "failure", "data": tc.data, "message": "m"}}
	findings == {{"reason": "failure with data: message redacted (SACP)", "redact_message": true}}
}
