package gateway.approval

import data.gateway.errors

decision := {"status": "approved", "confidence": errors.value}
