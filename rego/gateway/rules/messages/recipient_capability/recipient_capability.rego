# METADATA
# title: recipient_capability
# description: |
#   A REQUEST whose payload carries a compact SACP plan may only go to an
#   agent that supports every verb of the plan: the gateway refuses it up
#   front instead of relaying a message the recipient must answer with
#   UNKNOWN_VERB. input.message.plan_verbs lists the plan's verbs by their
#   names in the library (an alias such as "s" is given as "search"), as the
#   recipient's supported_verbs names them. Messages without a plan pass.
package gateway.rules.messages.recipient_capability

# METADATA
# title: Recipient lacks a verb
# description: the plan uses a verb the recipient does not support.
deny contains sprintf("recipient %q does not support verb %q of the plan", [input.recipient.id, verb]) if {
	input.message.type == "request"
	is_object(input.recipient)
	some verb in object.get(input.message, "plan_verbs", [])
	verb != "join"
	not verb in object.get(input.recipient, "supported_verbs", [])
}
