package gateway.rules.approval.report_evidence_test

import data.gateway.fixtures_test as fixtures
import data.gateway.rules.approval.report_evidence as rule

_report(fields) := fixtures.input_for(object.union({"request_type": "REPORT", "request_id": "req-1", "action": "create", "completed": true}, fields))

_digest := "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"

test_checkable_reports_pass[tc.note] if {
	some tc in [
		{"note": "a digest", "input": _report({"changes_made": {"summary": "created", "files": [], "content_sha256": _digest}})},
		{"note": "not completed", "input": _report({"completed": false, "changes_made": {"summary": "half done", "files": [], "content_sha256": ""}})},
		{"note": "a delete", "input": _report({"action": "delete", "changes_made": {"summary": "deleted", "files": [], "content_sha256": ""}})},
		{"note": "not a REPORT", "input": fixtures.input_for(fixtures.request)},
	]
	count(rule.violations) == 0 with input as tc.input
}

test_unverifiable_completions_violate[tc.note] if {
	some tc in [
		{"note": "a summary only", "input": _report({"changes_made": {"summary": "done", "files": [], "content_sha256": ""}})},
		{"note": "paths only", "input": _report({"action": "modify", "changes_made": {"summary": "", "files": ["docs/a.md"], "content_sha256": ""}})},
		{"note": "a plain string (as written by an agent)", "input": _report({"changes_made": "done"})},
	]
	some v in rule.violations with input as tc.input
	v.rule == "report_evidence"
}
