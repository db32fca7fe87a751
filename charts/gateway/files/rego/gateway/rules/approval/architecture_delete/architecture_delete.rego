# METADATA
# title: architecture_delete
# description: Deleting an architecture item always goes to a human.
package gateway.rules.approval.architecture_delete

# METADATA
# title: Architecture delete
# description: APPROVAL or VALIDATE of a delete on target_type architecture escalates.
escalations contains "deleting architecture requires human review" if {
	input.request.action == "delete"
	input.request.target_type == "architecture"
	input.request.request_type in {"APPROVAL", "VALIDATE"}
}
