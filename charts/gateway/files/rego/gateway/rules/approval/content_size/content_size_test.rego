package gateway.rules.approval.content_size_test

import data.gateway.fixtures_test as fixtures
import data.gateway.rules.approval.content_size as rule

_limit8 := {"limits": {"max_content_size": 8}}

test_content_within_limit_passes[tc.note] if {
	some tc in [
		{"note": "seed example", "input": fixtures.input_for(fixtures.request)},
		{"note": "exactly the limit", "input": fixtures.input_with({"content": "12345678"}, _limit8)},
		{"note": "multi-byte within the limit", "input": fixtures.input_with({"content": "ééé"}, _limit8)},
		{"note": "no content", "input": fixtures.without("content")},
	]
	count(rule.violations) == 0 with input as tc.input
}

test_content_over_limit_violates[tc.note] if {
	some tc in [
		{"note": "one byte over", "input": fixtures.input_with({"content": "123456789"}, _limit8), "want": "content is 9 bytes, over the limit of 8"},
		# five characters, ten bytes: the limit is in bytes
		{"note": "multi-byte over", "input": fixtures.input_with({"content": "ééééé"}, _limit8), "want": "content is 10 bytes, over the limit of 8"},
	]
	violations := rule.violations with input as tc.input
	some v in violations
	v.rule == "content_size"
	v.description == tc.want
}
