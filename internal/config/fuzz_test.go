package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// FuzzLoadAgents feeds arbitrary bytes as agents.yaml: the loader must
// never panic, and must either load or name at least one located problem.
func FuzzLoadAgents(f *testing.F) {
	shipped, _ := os.ReadFile(filepath.Join(shippedDir, "agents.yaml"))
	f.Add(string(shipped))
	f.Add(okAgents)
	f.Add("agents:\n  a: {rate_limit: 1/x, max_request_size: [1]}\n")
	f.Add("agents: [1, 2]\n")
	f.Add("&a [*a]")
	f.Add("agents:\n  a:\n    token_sha256: ${X}\n    models: ['[']\n")
	dir := f.TempDir()
	_ = os.WriteFile(filepath.Join(dir, GatewayFile), []byte(okGateway), 0o600)
	_ = os.WriteFile(filepath.Join(dir, ProtocolFile), []byte(okProtocol), 0o600)
	f.Fuzz(func(t *testing.T, agents string) {
		if err := os.WriteFile(filepath.Join(dir, AgentsFile), []byte(agents), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := Load(dir, Options{LookupEnv: noEnv})
		if err == nil {
			if len(cfg.Agents) == 0 {
				t.Fatal("loaded a config without agents")
			}
			return
		}
		var ps Problems
		if !errors.As(err, &ps) || len(ps) == 0 {
			t.Fatalf("error is not a list of problems: %v", err)
		}
		for _, p := range ps {
			if p.Msg == "" || !strings.HasSuffix(p.File, AgentsFile) {
				t.Fatalf("bad problem %+v", p)
			}
		}
	})
}
