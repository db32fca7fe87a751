# No decision rule at all: every decision point is undefined.
package gateway.other

allow := true
