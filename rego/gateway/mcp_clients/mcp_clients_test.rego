package gateway.mcp_clients_test

import data.gateway.mcp_clients

person(p) := object.union({"subject": "s", "email": "e@example.org", "groups": [], "admin": false, "reviewer": false, "team_owner": [], "team_reviewer": []}, p)

test_admin_any_agent if {
	mcp_clients.allow with input as {"person": person({"admin": true}), "agent": {"id": "coder", "team": ""}, "server": "files"}
}

test_team_owner_their_team if {
	mcp_clients.allow with input as {"person": person({"team_owner": ["payments"]}), "agent": {"id": "coder", "team": "payments"}, "server": "files"}
}

test_team_reviewer_their_team if {
	mcp_clients.allow with input as {"person": person({"team_reviewer": ["payments"]}), "agent": {"id": "coder", "team": "payments"}, "server": "files"}
}

test_team_owner_not_another_team if {
	not mcp_clients.allow with input as {"person": person({"team_owner": ["search"]}), "agent": {"id": "coder", "team": "payments"}, "server": "files"}
}

test_team_owner_not_an_agent_in_no_team if {
	not mcp_clients.allow with input as {"person": person({"team_owner": ["payments"]}), "agent": {"id": "coder", "team": ""}, "server": "files"}
}

test_reviewer_alone_none if {
	not mcp_clients.allow with input as {"person": person({"reviewer": true, "groups": ["gw-reviewers"]}), "agent": {"id": "coder", "team": ""}, "server": "files"}
}

test_nobody_none if {
	not mcp_clients.allow with input as {"person": person({}), "agent": {"id": "coder", "team": "payments"}, "server": "files"}
}
