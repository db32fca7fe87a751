# METADATA
# title: deviations
# description: |
#   Declared departures from standards. Without compliance.allow_deviations
#   any deviation is a violation; with it, more than limits.max_deviations
#   is a violation and any smaller number escalates to a human.
package gateway.rules.approval.deviations

import data.gateway.lib.approval as lib

# Declared deviations; undefined when there are none.
_count := n if {
	is_array(input.request.deviations)
	n := count(input.request.deviations)
	n > 0
}

_allowed if lib.protocol.compliance.allow_deviations == true

# METADATA
# title: Deviations not allowed
# description: The request declares deviations and allow_deviations is false.
violations contains {
	"rule": "deviations",
	"description": sprintf("%d deviation(s) declared, and deviations are not allowed", [_count]),
	"suggestion": "change the proposal so that it follows the standards, then resubmit without deviations",
} if {
	_count > 0
	not _allowed
}

# METADATA
# title: Too many deviations
# description: More deviations than limits.max_deviations.
violations contains {
	"rule": "deviations",
	"description": sprintf("%d deviations declared, over the limit of %d", [_count, lib.protocol.limits.max_deviations]),
	"suggestion": "reduce the departures from standards or split the change",
} if {
	_count > lib.protocol.limits.max_deviations
	_allowed
}

# METADATA
# title: Deviations need review
# description: Allowed deviations within the limit go to a human.
escalations contains sprintf("%d declared deviation(s) from standards need human review", [_count]) if {
	_count <= lib.protocol.limits.max_deviations
	_allowed
}
