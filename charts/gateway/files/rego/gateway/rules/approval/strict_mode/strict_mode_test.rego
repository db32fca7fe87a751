package gateway.rules.approval.strict_mode_test

import data.gateway.fixtures_test as fixtures
import data.gateway.rules.approval.strict_mode as rule

_lenient := {"compliance": {"strict_mode": false}}

test_strict_requests_pass[tc.note] if {
	some tc in [
		{"note": "seed example", "input": fixtures.input_for(fixtures.request)},
		{"note": "modify with path", "input": fixtures.with_fields({"action": "modify"})},
		{"note": "delete with id only", "input": fixtures.input_for(object.union(object.remove(fixtures.request, ["target_path"]), {"action": "delete", "target_id": "node-7"}))},
		{"note": "query is not checked", "input": fixtures.input_for({"request_type": "QUERY", "content": "q"})},
		{"note": "not strict: unknown target type", "input": fixtures.input_with({"target_type": "wiki"}, _lenient)},
		{
			"note": "not strict: modify without path",
			"input": object.union(
				fixtures.input_for(object.union(object.remove(fixtures.request, ["target_path"]), {"action": "modify"})),
				{"protocol": object.union(fixtures.protocol, _lenient)},
			),
		},
	]
	count(rule.violations) == 0 with input as tc.input
}

test_loose_requests_violate[tc.note] if {
	some tc in [
		{"note": "unknown action", "input": fixtures.with_fields({"action": "rename"}), "want": `action "rename" is not create, modify, delete or read`},
		{"note": "no action", "input": fixtures.without("action"), "want": `action "" is not create, modify, delete or read`},
		{"note": "unknown target type", "input": fixtures.with_fields({"target_type": "wiki"}), "want": `target_type "wiki" is not architecture, design, code, test or docs`},
		{
			"note": "modify without path",
			"input": fixtures.input_for(object.union(object.remove(fixtures.request, ["target_path"]), {"action": "modify"})),
			"want": "modify needs target_path or target_id naming the existing item",
		},
		{
			"note": "delete with blank path",
			"input": fixtures.with_fields({"action": "delete", "target_path": " "}),
			"want": "delete needs target_path or target_id naming the existing item",
		},
	]
	violations := rule.violations with input as tc.input
	some v in violations
	v.rule == "strict_mode"
	v.description == tc.want
}
