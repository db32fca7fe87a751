# METADATA
# title: risk_assessment
# description: |
#   The agent's own risk_assessment escalates when it says "high" or
#   "critical" (whole words, any case). Erring on the side of review, "not
#   high" escalates too.
package gateway.rules.approval.risk_assessment

# METADATA
# title: High risk
# description: risk_assessment mentions high or critical.
escalations contains sprintf("the agent assessed the risk as %q", [input.request.risk_assessment]) if {
	regex.match(`(?i)\b(high|critical)\b`, input.request.risk_assessment)
}
