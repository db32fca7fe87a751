# Expensive on purpose: to test that a deadline stops evaluation.
package gateway.chat

deny contains "slow" if {
	count([x | some x in numbers.range(1, 50000000); x % 7 == 0]) > 0
}
