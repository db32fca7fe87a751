# METADATA
# title: report_evidence
# description: |
#   A REPORT that says a create or modify was completed must name what it
#   wrote: changes_made.content_sha256, the SHA-256 of the content applied.
#   The gateway compares it with the approved content (a difference goes to
#   a person as a deviation); a summary or a list of paths alone cannot be
#   checked, so it does not complete the request. A delete writes no
#   content, and a REPORT that says the change was not completed claims
#   nothing to check.
package gateway.rules.approval.report_evidence

# METADATA
# title: Completed change without a content digest
# description: a completed create or modify REPORT whose changes_made has no content_sha256.
violations contains {
	"rule": "report_evidence",
	"description": "a completed REPORT of a create or modify must name the content it applied (changes_made.content_sha256); a summary or a list of paths cannot be checked against the approval",
	"suggestion": "send changes_made as {\"summary\": ..., \"content_sha256\": \"<sha256 of the content written>\"}; the approval's answer carries the approved content's digest",
} if {
	input.request.request_type == "REPORT"
	input.request.completed == true
	input.request.action in {"create", "modify"}
	_digest == ""
}

_digest := d if {
	is_object(input.request.changes_made)
	d := object.get(input.request.changes_made, "content_sha256", "")
} else := ""
