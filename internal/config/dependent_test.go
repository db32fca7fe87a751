package config

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// shippedCopy writes the shipped configuration to a temporary directory,
// with policy.dir pointing at the repository's policies.
func shippedCopy(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	shipped := os.DirFS(shippedDir)
	err := fs.WalkDir(shipped, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(shipped, p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(p)), 0o700); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dir, p), b, 0o600)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// A file that does not parse is reported once, with its own problem; what
// depends on it (workflow nodes' agents, agents' registry verbs) is not
// reported missing on top.
func TestNoDependentProblemsAfterAParseError(t *testing.T) {
	cases := []struct {
		file, from, to string
		want           string
	}{
		{AgentsFile, "\nagents:", "\nagents: [", "agents.yaml:"},
		{RegistryFile, "\nregistry:", "\nregistry: [", "registry.yaml:"},
	}
	for _, tc := range cases {
		t.Run(tc.file, func(t *testing.T) {
			dir := shippedCopy(t)
			if _, err := Load(dir); err != nil {
				t.Fatalf("the shipped copy does not load: %v", err)
			}
			p := filepath.Join(dir, tc.file)
			b, err := os.ReadFile(p)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), tc.from) {
				t.Fatalf("%s has no %q", tc.file, tc.from)
			}
			if err := os.WriteFile(p, []byte(strings.Replace(string(b), tc.from, tc.to, 1)), 0o600); err != nil {
				t.Fatal(err)
			}
			_, err = Load(dir)
			var ps Problems
			if !errors.As(err, &ps) {
				t.Fatalf("Load: %v, want problems", err)
			}
			for _, pr := range ps {
				if !strings.Contains(pr.String(), tc.want) {
					t.Errorf("a dependent problem: %s", pr)
				}
			}
			if len(ps) != 1 {
				t.Errorf("%d problems, want the syntax error alone: %v", len(ps), ps)
			}
		})
	}
}
