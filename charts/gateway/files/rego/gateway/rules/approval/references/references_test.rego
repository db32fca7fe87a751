package gateway.rules.approval.references_test

import data.gateway.fixtures_test as fixtures
import data.gateway.rules.approval.references as rule

test_valid_references_pass[tc.note] if {
	some tc in [
		{"note": "known references", "input": fixtures.input_for(fixtures.request)},
		{"note": "no references", "input": fixtures.without("references")},
		{"note": "empty references", "input": fixtures.with_fields({"references": []})},
		{
			"note": "unknown reference, not enforced",
			"input": fixtures.input_with({"references": ["nope-1"]}, {"compliance": {"enforce_references": false}}),
		},
		{
			"note": "at the limit",
			"input": fixtures.input_with({"references": ["arch-001", "req-045"]}, {"limits": {"max_references": 2}}),
		},
	]
	count(rule.violations) == 0 with input as tc.input
}

test_invalid_references_violate[tc.note] if {
	some tc in [
		{"note": "unknown reference", "input": fixtures.with_fields({"references": ["arch-001", "spec-999"]}), "want": `reference "spec-999" is not a known specification`},
		{"note": "no catalogue", "input": object.remove(fixtures.input_for(fixtures.request), ["known_references"]), "want": `reference "arch-001" is not a known specification`},
		{
			"note": "over the limit",
			"input": fixtures.input_with({"references": ["arch-001", "req-045", "req-046"]}, {"limits": {"max_references": 2}}),
			"want": "3 references, over the limit of 2",
		},
		{"note": "not an array", "input": fixtures.with_fields({"references": "arch-001"}), "want": "references must be an array of specification ids"},
	]
	violations := rule.violations with input as tc.input
	some v in violations
	v.rule == "references"
	v.description == tc.want
}
