package gateway.chat

deny contains "x" if {
	input.a ==
}
