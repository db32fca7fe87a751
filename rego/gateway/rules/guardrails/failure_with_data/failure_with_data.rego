# METADATA
# title: failure_with_data
# description: |
#   SACP Redaction: an answer with status "failure" whose data holds
#   sensitive details (something a redaction detector finds in data's member
#   names or values: input.response.sensitive_data names the detectors) has
#   its message redacted for the user, while data stays for the
#   orchestrator. A failure that carries only, say, an error code keeps its
#   message.
package gateway.rules.guardrails.failure_with_data

# METADATA
# title: Failure with sensitive data
# description: status failure and a detector finding in data redacts the message.
findings contains {
	"reason": "failure with sensitive data: message redacted (SACP)",
	"redact_message": true,
} if {
	input.response.status == "failure"
	count(object.get(input.response, "sensitive_data", [])) > 0
}
