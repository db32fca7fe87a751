# Every decision point raises an evaluation error when input.boom is true.
package gateway.errors

# Conflicting values of a complete rule.
value := 1 if input.boom

value := 2 if input.boom

# A function with two outputs for the same argument.
twice(_) := 1

twice(_) := 2
