# METADATA
# title: content
# description: |
#   An example chat rule that reads what every message says: it refuses a
#   conversation that carries a private key or a cloud access key. A rule
#   like this is evaluated on every request (only the parts that depend on
#   the agent alone are settled in advance); docs/operations.md says what it
#   costs.
package gateway.rules.chat.content

# The patterns are tried on each message's text: a plain string content, or
# the text parts of a content list.
_patterns := {
	"a private key": `-----BEGIN [A-Z ]*PRIVATE KEY-----`,
	"an AWS access key": `\bAKIA[0-9A-Z]{16}\b`,
}

_texts contains m.content if {
	some m in input.request.messages
	is_string(m.content)
}

_texts contains part.text if {
	some m in input.request.messages
	is_array(m.content)
	some part in m.content
	part.type == "text"
	is_string(part.text)
}

deny contains sprintf("a message carries %s", [what]) if {
	some what, pattern in _patterns
	some text in _texts
	regex.match(pattern, text)
}
