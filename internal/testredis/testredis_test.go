package testredis

import (
	"testing"
)

func TestStartStopRestart(t *testing.T) {
	s := Start(t)
	if err := ping(s.Addr()); err != nil {
		t.Fatalf("ping after start: %v", err)
	}
	s.Stop()
	if err := ping(s.Addr()); err == nil {
		t.Fatal("ping answered after stop")
	}
	s.Stop() // idempotent
	s.Restart()
	if err := ping(s.Addr()); err != nil {
		t.Fatalf("ping after restart: %v", err)
	}
	if got, want := s.URL(), "redis://"+s.Addr()+"/0"; got != want {
		t.Fatalf("URL %q, want %q", got, want)
	}
}
