package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sacpgw/gateway/audit"
)

func runAudit(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := auditMain(args, &out, &errb)
	return code, out.String(), errb.String()
}

// writeChain writes n signed entries to dir/chain and returns the key prefix.
func writeChain(t *testing.T, dir string, n int) string {
	t.Helper()
	prefix := filepath.Join(t.TempDir(), "signing")
	if code, _, stderr := runAudit("keygen", "--out", prefix); code != 0 {
		t.Fatalf("keygen: %d %s", code, stderr)
	}
	l, err := audit.Open(audit.Config{Dir: dir, Chain: "gw-1", SigningKeyFile: prefix + ".key"})
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if _, err := l.Append(context.Background(), audit.Record{Kind: "llm.request", AgentID: []string{"a1", "a2"}[i%2],
			Summary: map[string]any{"model": "mock-1", "tokens": map[string]any{"total": i}}}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return prefix
}

func TestAuditCommands(t *testing.T) {
	dir := t.TempDir()
	prefix := writeChain(t, dir, 6)
	wrong := filepath.Join(t.TempDir(), "wrong")
	if code, _, _ := runAudit("keygen", "--private", wrong+".key", "--public", wrong+".pub"); code != 0 {
		t.Fatal("keygen --private --public failed")
	}
	out := filepath.Join(t.TempDir(), "export.csv")
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"verify", []string{"verify", "--dir", dir}, 0, "ok: 1 chains, 6 entries; gw-1: last seq 6 hash ", ""},
		{"verify signed", []string{"verify", "--dir", dir, "--pubkey", prefix + ".pub"}, 0, "checkpoint seq 6 signature ok", ""},
		{"verify wrong key", []string{"verify", "--dir", dir, "--pubkey", wrong + ".pub"}, 1, "", "FAILED: gw-1.checkpoints.jsonl line 1 (seq 6): bad signature"},
		{"verify json", []string{"verify", "--dir", dir, "--json"}, 0, `"last_seq": 6`, ""},
		{"verify missing dir", []string{"verify", "--dir", filepath.Join(dir, "nope")}, 2, "", "--dir " + filepath.Join(dir, "nope") + ": no such directory"},
		{"verify bad pubkey file", []string{"verify", "--dir", dir, "--pubkey", prefix + ".key"}, 2, "", "--pubkey"},
		{"verify unknown flag", []string{"verify", "--nope"}, 2, "", "flag provided but not defined: -nope"},
		{"export csv", []string{"export", "--dir", dir, "--format", "csv", "--agent", "a2", "--out", out}, 0, "exported 3 entries to " + out, ""},
		{"export needs format", []string{"export", "--dir", dir, "--out", out}, 2, "", `--format "": want jsonl or csv`},
		{"export needs out", []string{"export", "--dir", dir, "--format", "jsonl"}, 2, "", "--out is required"},
		{"export bad since", []string{"export", "--dir", dir, "--format", "jsonl", "--since", "yesterday", "--out", out}, 2, "", `--since "yesterday"`},
		{"keygen refuses overwrite", []string{"keygen", "--out", prefix}, 2, "", "file exists"},
		{"keygen both forms", []string{"keygen", "--out", "x", "--private", "y"}, 2, "", "not both"},
		{"keygen nothing", []string{"keygen"}, 2, "", "--out PREFIX"},
		{"no subcommand", nil, 2, "", "usage:"},
		{"unknown subcommand", []string{"frobnicate"}, 2, "", `unknown command "frobnicate"`},
		{"stray argument", []string{"verify", "--dir", dir, "extra"}, 2, "", `unexpected argument "extra"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runAudit(tc.args...)
			if code != tc.code || !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q\nwant exit %d, stdout ~%q, stderr ~%q", code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
			}
			if tc.code == 0 && stderr != "" {
				t.Errorf("stderr on success: %q", stderr)
			}
		})
	}
	csv, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if lines := strings.Split(strings.TrimSpace(string(csv)), "\n"); len(lines) != 4 || !strings.HasSuffix(lines[0], ",summary.model,summary.tokens.total") {
		t.Errorf("csv:\n%s", csv)
	}
	if _, err := os.Stat(out + ".manifest.json"); err != nil {
		t.Error(err)
	}
}

func TestAuditVerifyNamesTamperedEntry(t *testing.T) {
	dir := t.TempDir()
	writeChain(t, dir, 4)
	seg := filepath.Join(dir, "gw-1-00000000000000000001.jsonl")
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(seg, bytes.Replace(data, []byte(`"total":2`), []byte(`"total":9`), 1), 0o640); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runAudit("verify", "--dir", dir)
	if want := "FAILED: gw-1-00000000000000000001.jsonl line 3 (seq 3): hash mismatch"; code != 1 || !strings.Contains(stderr, want) {
		t.Errorf("exit %d, stderr %q; want 1 and %q", code, stderr, want)
	}
	if code, _, stderr := runAudit("export", "--dir", dir, "--format", "jsonl", "--out", filepath.Join(t.TempDir(), "x")); code != 1 || !strings.Contains(stderr, "export refused") {
		t.Errorf("export of a broken chain: exit %d, %q", code, stderr)
	}
}

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	for _, tc := range []struct {
		in   string
		want time.Time
		err  bool
	}{
		{"", time.Time{}, false},
		{"2026-01-02T03:04:05Z", time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), false},
		{"2026-01-02T03:04:05.5+01:00", time.Date(2026, 1, 2, 2, 4, 5, 5e8, time.UTC), false},
		{"2026-01-02", time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), false},
		{"24h", now.Add(-24 * time.Hour), false},
		{"-1h", time.Time{}, true},
		{"soon", time.Time{}, true},
	} {
		got, err := parseTime(tc.in, now)
		if (err != nil) != tc.err || !got.Equal(tc.want) {
			t.Errorf("parseTime(%q) = %v, %v; want %v (error %v)", tc.in, got, err, tc.want, tc.err)
		}
	}
}
