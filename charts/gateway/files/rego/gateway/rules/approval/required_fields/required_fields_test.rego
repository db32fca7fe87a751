package gateway.rules.approval.required_fields_test

import data.gateway.fixtures_test as fixtures
import data.gateway.rules.approval.required_fields as rule

test_complete_requests_pass[tc.note] if {
	some tc in [
		{"note": "approval", "input": fixtures.input_for(fixtures.request)},
		{"note": "query", "input": fixtures.input_for({"request_type": "QUERY", "content": "What are the authentication requirements?"})},
		{"note": "validate", "input": fixtures.input_for({"request_type": "VALIDATE", "content": "x", "target_type": "code"})},
		{"note": "report", "input": fixtures.input_for({"request_type": "REPORT", "request_id": "req-1", "completed": true, "changes_made": ["docs/design/new-feature.md"]})},
		{"note": "report not completed", "input": fixtures.input_for({"request_type": "REPORT", "request_id": "req-1", "completed": false, "changes_made": "none yet"})},
	]
	count(rule.violations) == 0 with input as tc.input
}

test_missing_fields_violate[tc.note] if {
	some tc in [
		{"note": "approval without content", "input": fixtures.without("content"), "want": `APPROVAL requests require "content"`},
		{"note": "approval without rationale", "input": fixtures.without("rationale"), "want": `APPROVAL requests require "rationale"`},
		{"note": "approval without target_type", "input": fixtures.without("target_type"), "want": `APPROVAL requests require "target_type"`},
		{"note": "approval with blank content", "input": fixtures.with_fields({"content": "  \n"}), "want": `APPROVAL requests require "content"`},
		{"note": "approval with null rationale", "input": fixtures.with_fields({"rationale": null}), "want": `APPROVAL requests require "rationale"`},
		{"note": "query without content", "input": fixtures.input_for({"request_type": "QUERY"}), "want": `QUERY requests require "content"`},
		{"note": "validate without target_type", "input": fixtures.input_for({"request_type": "VALIDATE", "content": "x"}), "want": `VALIDATE requests require "target_type"`},
		{"note": "report without completed", "input": fixtures.input_for({"request_type": "REPORT", "request_id": "r", "changes_made": ["a"]}), "want": `REPORT requests require "completed"`},
		{"note": "report with empty changes", "input": fixtures.input_for({"request_type": "REPORT", "request_id": "r", "completed": true, "changes_made": []}), "want": `REPORT requests require "changes_made"`},
		{"note": "unknown request type", "input": fixtures.with_fields({"request_type": "DELETE"}), "want": `request_type "DELETE" is not`},
		{"note": "no request type", "input": fixtures.without("request_type"), "want": `request_type "" is not`},
	]
	violations := rule.violations with input as tc.input
	some v in violations
	v.rule == "required_fields"
	contains(v.description, tc.want)
	v.suggestion != ""
}
