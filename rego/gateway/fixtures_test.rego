# METADATA
# title: Test fixtures
# description: |
#   Inputs shared by the approval tests: the approval protocol's "Agent Requesting
#   Approval" example from claude-3 with the approval protocol's protocol settings.
package gateway.fixtures_test

# METADATA
# title: Agent
# description: claude-3 as agents.yaml registers it.
agent := {
	"id": "claude-3",
	"type": "code-generator",
	"capabilities": ["read", "write", "analyze"],
	"allowed_targets": ["architecture", "design", "code"],
}

# METADATA
# title: Protocol
# description: the approval protocol's protocol.yaml settings.
protocol := {
	"limits": {"max_content_size": 102400, "max_references": 20, "max_deviations": 5},
	"compliance": {
		"strict_mode": true,
		"allow_deviations": false,
		"require_rationale": true,
		"enforce_references": true,
	},
}

# METADATA
# title: Request
# description: the approval protocol Common Operation 1.
request := {
	"agent_id": "claude-3",
	"session_id": "sess-123",
	"request_id": "req-1",
	"request_type": "APPROVAL",
	"action": "create",
	"target_type": "design",
	"target_path": "docs/design/new-feature.md",
	"content": "# New Feature Design\n...",
	"rationale": "Implementing user story US-123",
	"references": ["arch-001", "req-045"],
	"deviations": [],
}

# METADATA
# title: Input for a request
# description: The full approval input around req.
input_for(req) := {
	"request": req,
	"agent": agent,
	"protocol": protocol,
	"authz": {"allowed": true, "reason": "agent \"claude-3\" may create design (capability \"write\")"},
	"known_references": ["arch-001", "req-045", "req-046"],
}

# METADATA
# title: Input with fields
# description: The seed request with fields replaced or added.
with_fields(fields) := input_for(object.union(request, fields))

# METADATA
# title: Input without a field
# description: The seed request without field.
without(field) := input_for(object.remove(request, [field]))

# METADATA
# title: Input with protocol settings
# description: The seed input with protocol settings merged over the approval protocol's.
with_protocol(settings) := object.union(input_for(request), {"protocol": object.union(protocol, settings)})

# METADATA
# title: Rules
# description: The rule ids of a set of violations.
rules(violations) := {v.rule | some v in violations}

# METADATA
# title: Input with fields and settings
# description: The seed request with fields replaced, under changed protocol settings.
input_with(fields, settings) := object.union(with_fields(fields), {"protocol": object.union(protocol, settings)})
