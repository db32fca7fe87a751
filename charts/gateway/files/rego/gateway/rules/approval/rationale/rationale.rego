# METADATA
# title: rationale
# description: |
#   With compliance.require_rationale, APPROVAL and VALIDATE requests must
#   say why (at least 10 characters besides blanks). An APPROVAL without any
#   rationale is already reported by required_fields.
package gateway.rules.approval.rationale

import data.gateway.lib.approval as lib

_min_length := 10

_length := count(trim_space(input.request.rationale)) if is_string(input.request.rationale) else := 0

# METADATA
# title: Rationale missing or too short
# description: require_rationale is set and the rationale is under 10 characters.
violations contains {
	"rule": "rationale",
	"description": sprintf("%s requests need a rationale of at least %d characters (got %d)", [input.request.request_type, _min_length, _length]),
	"suggestion": "explain why the change is needed, e.g. the user story or defect it serves",
} if {
	input.request.request_type in {"APPROVAL", "VALIDATE"}
	_length < _min_length
	lib.protocol.compliance.require_rationale == true
	not _reported_by_required_fields
}

_reported_by_required_fields if {
	input.request.request_type == "APPROVAL"
	_length == 0
}
