package gateway.guardrails

import data.gateway.errors

response := {"status": "success", "redact_message": false, "n": errors.value}
