# METADATA
# title: Messages policy
# description: |
#   data.gateway.messages.deny is the set of reasons to refuse an
#   agent-to-agent envelope at POST /relay/messages (403 policy_denied); empty
#   allows. It runs after the envelope was validated, the sender matched the
#   authenticated agent and RBAC allowed the action to the recipient.
#   Input: {agent (the sender's registry entry), message (the normalised
#   envelope: format, id, type, priority, sender, recipient (id or null),
#   action, workflow_id, correlation_id, task_id, in_reply_to, timeout_ms,
#   payload_bytes, payload), recipient (its registry entry, null for a
#   broadcast), authz: {allowed, reason}}.
#   Each package under data.gateway.rules.messages contributes a "deny" set.
package gateway.messages

import data.gateway.rules.messages as rules

# METADATA
# title: Deny
# description: Reasons to refuse the message; empty allows.
# entrypoint: true
deny contains reason if {
	some reason in _malformed
}

deny contains reason if {
	count(_malformed) == 0
	some reason in rules[_].deny
}

deny contains sprintf("RBAC: %s", [object.get(input, ["authz", "reason"], "not allowed")]) if {
	count(_malformed) == 0
	object.get(input, ["authz", "allowed"], false) != true
}

_malformed contains "input.message must be the envelope object" if {
	not is_object(object.get(input, "message", null))
}

_malformed contains "input.agent must be the sender's registry entry" if {
	not is_object(object.get(input, "agent", null))
}
