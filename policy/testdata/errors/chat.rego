package gateway.chat

import data.gateway.errors

deny contains sprintf("%d", [errors.twice(1)]) if input.boom
