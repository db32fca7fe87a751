package config

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// TestUpstreamPriorityDefault: without priorities the file's order makes
// the first upstream serving a model its primary and the later ones its
// failover; given priorities are kept.
func TestUpstreamPriorityDefault(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{AgentsFile, ProtocolFile, RegistryFile} {
		b, err := os.ReadFile(filepath.Join(shippedDir, f))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"schemas", "specs"} {
		abs, _ := filepath.Abs(filepath.Join(shippedDir, d))
		if err := os.Symlink(abs, filepath.Join(dir, d)); err != nil {
			t.Fatal(err)
		}
	}
	gw := "upstreams:\n  - {name: a, type: mock, models: [\"m-*\"]}\n  - {name: b, type: mock, models: [\"*\"]}\n  - {name: c, type: mock, models: [\"*\"], priority: 0, weight: 3}\n"
	if err := os.WriteFile(filepath.Join(dir, GatewayFile), []byte(gw), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := Load(dir, Options{LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	got := []int{}
	for _, u := range cfg.Gateway.Upstreams {
		got = append(got, u.Priority, u.Weight)
	}
	if fmt.Sprint(got) != "[0 1 1 1 0 3]" {
		t.Errorf("priority, weight of a, b, c = %v; want [0 1 1 1 0 3]", got)
	}
}
