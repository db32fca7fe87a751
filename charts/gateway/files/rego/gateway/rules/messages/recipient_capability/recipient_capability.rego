# METADATA
# title: recipient_capability
# description: |
#   A REQUEST whose payload names a compact SACP plan (payload.plan, seed
#   001) may only go to an agent that supports every verb of the plan: the
#   gateway refuses it up front instead of relaying a message the recipient
#   must answer with UNKNOWN_VERB. Messages without a plan pass.
package gateway.rules.messages.recipient_capability

_plan_verbs contains verb if {
	some step in input.message.payload.plan
	is_array(step)
	verb := step[0]
}

_plan_verbs contains verb if {
	some group in input.message.payload.plan
	is_object(group)
	some step in group.parallel
	verb := step[0]
}

# METADATA
# title: Recipient lacks a verb
# description: the plan uses a verb the recipient does not support.
deny contains sprintf("recipient %q does not support verb %q of the plan", [input.recipient.id, verb]) if {
	input.message.type == "request"
	is_object(input.recipient)
	some verb in _plan_verbs
	verb != "join"
	not verb in object.get(input.recipient, "supported_verbs", [])
}
