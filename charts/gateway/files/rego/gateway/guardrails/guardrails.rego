# METADATA
# title: Guardrails
# description: |
#   data.gateway.guardrails.response checks a validated SACP answer (SACP
#   9.1). Input: {agent, response}. Each package under
#   data.gateway.rules.guardrails contributes "findings"
#   ({reason, redact_message}); any finding forces status "failure", and
#   the message is redacted when a finding asks for it. Without findings the
#   answer's own status stands.
package gateway.guardrails

import data.gateway.rules.guardrails as rules

# METADATA
# title: Response
# description: The status the answer must carry, whether to redact its message, and why.
# entrypoint: true
response := {
	"status": "failure",
	"redact_message": true,
	"reason": "input.response must be the validated SACP object",
} if {
	not is_object(object.get(input, "response", null))
} else := {
	"status": "failure",
	"redact_message": _redact,
	"reason": concat("; ", {f.reason | some f in _findings}),
} if {
	count(_findings) > 0
} else := {
	"status": input.response.status,
	"redact_message": false,
	"reason": "",
}

_findings := {f | some f in rules[_].findings}

default _redact := false

_redact if {
	some f in _findings
	f.redact_message == true
}
