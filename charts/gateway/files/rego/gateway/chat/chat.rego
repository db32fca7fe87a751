# METADATA
# title: Chat policy
# description: |
#   data.gateway.chat.deny is the set of reasons to refuse a chat completion
#   request (403 policy_denied); empty allows. Input: {agent, request, model}.
#   Each package under data.gateway.rules.chat contributes a "deny" set.
package gateway.chat

import data.gateway.rules.chat as rules

# METADATA
# title: Deny
# description: Reasons to refuse the request; empty allows.
# entrypoint: true
deny contains reason if {
	some reason in _malformed
}

# The rules run on malformed input too: it is denied either way, and not
# guarding them spares every well-formed request a count of _malformed.
deny contains reason if {
	some reason in rules[_].deny
}

_malformed contains "input.request must be the chat completion request object" if {
	not is_object(object.get(input, "request", null))
}

_malformed contains "request.messages must be an array" if {
	is_object(input.request)
	not is_array(object.get(input.request, "messages", null))
}
