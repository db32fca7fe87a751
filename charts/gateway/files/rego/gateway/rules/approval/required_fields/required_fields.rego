# METADATA
# title: required_fields
# description: |
#   The approval protocol's REQUIRED_FIELDS per request type: APPROVAL needs content,
#   rationale and target_type; QUERY needs content; VALIDATE needs content
#   and target_type; REPORT needs request_id, completed and changes_made.
#   An unknown or missing request_type is a violation too.
package gateway.rules.approval.required_fields

import data.gateway.lib.approval as lib

_required := {
	"APPROVAL": ["content", "rationale", "target_type"],
	"QUERY": ["content"],
	"VALIDATE": ["content", "target_type"],
	"REPORT": ["request_id", "completed", "changes_made"],
}

# METADATA
# title: Missing field
# description: A field the request type requires is absent or empty.
violations contains {
	"rule": "required_fields",
	"description": sprintf("%s requests require %q", [input.request.request_type, field]),
	"suggestion": sprintf("add a non-empty %q to the request", [field]),
} if {
	some field in _required[input.request.request_type]
	not lib.filled(object.get(input.request, field, null))
}

# METADATA
# title: Unknown request type
# description: request_type is not APPROVAL, QUERY, VALIDATE or REPORT.
violations contains {
	"rule": "required_fields",
	"description": sprintf("request_type %q is not APPROVAL, QUERY, VALIDATE or REPORT", [object.get(input.request, "request_type", "")]),
	"suggestion": "set request_type to APPROVAL, QUERY, VALIDATE or REPORT",
} if {
	not _required[object.get(input.request, "request_type", "")]
}
