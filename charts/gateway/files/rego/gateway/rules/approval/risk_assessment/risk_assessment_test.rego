package gateway.rules.approval.risk_assessment_test

import data.gateway.fixtures_test as fixtures
import data.gateway.rules.approval.risk_assessment as rule

test_low_risk_does_not_escalate[tc.note] if {
	some tc in [
		{"note": "absent", "input": fixtures.without("risk_assessment")},
		{"note": "low", "input": fixtures.with_fields({"risk_assessment": "low: new file only"})},
		{"note": "medium", "input": fixtures.with_fields({"risk_assessment": "Medium"})},
		{"note": "not a whole word", "input": fixtures.with_fields({"risk_assessment": "touches the highway module"})},
		{"note": "not a string", "input": fixtures.with_fields({"risk_assessment": 9})},
	]
	count(rule.escalations) == 0 with input as tc.input
}

test_high_risk_escalates[tc.note] if {
	some tc in [
		{"note": "high", "risk": "High: changes the auth flow"},
		{"note": "critical", "risk": "critical"},
		{"note": "inside a sentence", "risk": "impact is HIGH for billing"},
	]
	escalations := rule.escalations with input as fixtures.with_fields({"risk_assessment": tc.risk})
	sprintf("the agent assessed the risk as %q", [tc.risk]) in escalations
}
