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
deny contains "input.request must be the chat completion request object" if {
	not is_object(object.get(input, "request", null))
}

deny contains "request.messages must be an array" if {
	is_object(input.request)
	not is_array(object.get(input.request, "messages", null))
}

# The shape checks above are rules of deny itself, not a helper set
# iterated here: this decision runs on every chat request, and each level
# of indirection is measurable (go test -bench ChatDeny ./policy). The
# shape checks use object.get: a missing member must make them true, where
# "not is_object(input.request)" would be undefined, hence false. The
# rules run on malformed input too: it is denied either way.
deny contains reason if {
	some reason in rules[_].deny
}
