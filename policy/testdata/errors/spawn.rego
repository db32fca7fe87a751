package gateway.spawn

import data.gateway.errors

decision := {"status": "approved", "reasons": [sprintf("%d", [errors.value])]}
