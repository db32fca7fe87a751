package gateway.guardrails

response := {"status": "weird"}
