# METADATA
# title: violation_marker
# description: |
#   SACP Intervention: a message that carries an obvious violation
#   is forced to status "failure" and redacted. The markers: a PEM private
#   key block, and an echoed prompt-injection phrase ("ignore (all)
#   previous/prior instructions").
package gateway.rules.guardrails.violation_marker

_markers := {
	"a private key": `-----BEGIN [A-Z ]*PRIVATE KEY-----`,
	"a prompt-injection phrase": `(?i)\b(ignore|disregard) (all )?(the )?(previous|prior|above) instructions\b`,
}

# METADATA
# title: Violation marker
# description: The message matches a marker; status becomes failure and the message is redacted.
findings contains {
	"reason": sprintf("message contains %s", [what]),
	"redact_message": true,
} if {
	is_string(input.response.message)
	some what, pattern in _markers
	regex.match(pattern, input.response.message)
}
