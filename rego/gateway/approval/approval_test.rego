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

# The facts the gateway looks up, as it sends them for the seed request:
# nothing missing, nothing to check, no cycle.
_facts := {
	"target": {
		"type": "design", "id": "", "path": "docs/design/new-feature.md", "assigned_id": "design-0123456789abcdef0123456789abcdef",
		"checked": false, "exists": false, "source": "",
	},
	"content_check": {"checked": false, "valid": null, "template": "", "errors": [], "reason": "no content template for target type \"design\""},
	"references": {"checked": true, "cycle": [], "through_target": false, "complete": true},
}

# The seed request with fields replaced, and facts merged over _facts.
_with_facts(fields, facts) := object.union(fixtures.with_fields(fields), object.union(_facts, facts))

_missing := {"target": {"id": "design-404", "checked": true, "exists": false}}

_off_template := {"content_check": {
	"checked": true, "valid": false, "template": "templates/design.json",
	"errors": ["/: missing property 'title'", "/owner: got number, want string"],
}}

test_facts_are_violations[tc.note] if {
	some tc in [
		{"note": "modify of a missing target", "fields": {"action": "modify", "target_id": "design-404"}, "facts": _missing, "want": {"target.missing"}},
		{"note": "delete of a missing target", "fields": {"action": "delete", "target_id": "design-404"}, "facts": _missing, "want": {"target.missing"}},
		{
			"note": "VALIDATE of a modify of a missing target",
			"fields": {"request_type": "VALIDATE", "action": "modify", "target_id": "design-404"}, "facts": _missing, "want": {"target.missing"},
		},
		{"note": "content off its template", "fields": {}, "facts": _off_template, "want": {"content.template"}},
		{
			"note": "a cycle through the target",
			"fields": {"references": ["arch-001"]},
			"facts": {"references": {"cycle": ["design-1", "arch-001", "design-1"], "through_target": true}},
			"want": {"references.cycle"},
		},
		{
			"note": "a cycle already there",
			"fields": {"references": ["arch-001"]},
			"facts": {"references": {"cycle": ["arch-001", "req-045", "arch-001"], "through_target": false}},
			"want": {"references.cycle"},
		},
		{
			"note": "all three at once",
			"fields": {"action": "modify", "target_id": "design-404"},
			"facts": object.union(object.union(_missing, _off_template), {"references": {"cycle": ["design-404", "design-404"], "through_target": true}}),
			"want": {"target.missing", "content.template", "references.cycle"},
		},
	]
	d := approval.decision with input as _with_facts(tc.fields, tc.facts)
	d.status == "rejected"
	fixtures.rules(d.violations) == tc.want
	every v in d.violations {
		v.suggestion != ""
	}
}

test_facts_not_checked_or_not_applicable_approve[tc.note] if {
	some tc in [
		{"note": "the seed request with its facts", "fields": {}, "facts": {}},
		{"note": "a create of a target that does not exist yet", "fields": {"target_id": "design-404"}, "facts": _missing},
		{
			"note": "a modify of a target the gateway cannot check",
			"fields": {"action": "modify", "target_id": "src/x.go"},
			"facts": {"target": {"id": "src/x.go", "checked": false, "exists": false}},
		},
		{
			"note": "a modify of a target that exists",
			"fields": {"action": "modify", "target_id": "design-001"},
			"facts": {"target": {"id": "design-001", "checked": true, "exists": true, "source": "catalogue"}},
		},
		{
			"note": "a REPORT on a target that is gone",
			"fields": {"request_type": "REPORT", "action": "delete", "target_id": "design-404", "completed": true, "changes_made": "deleted", "request_id": "req-1"},
			"facts": _missing,
		},
		{"note": "content that matches", "fields": {}, "facts": {"content_check": {"checked": true, "valid": true, "template": "templates/design.json", "errors": []}}},
		{"note": "content not checked (no template)", "fields": {}, "facts": {"content_check": {"checked": false, "valid": null}}},
	]
	d := approval.decision with input as _with_facts(tc.fields, tc.facts)
	d.status == "approved"
	d.violations == []
}

test_fact_descriptions_say_what_is_wrong if {
	d := approval.decision with input as _with_facts({"action": "modify", "target_id": "design-404"}, object.union(
		object.union(_missing, _off_template),
		{"references": {"cycle": ["design-404", "arch-001", "design-404"], "through_target": true}},
	))
	by_rule := {v.rule: v | some v in d.violations}
	by_rule["target.missing"].description == `design "design-404" does not exist: there is nothing to modify`
	contains(by_rule["content.template"].description, "templates/design.json")
	contains(by_rule["content.template"].description, "/: missing property 'title'; /owner: got number, want string")
	by_rule["references.cycle"].description == "the references form a cycle: design-404 -> arch-001 -> design-404 (this request's target would close it)"
	by_rule["references.cycle"].suggestion == "drop the reference that leads back to this target"
}

test_references_not_all_followed_escalates if {
	d := approval.decision with input as _with_facts({}, {"references": {"complete": false}})
	d.status == "escalated"
	d.escalation_reason == "the references could not all be followed to rule out a cycle"
}

test_confidence[tc.note] if {
	some tc in [
		{"note": "approved", "input": fixtures.input_for(fixtures.request), "lowered": null, "want": 1},
		{"note": "rejected", "input": fixtures.without("rationale"), "lowered": null, "want": 1},
		{"note": "escalated", "input": fixtures.with_fields({"risk_assessment": "high"}), "lowered": null, "want": 0.5},
		{"note": "an approval without references", "input": fixtures.with_fields({"references": []}), "lowered": null, "want": 0.9},
		{"note": "an approval on little evidence", "input": _with_facts({"references": [], "risk_assessment": "moderate"}, {"content_check": {"checked": false, "valid": null}}), "lowered": null, "want": 0.7},
		{"note": "an approval floors at 0.6", "input": _with_facts({"action": "modify", "target_id": "design-001", "references": [], "risk_assessment": "medium"}, {"content_check": {"checked": false, "valid": null}, "target": {"id": "design-001", "checked": false, "exists": null}}), "lowered": null, "want": 0.6},
		{"note": "a rule lowers an approval", "input": fixtures.input_for(fixtures.request), "lowered": 0.7, "want": 0.7},
		{"note": "a rule lowers an escalation", "input": fixtures.with_fields({"risk_assessment": "high"}), "lowered": 0.2, "want": 0.2},
		{"note": "a rule cannot raise it", "input": fixtures.with_fields({"risk_assessment": "high"}), "lowered": 0.9, "want": 0.5},
		{"note": "out of range is ignored", "input": fixtures.input_for(fixtures.request), "lowered": 1.5, "want": 1},
		{"note": "negative is ignored", "input": fixtures.input_for(fixtures.request), "lowered": -0.5, "want": 1},
		{"note": "not a number is ignored", "input": fixtures.input_for(fixtures.request), "lowered": "low", "want": 1},
	]
	d := approval.decision with input as tc.input with data.gateway.rules.approval.confidence_test_rule.confidence as tc.lowered
	d.confidence == tc.want
}

test_location_of_a_create_is_its_assigned_id if {
	d := approval.decision with input as _with_facts({"target_path": ""}, {})
	d.status == "approved"
	d.approved_location == "design/design-0123456789abcdef0123456789abcdef"
}
