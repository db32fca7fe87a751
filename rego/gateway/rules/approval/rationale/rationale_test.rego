package gateway.rules.approval.rationale_test

import data.gateway.fixtures_test as fixtures
import data.gateway.rules.approval.rationale as rule

test_rationale_passes[tc.note] if {
	some tc in [
		{"note": "seed example", "input": fixtures.input_for(fixtures.request)},
		{"note": "not required", "input": fixtures.input_with({"rationale": "fix"}, {"compliance": {"require_rationale": false}})},
		{"note": "query needs none", "input": fixtures.input_for({"request_type": "QUERY", "content": "q"})},
		{"note": "validate needs none (the protocol's required fields)", "input": fixtures.input_for({"request_type": "VALIDATE", "content": "x", "target_type": "code"})},
		# reported by required_fields, not twice
		{"note": "approval without rationale", "input": fixtures.without("rationale")},
	]
	count(rule.violations) == 0 with input as tc.input
}

test_short_or_missing_rationale_violates[tc.note] if {
	some tc in [
		{"note": "approval too short", "input": fixtures.with_fields({"rationale": "  fix it  "}), "want": "APPROVAL requests need a rationale of at least 10 characters (got 6)"},
		{"note": "validate with a short one", "input": fixtures.input_for({"request_type": "VALIDATE", "content": "x", "target_type": "code", "rationale": "fix"}), "want": "VALIDATE requests need a rationale of at least 10 characters (got 3)"},
		{"note": "not a string", "input": fixtures.input_for(object.union(fixtures.request, {"request_type": "VALIDATE", "rationale": 42})), "want": "VALIDATE requests need a rationale of at least 10 characters (got 0)"},
	]
	violations := rule.violations with input as tc.input
	some v in violations
	v.rule == "rationale"
	v.description == tc.want
}
