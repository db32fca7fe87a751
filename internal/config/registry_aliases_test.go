package config

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestRegistryAliases: verbs' aliases are checked at load, every clash at
// its line; supported_verbs (tools and agents) take verbs' names only.
func TestRegistryAliases(t *testing.T) {
	const agents = "agents:\n  a:\n    token_sha256: \"0000000000000000000000000000000000000000000000000000000000000001\"\n"
	cases := []struct {
		name     string
		registry string
		agents   string   // "": agents
		want     []string // "file:line: substring", in the order Load sorts them; none: loads
	}{
		{name: "aliases load", registry: `registry:
  verbs:
    - name: search
      aliases: [s, find]
    - name: rank
      aliases: [r]
  tools:
    - id: H_API
      supported_verbs: [search]
`},
		{name: "bad alias", registry: `registry:
  verbs:
    - name: search
      aliases: [s, "bad alias", ""]
`, want: []string{`registry.yaml:4: registry: verb "search": alias "bad alias": want 1-64`, `registry.yaml:4: registry: verb "search": alias "": want 1-64`}},
		{name: "alias is a verb's name", registry: `registry:
  verbs:
    - name: search
      aliases:
        - search
        - rank
    - name: rank
`, want: []string{`registry.yaml:5: registry: verb "search": alias "search" is the name of a verb`, `registry.yaml:6: registry: verb "search": alias "rank" is the name of a verb`}},
		{name: "alias of two verbs", registry: `registry:
  verbs:
    - name: search
      aliases: [s]
    - name: scan
      aliases:
        - sc
        - s
`, want: []string{`registry.yaml:8: registry: verb "scan": alias "s" is already an alias of verb "search" (line 4)`}},
		{name: "alias twice in a verb", registry: `registry:
  verbs:
    - name: search
      aliases:
        - s
        - s
`, want: []string{`registry.yaml:6: registry: verb "search": alias "s" is already an alias of verb "search" (line 5)`}},
		{name: "tool names an alias", registry: `registry:
  verbs:
    - name: search
      aliases: [s]
  tools:
    - id: H_API
      supported_verbs:
        - search
        - s
`, want: []string{`registry.yaml:9: registry: tool "H_API" names "s", an alias of verb "search": supported_verbs takes the verb's name`}},
		{name: "agent names an alias", registry: `registry:
  verbs:
    - name: search
      aliases: [s]
`, agents: agents + "    supported_verbs: [search, s]\n", want: []string{`agents.yaml:4: agent "a": supported_verbs: verb "s" is not in registry.yaml`}},
		{name: "verb and tool names", registry: `registry:
  verbs:
    - name: search
    - name: "bad verb"
    - name: search
  tools:
    - id: H_API
      supported_verbs: [search]
    - id: "bad tool"
      supported_verbs: [search]
    - id: H_API
      supported_verbs: [search]
`, want: []string{`registry.yaml:4: registry.verbs[1].name "bad verb": want 1-64 letters`, `registry.yaml:5: registry: verb "search" is defined twice`,
			`registry.yaml:9: registry.tools[1].id "bad tool": want 1-64 letters`, `registry.yaml:11: registry: tool "H_API" is defined twice`}},
		{name: "reserved alias", registry: `registry:
  verbs:
    - name: merge
      aliases: [join]
`, want: []string{`registry.yaml:1: verb "merge": alias "join" is a reserved verb name`}},
		{name: "every clash at once", registry: `registry:
  verbs:
    - name: search
      aliases: [s, r]
    - name: rank
      aliases: [r, search]
  tools:
    - id: T
      supported_verbs: [r]
`, want: []string{`registry.yaml:6: alias "r" is already an alias of verb "search" (line 4)`, `registry.yaml:6: alias "search" is the name of a verb`,
			`registry.yaml:9: registry: tool "T" names "r", an alias of verb "search"`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			ag := c.agents
			if ag == "" {
				ag = agents
			}
			files := map[string]string{AgentsFile: ag, RegistryFile: c.registry}
			for _, f := range []string{GatewayFile, ProtocolFile} {
				b, err := os.ReadFile(filepath.Join("testdata", "reserved", f))
				if err != nil {
					t.Fatal(err)
				}
				files[f] = string(b)
			}
			for f, content := range files {
				if err := os.WriteFile(filepath.Join(dir, f), []byte(content), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cfg, err := Load(dir, Options{LookupEnv: noEnv})
			if len(c.want) == 0 {
				if err != nil {
					t.Fatalf("load: %v", err)
				}
				lib, err := cfg.Registry.Library()
				if err != nil {
					t.Fatal(err)
				}
				for alias, verb := range map[string]string{"s": "search", "find": "search", "r": "rank"} {
					if got, ok := lib.Resolve(alias); !ok || got != verb {
						t.Errorf("Resolve(%q) = %q, %v; want %q", alias, got, ok, verb)
					}
				}
				return
			}
			var ps Problems
			if !errors.As(err, &ps) {
				t.Fatalf("load: %v, want problems", err)
			}
			if len(ps) != len(c.want) {
				t.Fatalf("%d problems, want %d:\n%v", len(ps), len(c.want), err)
			}
			for i, w := range c.want {
				loc, sub, _ := strings.Cut(w, ": ")
				file, line, _ := strings.Cut(loc, ":")
				p := ps[i]
				if filepath.Base(p.File) != file || strconv.Itoa(p.Line) != line || !strings.Contains(p.Msg, sub) {
					t.Errorf("problem %d = %s, want %s", i, p, w)
				}
			}
		})
	}
}

// TestRegistryEmbeddingsChecked: registry.embeddings must name an upstream
// of gateway.yaml that serves its model.
func TestRegistryEmbeddingsChecked(t *testing.T) {
	cases := []struct {
		name, embeddings, want string
	}{
		{"served", "  embeddings: {upstream: mock, model: mock-embed}\n", ""},
		{"no such upstream", "  embeddings: {upstream: nope, model: mock-embed}\n", `registry.embeddings.upstream "nope"`},
		{"model not served", "  embeddings: {upstream: openai, model: text-embedding-3-small}\n", `serves no such model`},
		{"model missing", "  embeddings: {upstream: mock}\n", "both required"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			for _, f := range []string{GatewayFile, AgentsFile, ProtocolFile, RegistryFile} {
				b, err := os.ReadFile(filepath.Join(shippedDir, f))
				if err != nil {
					t.Fatal(err)
				}
				if f == RegistryFile {
					b = append(b, c.embeddings...)
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
			cfg, err := Load(dir, Options{LookupEnv: noEnv})
			if c.want == "" {
				if err != nil || cfg.Registry.Embeddings == nil || cfg.Registry.Embeddings.Model != "mock-embed" {
					t.Fatalf("load: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), RegistryFile) {
				t.Fatalf("load: %v, want a %s problem with %q", err, RegistryFile, c.want)
			}
		})
	}
}
