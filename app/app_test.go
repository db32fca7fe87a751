package app

import "testing"

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{"127.0.0.1:8080": true, "[::1]:80": true, "localhost:1": true, "127.9.9.9:1": true,
		":8080": false, "0.0.0.0:8080": false, "10.0.0.1:80": false, "example.com:80": false, "garbage": false} {
		if loopback(addr) != want {
			t.Errorf("loopback(%q) = %v", addr, !want)
		}
	}
}
