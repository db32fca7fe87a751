# METADATA
# title: Approval decision
# description: |
#   data.gateway.approval.decision answers the approval protocol's AgentRequest with the
#   decided fields of a LibrarianResponse. Input:
#   {request, agent, protocol, authz: {allowed, reason}, known_references}.
#   Every package under data.gateway.rules.approval contributes
#   "violations" (objects {rule, description, suggestion}) and/or
#   "escalations" (strings). Any violation rejects; otherwise any escalation
#   escalates; otherwise the request is approved.
package gateway.approval

import data.gateway.rules.approval as rules

# METADATA
# title: Decision
# description: The LibrarianResponse fields decided by policy.
# entrypoint: true
decision := _rejected if {
	count(_violations) > 0
} else := _escalated if {
	count(_escalations) > 0
} else := _approved_change if {
	input.request.action in {"create", "modify", "delete"}
	input.request.request_type == "APPROVAL"
} else := {
	"status": "approved",
	"confidence": 1,
	"feedback": concat("", ["approved: ", lower(input.request.request_type)]),
	"violations": [],
	"suggestions": [],
	"constraints": [],
	"approved_location": "",
	"escalation_reason": "",
}

# Input shape first: a malformed input is rejected before any rule runs.
_input_violations contains {
	"rule": "input",
	"description": "input.request must be an object (the approval protocol AgentRequest)",
	"suggestion": "send the AgentRequest as a JSON object",
} if {
	not is_object(object.get(input, "request", null))
}

_input_violations contains {
	"rule": "input",
	"description": "input.agent must be the agent's registry entry",
	"suggestion": "the gateway must pass the authenticated agent",
} if {
	not is_object(object.get(input, "agent", null))
}

_violations := _input_violations if {
	count(_input_violations) > 0
} else := {v | some v in rules[_].violations}

_escalations := {e | some e in rules[_].escalations}

# Each outcome is built only when it is the decision.

_rejected := {
	"status": "rejected",
	"confidence": 1,
	"feedback": sprintf("rejected: %d violation(s): %s", [count(_violations), concat(", ", {v.rule | some v in _violations})]),
	# sorted by rule id, then description
	"violations": [v | some [_, _, v] in sort([[v.rule, v.description, v] | some v in _violations])],
	"suggestions": sort({v.suggestion | some v in _violations; v.suggestion != ""}),
	"constraints": [],
	"approved_location": "",
	"escalation_reason": "",
}

_escalated := {
	"status": "escalated",
	"confidence": 0.5,
	"feedback": concat("", ["escalated for human review: ", _reason]),
	"violations": [],
	"suggestions": ["wait for a reviewer's decision: poll GET /agent/status/{request_id}"],
	"constraints": [],
	"approved_location": "",
	"escalation_reason": _reason,
}

_reason := concat("; ", _escalations)

# An approved change: where to write it and what to do after. (The
# approved path is the common one: it is built from few rules, for speed.)
_approved_change := {
	"status": "approved",
	"confidence": 1,
	"feedback": concat("", ["approved: ", input.request.action, " ", input.request.target_type]),
	"violations": [],
	"suggestions": [],
	"constraints": [
		concat("", ["write only to ", _location]),
		"apply exactly the approved content: the REPORT's changes_made is checked against it",
		"send a REPORT with this request_id when the change is applied",
	],
	"approved_location": _location,
	"escalation_reason": "",
}

# target_path, else derived from target_id or the request id.
_location := input.request.target_path if {
	trim_space(input.request.target_path) != ""
} else := concat("/", [input.request.target_type, input.request.target_id]) if {
	trim_space(input.request.target_id) != ""
} else := concat("/", [input.request.target_type, object.get(input.request, "request_id", "unassigned")])
