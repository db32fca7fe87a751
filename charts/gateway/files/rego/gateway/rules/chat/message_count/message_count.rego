# METADATA
# title: message_count
# description: |
#   A conversation longer than 1000 messages is refused: a runaway agent
#   loop, not a conversation. Permissive on purpose; tighten it per agent
#   type if you need to (see docs/policy-authoring.md).
package gateway.rules.chat.message_count

_max := 1000

# METADATA
# title: Too many messages
# description: request.messages has more than 1000 entries.
deny contains sprintf("the conversation has %d messages, over the limit of %d", [count(input.request.messages), _max]) if {
	count(input.request.messages) > _max
}
