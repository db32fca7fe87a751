package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
)

// writeConfigDir writes a minimal configuration whose gateway.yaml adds
// extra (relative paths in it are relative to that directory).
func writeConfigDir(t *testing.T, dir, extra string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	files := map[string]string{
		config.GatewayFile:  "upstreams:\n  - {name: m, type: mock, models: ['*']}\n" + extra,
		config.AgentsFile:   "agents:\n  a1:\n    token_sha256: \"" + roster.HashTokenHex("tok-a1") + "\"\n",
		config.ProtocolFile: "protocol:\n  version: \"1.0\"\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}

// The audit subcommands read the trail the configuration names, from any
// working directory; --dir still wins.
func TestAuditCommandsTakeTheDirFromConfig(t *testing.T) {
	root := t.TempDir()
	cfgDir := filepath.Join(root, "etc", "gateway")
	writeConfigDir(t, cfgDir, "audit: {dir: ../trail}\n")
	writeChain(t, filepath.Join(root, "etc", "trail"), 5)
	t.Chdir(t.TempDir())

	code, out, errb := runAudit("verify", "--config", cfgDir)
	if code != exitOK || !strings.Contains(out, "5 entries") {
		t.Fatalf("verify --config: %d %q %q", code, out, errb)
	}
	exported := filepath.Join(t.TempDir(), "out.jsonl")
	if code, _, errb := runAudit("export", "--config", cfgDir, "--format", "jsonl", "--out", exported); code != exitOK {
		t.Fatalf("export --config: %d %s", code, errb)
	}
	if b, _ := os.ReadFile(exported); bytes.Count(b, []byte("\n")) < 5 {
		t.Errorf("export wrote %q", b)
	}
	empty := t.TempDir()
	if code, out, errb := runAudit("verify", "--config", cfgDir, "--dir", empty); code != exitOK || !strings.Contains(out, "0 entries") {
		t.Errorf("--dir did not win over --config: %d %q %s", code, out, errb)
	}
	if code, _, errb := runAudit("verify", "--config", filepath.Join(root, "missing")); code != exitUsage {
		t.Errorf("a missing --config: %d %s", code, errb)
	}
}

// policy test runs the tests of the configuration's policy directory.
func TestPolicyTestTakesTheDirFromConfig(t *testing.T) {
	root := t.TempDir()
	cfgDir := filepath.Join(root, "config")
	writeConfigDir(t, cfgDir, "policy: {dir: ../policies}\n")
	pol := filepath.Join(root, "policies")
	if err := os.MkdirAll(pol, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pol, "demo.rego"), []byte(policyUnderTest), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pol, "demo_test.rego"), []byte("package demo_test\n\nimport data.demo\n\ntest_alice if demo.allow with input as {\"user\": \"alice\"}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	var out, errb bytes.Buffer
	if code := run([]string{"policy", "test", "--config", cfgDir}, &out, &errb); code != exitOK || !strings.Contains(out.String(), "PASS") {
		t.Fatalf("policy test --config: %d %q %q", code, out.String(), errb.String())
	}
	// From the config directory's parent, the default --config applies.
	t.Chdir(root)
	out.Reset()
	if code := run([]string{"policy", "test"}, &out, &errb); code != exitOK || !strings.Contains(out.String(), "PASS") {
		t.Fatalf("policy test with the default --config: %d %q %q", code, out.String(), errb.String())
	}
}
