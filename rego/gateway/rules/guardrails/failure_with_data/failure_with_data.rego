# METADATA
# title: failure_with_data
# description: |
#   SACP Redaction: an answer with status "failure" and a non-empty
#   data object may carry sensitive details; its message is redacted for the
#   user while data stays for the orchestrator.
package gateway.rules.guardrails.failure_with_data

# METADATA
# title: Failure with data
# description: status failure and data non-empty redacts the message.
findings contains {
	"reason": "failure with data: message redacted (SACP)",
	"redact_message": true,
} if {
	input.response.status == "failure"
	is_object(input.response.data)
	count(input.response.data) > 0
}
