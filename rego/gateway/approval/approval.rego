# METADATA
# title: Approval decision
# description: |
#   data.gateway.approval.decision answers the approval protocol's AgentRequest with the
#   decided fields of a LibrarianResponse. Input:
#   {request, agent, protocol, authz: {allowed, reason}, known_references,
#   target, content_check, references}; the last three are facts the
#   gateway looked up (target.exists, content_check.valid,
#   references.cycle), turned into the violations target.missing,
#   content.template and references.cycle here. Every package under
#   data.gateway.rules.approval contributes "violations" (objects {rule,
#   description, suggestion}) and/or "escalations" (strings), and may lower
#   the confidence with "confidence" (a number 0..1). Any violation rejects;
#   otherwise any escalation escalates; otherwise the request is approved.
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
	"confidence": _confidence("approved"),
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
} else := {v | some v in rules[_].violations} | _fact_violations

_escalations := {e | some e in rules[_].escalations} | _fact_escalations

# Facts the gateway looked up before asking. Each is read only when the
# gateway says it checked it: an input without facts (an older gateway, a
# test) is judged as before, never as a missing target.

_changes_existing if {
	input.request.request_type in {"APPROVAL", "VALIDATE"}
	input.request.action in {"modify", "delete"}
}

# METADATA
# title: Missing target
# description: A modify or delete names a target_id the gateway knows does not exist.
_fact_violations contains {
	"rule": "target.missing",
	"description": sprintf("%s %q does not exist: there is nothing to %s", [input.request.target_type, input.request.target_id, input.request.action]),
	"suggestion": "check the target_id (query the specifications with POST /agent/context), or create the target first",
} if {
	_changes_existing
	input.target.checked == true
	input.target.exists == false
}

# METADATA
# title: Content off its template
# description: The content does not match its target type's content template.
_fact_violations contains {
	"rule": "content.template",
	"description": sprintf("content does not match the %s template (%s): %s", [input.request.target_type, input.content_check.template, concat("; ", input.content_check.errors)]),
	"suggestion": sprintf("shape the content as the catalogue's %s requires and submit it again", [input.content_check.template]),
} if {
	input.content_check.checked == true
	input.content_check.valid == false
}

# METADATA
# title: Reference cycle
# description: Following the references through the catalogue and the gateway's records comes back to where it started.
_fact_violations contains {
	"rule": "references.cycle",
	"description": sprintf("the references form a cycle: %s%s", [concat(" -> ", input.references.cycle), _cycle_where]),
	"suggestion": _cycle_suggestion,
} if {
	is_array(input.references.cycle)
	count(input.references.cycle) > 0
}

_cycle_where := " (this request's target would close it)" if {
	input.references.through_target == true
} else := " (already in the catalogue or the gateway's records)"

_cycle_suggestion := "drop the reference that leads back to this target" if {
	input.references.through_target == true
} else := "cite specifications outside the cycle, and ask the catalogue's owners to break it"

# The walk was cut short: no cycle was found, but it may exist.
_fact_escalations contains "the references could not all be followed to rule out a cycle" if {
	input.references.checked == true
	input.references.complete == false
}

# METADATA
# title: Confidence
# description: |
#   By status: 1 for a rejection (a violation settles it) and 0.5 for an
#   escalation (a person settles it). An approval starts at 1 and loses a
#   tenth for each thing that could not be checked (_gaps: no references
#   cited, content or target the gateway could not check, a moderate risk
#   the agent declared), down to 0.6, so that an approval on little
#   evidence says so. A rule package may lower any of them with
#   confidence (a number 0..1); the lowest wins.
_confidence(status) := min({_status_confidence(status)} | {c |
	c := rules[_].confidence
	is_number(c)
	c >= 0 # above 1 never wins the min
})

_status_confidence("approved") := max([0.6, 1 - (0.1 * count(_gaps))])

_status_confidence("rejected") := 1

_status_confidence("escalated") := 0.5

# What an approval could not check. Each fact counts only when the gateway
# says it looked (checked == false), never when it is absent.
_gaps contains "no references cited" if {
	input.request.request_type in {"APPROVAL", "VALIDATE"}
	count(object.get(input.request, "references", [])) == 0
}

_gaps contains "content not checked against a template" if {
	input.request.action in {"create", "modify"}
	input.content_check.checked == false
}

_gaps contains "target not checked" if {
	_changes_existing
	input.target.checked == false
}

_gaps contains "moderate risk declared" if {
	regex.match(`(?i)\b(medium|moderate)\b`, object.get(input.request, "risk_assessment", ""))
}

# Each outcome is built only when it is the decision.

_rejected := {
	"status": "rejected",
	"confidence": _confidence("rejected"),
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
	"confidence": _confidence("escalated"),
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
	"confidence": _confidence("approved"),
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

# target_path, else derived from target_id, the id the gateway assigns a
# CREATE (input.target.assigned_id), or the request id.
_location := input.request.target_path if {
	trim_space(input.request.target_path) != ""
} else := concat("/", [input.request.target_type, input.request.target_id]) if {
	trim_space(input.request.target_id) != ""
} else := concat("/", [input.request.target_type, input.target.assigned_id]) if {
	trim_space(input.target.assigned_id) != ""
} else := concat("/", [input.request.target_type, object.get(input.request, "request_id", "unassigned")])
