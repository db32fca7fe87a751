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

test_signed_url_refused_by_default if {
	not workflow.signed_url_allowed with input as {"url": {"host": "evil.example.com"}}
}

test_signed_url_of_a_listed_host if {
	workflow.signed_url_allowed with input as {"url": {"host": "bucket.example.com"}}
		with workflow.signed_url_hosts as {"bucket.example.com"}
}
