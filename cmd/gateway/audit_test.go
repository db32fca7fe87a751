package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io/fs"
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
			Object: audit.Members("model", "mock-1", "tokens", map[string]any{"total": i})}); err != nil {
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
		{"verify wrong key", []string{"verify", "--dir", dir, "--pubkey", wrong + ".pub"}, 1, "", "FAILED: gw-1.checkpoints.jsonl line 1 (seq 6): signed with unknown key id "},
		{"verify two keys", []string{"verify", "--dir", dir, "--pubkey", wrong + ".pub", "--pubkey", prefix + ".pub"}, 0, "checkpoint seq 6 signature ok (key id ", ""},
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
	if lines := strings.Split(strings.TrimSpace(string(csv)), "\n"); len(lines) != 4 || lines[0] != csvHeader {
		t.Errorf("csv:\n%s\nwant the header\n%s", csv, csvHeader)
	}
	if _, err := os.Stat(out + ".manifest.json"); err != nil {
		t.Error(err)
	}
}

// csvHeader is the header of a CSV export as docs/compliance.md documents
// it; changing it breaks every spreadsheet and SIEM mapping built on it.
const csvHeader = "seq,ts,chain,kind,agent_id,session_id,request_id,correlation_id,route,model,upstream,status,error_code," +
	"decision,decision_id,policy_verdict,reviewer,reason,tokens_prompt,tokens_completion,tokens_total,cost_usd,latency_ms," +
	"message_id,run_id,workflow,payload_sha256,prev_hash,hash,entry"

// writeLife appends n entries to chain gw-1 in dir as one run of a gateway
// signing with key (a keygen prefix; "" for no signing key); its only
// checkpoint is the one written at Close.
func writeLife(t *testing.T, dir, key string, n int) {
	t.Helper()
	cfg := audit.Config{Dir: dir, Chain: "gw-1"}
	if key != "" {
		cfg.SigningKeyFile = key + ".key"
	}
	l, err := audit.Open(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < n; i++ {
		if _, err := l.Append(context.Background(), audit.Record{Kind: "llm.request", Object: audit.Members("i", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
}

// keyOf makes a key pair with keygen and returns its prefix and key id.
func keyOf(t *testing.T) (prefix, id string) {
	t.Helper()
	prefix = filepath.Join(t.TempDir(), "signing")
	code, stdout, stderr := runAudit("keygen", "--out", prefix)
	if code != 0 {
		t.Fatalf("keygen: %d %s", code, stderr)
	}
	_, id, ok := strings.Cut(stdout, "key id ")
	if !ok || len(id) < 16 {
		t.Fatalf("keygen names no key id: %q", stdout)
	}
	return prefix, id[:16]
}

// TestAuditVerifySigningBeganAndRotation: the operator's first month. A
// trail written unsigned, then signed with key a, then with key b after a
// rotation, verifies with both keys and says where signing began; and
// turning signing off again is refused, not reported as fine.
func TestAuditVerifySigningBeganAndRotation(t *testing.T) {
	a, aID := keyOf(t)
	b, bID := keyOf(t)
	month := t.TempDir()
	writeLife(t, month, "", 3) // checkpoint at 3, unsigned
	writeLife(t, month, "", 2) // 5, unsigned
	writeLife(t, month, a, 2)  // 7, key a
	writeLife(t, month, b, 2)  // 9, key b
	unsigned := t.TempDir()
	writeLife(t, unsigned, "", 2) // 2, unsigned: the key is configured, the gateway not restarted yet
	once := t.TempDir()
	writeLife(t, once, "", 2) // 2, unsigned
	writeLife(t, once, a, 1)  // 3, key a
	downgraded := t.TempDir()
	writeLife(t, downgraded, a, 2)  // 2, key a
	writeLife(t, downgraded, "", 2) // 4, unsigned: the signing key was removed from the config
	for _, tc := range []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr string
	}{
		{"both keys", []string{"verify", "--dir", month, "--pubkey", a + ".pub", "--pubkey", b + ".pub"}, 0,
			"checkpoint seq 9 signature ok (key id " + bID + "), signed by key ids " + aID + " then " + bID +
				", 2 unsigned checkpoints before signing began at checkpoint seq 7", ""},
		{"without keys", []string{"verify", "--dir", month}, 0,
			"checkpoint seq 9 signature not checked (no --pubkey), 2 unsigned checkpoints before signing began at checkpoint seq 7", ""},
		{"only the new key", []string{"verify", "--dir", month, "--pubkey", b + ".pub"}, 1, "",
			"FAILED: gw-1.checkpoints.jsonl line 3 (seq 7): signed with unknown key id " + aID + " (the keys given have key ids " + bID + ")"},
		{"only the old key", []string{"verify", "--dir", month, "--pubkey", a + ".pub"}, 1, "",
			"FAILED: gw-1.checkpoints.jsonl line 4 (seq 9): signed with unknown key id " + bID},
		{"signing turned off", []string{"verify", "--dir", downgraded, "--pubkey", a + ".pub"}, 1, "",
			"FAILED: gw-1.checkpoints.jsonl line 2 (seq 4): unsigned checkpoint after signing began at checkpoint seq 2 (line 1)"},
		{"no signed checkpoint yet", []string{"verify", "--dir", unsigned, "--pubkey", a + ".pub"}, 1, "",
			"FAILED: gw-1.checkpoints.jsonl: no signed checkpoint (1 unsigned)"},
		{"one unsigned checkpoint", []string{"verify", "--dir", once, "--pubkey", a + ".pub"}, 0,
			"checkpoint seq 3 signature ok (key id " + aID + "), 1 unsigned checkpoint before signing began at checkpoint seq 3", ""},
		{"json", []string{"verify", "--dir", month, "--pubkey", a + ".pub", "--pubkey", b + ".pub", "--json"}, 0,
			`"unsigned_before_signing": 2`, ""},
		{"a private key as pubkey", []string{"verify", "--dir", month, "--pubkey", a + ".pub", "--pubkey", b + ".key"}, 2, "",
			"--pubkey: key " + b + ".key: no PEM block of type \"PUBLIC KEY\""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := runAudit(tc.args...)
			if code != tc.code || !strings.Contains(stdout, tc.stdout) || !strings.Contains(stderr, tc.stderr) {
				t.Errorf("exit %d, stdout %q, stderr %q\nwant exit %d, stdout ~%q, stderr ~%q", code, stdout, stderr, tc.code, tc.stdout, tc.stderr)
			}
		})
	}
}

// TestAuditExportStdout: with --out - the export is on stdout and nothing
// else is; the summary and the manifest are on stderr, and no manifest
// file is written.
func TestAuditExportStdout(t *testing.T) {
	dir := t.TempDir()
	writeChain(t, dir, 6)
	t.Chdir(t.TempDir()) // where a file named "-" or "-.manifest.json" would land
	for _, format := range []string{"jsonl", "csv"} {
		t.Run(format, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "x")
			if code, _, stderr := runAudit("export", "--dir", dir, "--format", format, "--agent", "a1", "--out", file); code != 0 {
				t.Fatalf("export to a file: %d %s", code, stderr)
			}
			want, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			code, stdout, stderr := runAudit("export", "--dir", dir, "--format", format, "--agent", "a1", "--out", "-")
			if code != 0 || stdout != string(want) {
				t.Fatalf("exit %d, stdout\n%s\nwant the file export\n%s", code, stdout, want)
			}
			summary, manifest, _ := strings.Cut(stderr, "\n")
			var m audit.Manifest
			if err := json.Unmarshal([]byte(manifest), &m); err != nil {
				t.Fatalf("stderr after the summary line is not the manifest: %v\n%s", err, stderr)
			}
			sum := sha256.Sum256([]byte(stdout))
			if !strings.HasPrefix(summary, "exported 3 entries to stdout (sha256 "+hex.EncodeToString(sum[:])+")") ||
				m.SHA256 != hex.EncodeToString(sum[:]) || m.Count != 3 || m.File != "-" || m.Format != format || m.Filter.Agent != "a1" {
				t.Errorf("summary %q, manifest %+v", summary, m)
			}
			for _, name := range []string{"-", "-.manifest.json"} {
				if _, err := os.Stat(name); !errors.Is(err, fs.ErrNotExist) {
					t.Errorf("%s written: %v", name, err)
				}
			}
		})
	}
	t.Run("refused", func(t *testing.T) {
		seg := filepath.Join(dir, "gw-1-00000000000000000001.jsonl")
		data, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(seg, bytes.Replace(data, []byte(`"a2"`), []byte(`"a3"`), 1), 0o640); err != nil {
			t.Fatal(err)
		}
		code, stdout, stderr := runAudit("export", "--dir", dir, "--format", "jsonl", "--out", "-")
		if code != 1 || stdout != "" || !strings.Contains(stderr, "export refused") {
			t.Errorf("exit %d, stdout %q, stderr %q", code, stdout, stderr)
		}
	})
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
