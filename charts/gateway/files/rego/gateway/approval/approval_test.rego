package gateway.approval_test

import data.gateway.approval
import data.gateway.fixtures_test as fixtures

test_seed_example_is_approved if {
	d := approval.decision with input as fixtures.input_for(fixtures.request)
	d.status == "approved"
	d.confidence == 1
	d.feedback == "approved: create design"
	d.violations == []
	d.suggestions == []
	d.approved_location == "docs/design/new-feature.md"
	"write only to docs/design/new-feature.md" in d.constraints
	"send a REPORT with this request_id when the change is applied" in d.constraints
	d.escalation_reason == ""
}

test_approved_location[tc.note] if {
	some tc in [
		{"note": "target_path", "input": fixtures.input_for(fixtures.request), "want": "docs/design/new-feature.md"},
		{
			"note": "from target_id",
			"input": fixtures.input_for(object.union(object.remove(fixtures.request, ["target_path"]), {"target_id": "node-7"})),
			"want": "design/node-7",
		},
		{"note": "from request_id", "input": fixtures.without("target_path"), "want": "design/req-1"},
		{"note": "query", "input": fixtures.input_for({"request_type": "QUERY", "content": "auth?", "agent_id": "claude-3"}), "want": ""},
	]
	d := approval.decision with input as tc.input
	d.status == "approved"
	d.approved_location == tc.want
}

test_query_is_approved_without_constraints if {
	d := approval.decision with input as fixtures.input_for({"request_type": "QUERY", "content": "What are the current authentication requirements?"})
	d.status == "approved"
	d.feedback == "approved: query"
	d.constraints == []
}

test_violations_reject[tc.note] if {
	some tc in [
		{"note": "missing rationale", "input": fixtures.without("rationale"), "want": {"required_fields"}},
		{
			"note": "unauthorized and unknown reference",
			"input": object.union(fixtures.with_fields({"references": ["nope"]}), {"authz": {"allowed": false, "reason": "no"}}),
			"want": {"authorization", "references"},
		},
		# a violation wins over an escalation
		{
			"note": "rejected beats escalated",
			"input": fixtures.with_fields({"action": "delete", "target_type": "architecture", "content": ""}),
			"want": {"required_fields"},
		},
	]
	d := approval.decision with input as tc.input
	d.status == "rejected"
	fixtures.rules(d.violations) == tc.want
	d.approved_location == ""
	d.escalation_reason == ""
	count(d.suggestions) > 0
	startswith(d.feedback, sprintf("rejected: %d violation(s): ", [count(d.violations)]))
}

test_violations_are_sorted_by_rule if {
	d := approval.decision with input as object.union(
		fixtures.with_fields({"references": ["nope"], "rationale": "short"}),
		{"authz": {"allowed": false, "reason": "no"}},
	)
	[v.rule | some v in d.violations] == ["authorization", "rationale", "references"]
}

test_risks_escalate[tc.note] if {
	some tc in [
		{
			"note": "architecture delete",
			"input": fixtures.with_fields({"action": "delete", "target_type": "architecture"}),
			"want": "deleting architecture requires human review",
		},
		{
			"note": "high risk",
			"input": fixtures.with_fields({"risk_assessment": "high"}),
			"want": `the agent assessed the risk as "high"`,
		},
		{
			"note": "allowed deviation",
			"input": fixtures.input_with({"deviations": [{"standard": "naming"}]}, {"compliance": {"allow_deviations": true}}),
			"want": "1 declared deviation(s) from standards need human review",
		},
	]
	d := approval.decision with input as tc.input
	d.status == "escalated"
	d.confidence == 0.5
	d.escalation_reason == tc.want
	d.feedback == sprintf("escalated for human review: %s", [tc.want])
	d.approved_location == ""
	d.violations == []
}

test_malformed_input_is_rejected[tc.note] if {
	some tc in [
		{"note": "empty input", "input": {}},
		{"note": "request is a string", "input": {"request": "APPROVAL", "agent": fixtures.agent}},
	]
	d := approval.decision with input as tc.input
	d.status == "rejected"
	fixtures.rules(d.violations) == {"input"}
}
