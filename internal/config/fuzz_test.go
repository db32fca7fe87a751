package config

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"50KB", "1MB", "0B", "-1KB", "9223372036854775807B", "99999999999GB", "KB", " 1 gb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err == nil && n < 0 {
			t.Fatalf("ParseSize(%q) = %d", s, n)
		}
		if err != nil && n != 0 {
			t.Fatalf("ParseSize(%q) returned %d with error", s, n)
		}
	})
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"100/hour", "1/s", "0/day", "/", "5/", "2147483648/second"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRate(s)
		if err == nil && (r.N <= 0 || r.Period <= 0 || r.PerSecond() <= 0) {
			t.Fatalf("ParseRate(%q) = %+v", s, r)
		}
	})
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"5000ms", "10s", "1h", "5000", "-1s", "1e9h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err == nil && d < 0 {
			t.Fatalf("ParseDuration(%q) = %v", s, d)
		}
	})
}

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
