package gateway.chat

deny contains 42
