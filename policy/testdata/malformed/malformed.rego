# Decision rules of the wrong shape.
package gateway.approval

decision := {"status": "maybe", "confidence": 1}
