package gateway.rules.approval.architecture_delete_test

import data.gateway.fixtures_test as fixtures
import data.gateway.rules.approval.architecture_delete as rule

test_other_changes_do_not_escalate[tc.note] if {
	some tc in [
		{"note": "create design", "fields": {}},
		{"note": "delete code", "fields": {"action": "delete", "target_type": "code"}},
		{"note": "modify architecture", "fields": {"action": "modify", "target_type": "architecture"}},
		{"note": "report of a delete", "fields": {"request_type": "REPORT", "action": "delete", "target_type": "architecture"}},
	]
	count(rule.escalations) == 0 with input as fixtures.with_fields(tc.fields)
}

test_architecture_delete_escalates[tc.note] if {
	some tc in [
		{"note": "approval", "fields": {"action": "delete", "target_type": "architecture"}},
		{"note": "validate", "fields": {"request_type": "VALIDATE", "action": "delete", "target_type": "architecture"}},
	]
	escalations := rule.escalations with input as fixtures.with_fields(tc.fields)
	"deleting architecture requires human review" in escalations
}
