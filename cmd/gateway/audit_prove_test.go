package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/audit"
)

// TestAuditProveCommands: an auditor's round trip on the command line. The
// operator saves a checkpoint, the chain grows, the operator writes an
// inclusion proof of one entry and a consistency proof from the saved
// checkpoint; verify-proof checks both with the public key alone and
// refuses a changed proof or another key.
func TestAuditProveCommands(t *testing.T) {
	dir, tmp := t.TempDir(), t.TempDir()
	prefix := writeChain(t, dir, 6)
	file := func(name string, data []byte) string {
		p := filepath.Join(tmp, name)
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	code, oldNote, stderr := runAudit("checkpoint", "--dir", dir)
	if code != 0 || !strings.HasPrefix(oldNote, "sacpgw.audit/gw-1\n6\n") {
		t.Fatalf("checkpoint: %d %q %s", code, oldNote, stderr)
	}
	oldFile := file("old.ckpt", []byte(oldNote))
	l, err := audit.Open(audit.Config{Dir: dir, Chain: "gw-1", SigningKeyFile: prefix + ".key"})
	if err != nil {
		t.Fatal(err)
	}
	for range 5 {
		if _, err := l.Append(context.Background(), audit.Record{Kind: "llm.request", AgentID: "a1"}); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	_, newNote, _ := runAudit("checkpoint", "--dir", dir)
	newFile := file("new.ckpt", []byte(newNote))

	code, incl, stderr := runAudit("prove", "--dir", dir, "--seq", "4")
	if code != 0 || !strings.HasPrefix(incl, "c2sp.org/tlog-proof@v1\nextra ") || !strings.HasSuffix(incl, newNote) {
		t.Fatalf("prove --seq 4: %d %q %s", code, incl, stderr)
	}
	inclFile := file("seq4.tlog-proof", []byte(incl))
	code, inclOld, _ := runAudit("prove", "--dir", dir, "--seq", "4", "--checkpoint", oldFile)
	if code != 0 || !strings.HasSuffix(inclOld, oldNote) {
		t.Fatalf("prove --checkpoint: %d", code)
	}
	code, cons, stderr := runAudit("prove", "--dir", dir, "--consistency", oldFile, newFile)
	if code != 0 {
		t.Fatalf("prove --consistency: %d %s", code, stderr)
	}
	consFile := file("cons.json", []byte(cons))
	wrong := filepath.Join(tmp, "wrong")
	if code, _, _ := runAudit("keygen", "--out", wrong); code != 0 {
		t.Fatal("keygen")
	}
	tampered := file("tampered.tlog-proof", bytes.Replace([]byte(incl), []byte("index 3\n"), []byte("index 4\n"), 1))
	for _, tc := range []struct {
		name      string
		args      []string
		code      int
		out, errs string
	}{
		{"inclusion", []string{"verify-proof", "--pubkey", prefix + ".pub", inclFile}, 0, "ok: chain gw-1: entry seq 4 (llm.request", ""},
		{"inclusion against the old checkpoint", []string{"verify-proof", "--pubkey", prefix + ".pub", file("old.tlog-proof", []byte(inclOld))}, 0, "is leaf 3 of the signed tree of size 6", ""},
		{"consistency", []string{"verify-proof", "--pubkey", prefix + ".pub", consFile}, 0, "the signed tree of size 11 extends the signed tree of size 6", ""},
		{"json", []string{"verify-proof", "--json", "--pubkey", prefix + ".pub", inclFile}, 0, `"tree_size": 11`, ""},
		{"changed index", []string{"verify-proof", "--pubkey", prefix + ".pub", tampered}, 1, "", "is not leaf 4"},
		{"another key", []string{"verify-proof", "--pubkey", wrong + ".pub", inclFile}, 1, "", "no signature by the key"},
		{"swapped checkpoints", []string{"prove", "--dir", dir, "--consistency", newFile, oldFile}, 1, "", "larger than the new one's"},
		{"no key", []string{"verify-proof", inclFile}, 2, "", "give --pubkey FILE and one proof file"},
		{"no seq", []string{"prove", "--dir", dir}, 2, "", "give --seq N"},
		{"seq beyond", []string{"prove", "--dir", dir, "--seq", "12"}, 1, "", "seq 12 is not in the checkpoint's tree (seqs 1 to 11)"},
		{"no proof file", []string{"verify-proof", "--pubkey", prefix + ".pub", inclFile + ".nope"}, 2, "", "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			code, out, errs := runAudit(tc.args...)
			if code != tc.code || !strings.Contains(out, tc.out) || !strings.Contains(errs, tc.errs) {
				t.Errorf("gateway audit %v: exit %d, stdout %q, stderr %q; want %d, ~%q, ~%q", tc.args, code, out, errs, tc.code, tc.out, tc.errs)
			}
		})
	}
}
