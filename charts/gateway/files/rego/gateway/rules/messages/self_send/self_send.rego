# METADATA
# title: self_send
# description: |
#   An agent may not send a message to itself through the gateway: that is
#   a loop, and it would let an agent write entries into a workflow's
#   history that look like another party's.
package gateway.rules.messages.self_send

# METADATA
# title: Message to itself
# description: the recipient is the sender.
deny contains sprintf("agent %q may not send a message to itself", [input.message.sender]) if {
	input.message.recipient == input.message.sender
}
