# METADATA
# title: strict_mode
# description: |
#   With compliance.strict_mode, APPROVAL and VALIDATE requests must name a
#   the approval protocol action and target type, and modify or delete must say what they
#   change (target_path or target_id).
package gateway.rules.approval.strict_mode

import data.gateway.lib.approval as lib

_applies if {
	input.request.request_type in {"APPROVAL", "VALIDATE"}
	lib.protocol.compliance.strict_mode == true
}

# METADATA
# title: Unknown action
# description: action is not create, modify, delete or read.
violations contains {
	"rule": "strict_mode",
	"description": sprintf("action %q is not create, modify, delete or read", [object.get(input.request, "action", "")]),
	"suggestion": "set action to create, modify, delete or read",
} if {
	not object.get(input.request, "action", "") in lib.actions
	_applies
}

# METADATA
# title: Unknown target type
# description: target_type, when given, is not a target type of the approval protocol.
violations contains {
	"rule": "strict_mode",
	"description": sprintf("target_type %q is not architecture, design, code, test or docs", [input.request.target_type]),
	"suggestion": "use one of the target types architecture, design, code, test, docs",
} if {
	not input.request.target_type in lib.target_types
	lib.filled(input.request.target_type)
	_applies
}

# METADATA
# title: Target missing
# description: modify and delete must name the existing item (target_path or target_id).
violations contains {
	"rule": "strict_mode",
	"description": sprintf("%s needs target_path or target_id naming the existing item", [input.request.action]),
	"suggestion": "add target_path (or target_id) of the item to change",
} if {
	input.request.action in {"modify", "delete"}
	_applies
	not lib.filled(object.get(input.request, "target_path", null))
	not lib.filled(object.get(input.request, "target_id", null))
}
