package gateway.spawn

decision := "yes"
