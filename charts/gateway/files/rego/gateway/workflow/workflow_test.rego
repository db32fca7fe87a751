package gateway.workflow_test

import data.gateway.workflow

test_caller_allowed if {
	workflow.allow with input as {"agent": {"id": "claude-3"}, "workflow": {"name": "w", "callers": ["claude-3"]}, "input": {}}
}

test_other_agent_refused if {
	not workflow.allow with input as {"agent": {"id": "copilot-2"}, "workflow": {"name": "w", "callers": ["claude-3"]}, "input": {}}
}

test_no_callers_refused if {
	not workflow.allow with input as {"agent": {"id": "claude-3"}, "workflow": {"name": "w", "callers": []}, "input": {}}
}
