package gateway.rules.approval.deviations_test

import data.gateway.fixtures_test as fixtures
import data.gateway.rules.approval.deviations as rule

_one := [{"standard": "naming", "departure": "kebab-case file name"}]

_three := [{"standard": "a"}, {"standard": "b"}, {"standard": "c"}]

_allowed := {"compliance": {"allow_deviations": true}, "limits": {"max_deviations": 2}}

test_no_deviations_pass[tc.note] if {
	some tc in [
		{"note": "none declared", "input": fixtures.input_for(fixtures.request)},
		{"note": "none declared, allowed", "input": fixtures.input_with({}, _allowed)},
		{"note": "field absent", "input": fixtures.without("deviations")},
	]
	count(rule.violations) == 0 with input as tc.input
	count(rule.escalations) == 0 with input as tc.input
}

test_deviations_violate[tc.note] if {
	some tc in [
		{"note": "not allowed", "input": fixtures.with_fields({"deviations": _one}), "want": "1 deviation(s) declared, and deviations are not allowed"},
		{"note": "allowed, over the limit", "input": fixtures.input_with({"deviations": _three}, _allowed), "want": "3 deviations declared, over the limit of 2"},
	]
	violations := rule.violations with input as tc.input
	some v in violations
	v.rule == "deviations"
	v.description == tc.want
	count(rule.escalations) == 0 with input as tc.input
}

test_allowed_deviations_escalate[tc.note] if {
	some tc in [
		{"note": "one of two", "input": fixtures.input_with({"deviations": _one}, _allowed), "want": "1 declared deviation(s) from standards need human review"},
		{
			"note": "two of two",
			"input": fixtures.input_with({"deviations": array.concat(_one, _one)}, _allowed),
			"want": "2 declared deviation(s) from standards need human review",
		},
	]
	count(rule.violations) == 0 with input as tc.input
	escalations := rule.escalations with input as tc.input
	tc.want in escalations
}
