# METADATA
# title: rationale
# description: |
#   With compliance.require_rationale, an APPROVAL must say why (at least
#   10 characters besides blanks); an APPROVAL without any rationale is
#   already reported by required_fields. A VALIDATE (a dry run of an
#   APPROVAL) needs none, as the protocol's required fields say, but a
#   rationale it does give is held to the same length, so that the dry run
#   answers what the APPROVAL would.
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
	_checked
	_length < _min_length
	lib.protocol.compliance.require_rationale == true
	not _reported_by_required_fields
}

_reported_by_required_fields if {
	input.request.request_type == "APPROVAL"
	_length == 0
}

_checked if input.request.request_type == "APPROVAL"

_checked if {
	input.request.request_type == "VALIDATE"
	_given
}

# A rationale that is present, even blank or of the wrong type, is checked.
_given if not object.get(input.request, "rationale", null) in {null, ""}
