# METADATA
# title: references
# description: |
#   At most limits.max_references references, and with
#   compliance.enforce_references each must be a known specification id
#   (input.known_references), the approval protocol's "_validate_references".
package gateway.rules.approval.references

import data.gateway.lib.approval as lib

# Built only when there is a reference to check.
_known := {id | some id in input.known_references}

# METADATA
# title: Too many references
# description: More references than limits.max_references.
violations contains {
	"rule": "references",
	"description": sprintf("%d references, over the limit of %d", [count(input.request.references), lib.protocol.limits.max_references]),
	"suggestion": "cite only the specifications that informed the change",
} if {
	is_array(input.request.references)
	count(input.request.references) > lib.protocol.limits.max_references
}

# METADATA
# title: Unknown reference
# description: With enforce_references, a reference is not a known specification id.
violations contains {
	"rule": "references",
	"description": sprintf("reference %q is not a known specification", [ref]),
	"suggestion": "query the available specifications first (POST /agent/context) and cite their ids",
} if {
	some ref in input.request.references
	lib.protocol.compliance.enforce_references == true
	not ref in _known
}

# METADATA
# title: Malformed references
# description: references, when given, must be an array.
violations contains {
	"rule": "references",
	"description": "references must be an array of specification ids",
	"suggestion": "send references as a JSON array of strings",
} if {
	not is_array(object.get(input.request, "references", []))
}
