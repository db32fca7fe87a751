# METADATA
# title: Approval helpers
# description: |
#   Shared by the approval rules: the protocol settings with the approval protocol's
#   defaults filled in for anything the input omits, so that a missing
#   setting never switches a check off, and a few helpers. The rules read
#   input.request directly (a base document is the cheapest reference); the
#   decision rejects an input whose request is not an object before any
#   rule's result counts.
package gateway.lib.approval

# The approval protocol's protocol.yaml: the defaults, and the strictest reading.
_default_protocol := {
	"limits": {"max_content_size": 102400, "max_references": 20, "max_deviations": 5},
	"compliance": {
		"strict_mode": true,
		"allow_deviations": false,
		"require_rationale": true,
		"enforce_references": true,
	},
}

# METADATA
# title: Protocol settings
# description: input.protocol over the approval protocol's defaults (object.union merges nested objects).
protocol := object.union(_default_protocol, _input_protocol)

default _input_protocol := {}

_input_protocol := input.protocol if is_object(input.protocol)

# METADATA
# title: Filled
# description: |
#   A field value counts as present when it is a non-blank string, a boolean,
#   a number, or a non-empty array, set or object.
filled(value) if {
	not value in {null, "", [], {}, set()}
	not _blank(value)
}

_blank(value) if {
	is_string(value)
	trim_space(value) == ""
}

# METADATA
# title: Target types
# description: the approval protocol's target types.
target_types := {"architecture", "design", "code", "test", "docs"}

# METADATA
# title: Actions
# description: the approval protocol's actions.
actions := {"create", "modify", "delete", "read"}

# METADATA
# title: Changing actions
# description: The actions that change a target.
changing_actions := {"create", "modify", "delete"}
