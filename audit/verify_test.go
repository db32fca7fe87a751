package audit

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// signedChain writes 12 entries over several segments with a signing key
// (a checkpoint every 5 entries and at Close) and returns the public key.
func signedChain(t *testing.T, dir string) ed25519.PublicKey {
	t.Helper()
	keys := t.TempDir()
	priv, pub := filepath.Join(keys, "k.key"), filepath.Join(keys, "k.pub")
	if err := Keygen(priv, pub); err != nil {
		t.Fatal(err)
	}
	l := openLog(t, Config{Dir: dir, SigningKeyFile: priv, SegmentMaxBytes: 1500, CheckpointEvery: 5})
	appendN(t, l, 12)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return must(LoadPublicKey(pub))
}

// editSegment rewrites the lines (with their newlines) of the seg-th segment.
func editSegment(t *testing.T, dir string, seg int, edit func(lines [][]byte) [][]byte) string {
	t.Helper()
	p := segments(t, dir, "gw-test")[seg]
	lines := bytes.SplitAfter(must(os.ReadFile(p)), []byte("\n"))
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	writeFile(t, p, bytes.Join(edit(lines), nil))
	return filepath.Base(p)
}

// reseal recomputes a tampered line's hash, as a forger would.
func reseal(t *testing.T, line []byte) []byte {
	t.Helper()
	body := append(bytes.Clone(line[:len(line)-hashSuffixLen-1]), '}')
	return append(body[:len(body)-1], []byte(`,"hash":"`+sha256Hex(body)+"\"}\n")...)
}

func TestVerifyDetectsTampering(t *testing.T) {
	wrongKey, _, _ := ed25519.GenerateKey(nil)
	for _, tc := range []struct {
		name     string
		tamper   func(t *testing.T, dir string) (file string)
		wrongKey bool
		line     int
		seq      int64
		reason   string
	}{
		{"edit a byte", func(t *testing.T, dir string) string {
			return editSegment(t, dir, 0, func(l [][]byte) [][]byte {
				l[1] = bytes.Replace(l[1], []byte("agent-b"), []byte("agent-c"), 1)
				return l
			})
		}, false, 2, 2, "hash mismatch"},
		{"edit a field and reseal its hash", func(t *testing.T, dir string) string {
			return editSegment(t, dir, 0, func(l [][]byte) [][]byte {
				l[1] = reseal(t, bytes.Replace(l[1], []byte("agent-b"), []byte("agent-c"), 1))
				return l
			})
		}, false, 3, 3, "broken link"},
		{"change seq", func(t *testing.T, dir string) string {
			return editSegment(t, dir, 0, func(l [][]byte) [][]byte {
				l[1] = bytes.Replace(l[1], []byte(`"seq":2,`), []byte(`"seq":3,`), 1)
				return l
			})
		}, false, 2, 3, "hash mismatch"},
		{"delete a line", func(t *testing.T, dir string) string {
			return editSegment(t, dir, 0, func(l [][]byte) [][]byte { return append(l[:1:1], l[2:]...) })
		}, false, 2, 3, "seq gap: expected seq 2, found seq 3"},
		{"insert a line", func(t *testing.T, dir string) string {
			return editSegment(t, dir, 0, func(l [][]byte) [][]byte { return append(l[:2:2], l[1:]...) })
		}, false, 3, 2, "seq 2 repeated"},
		{"reorder lines", func(t *testing.T, dir string) string {
			return editSegment(t, dir, 0, func(l [][]byte) [][]byte { l[0], l[1] = l[1], l[0]; return l })
		}, false, 1, 2, "seq gap: expected seq 1, found seq 2"},
		{"truncate a line", func(t *testing.T, dir string) string {
			return editSegment(t, dir, 0, func(l [][]byte) [][]byte { l[1] = l[1][:40]; return l[:2] })
		}, false, 2, 0, "torn line"},
		{"delete the last entry", func(t *testing.T, dir string) string {
			segs := segments(t, dir, "gw-test")
			editSegment(t, dir, len(segs)-1, func(l [][]byte) [][]byte { return l[:len(l)-1] })
			return checkpointName("gw-test")
		}, false, 3, 12, "beyond the end of the chain"},
		{"delete a segment", func(t *testing.T, dir string) string {
			segs := segments(t, dir, "gw-test")
			if err := os.Remove(segs[1]); err != nil {
				t.Fatal(err)
			}
			return filepath.Base(segs[2])
		}, false, 0, 0, "a segment is missing"},
		{"change a checkpoint hash", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, checkpointName("gw-test"))
			lines := bytes.SplitAfter(must(os.ReadFile(p)), []byte("\n"))
			flipHex(lines[0], bytes.Index(lines[0], []byte(`"hash":"`))+8)
			writeFile(t, p, bytes.Join(lines, nil))
			return checkpointName("gw-test")
		}, false, 1, 5, "checkpoint hash does not match"},
		{"change a checkpoint hash, signatures checked", func(t *testing.T, dir string) string {
			p := filepath.Join(dir, checkpointName("gw-test"))
			lines := bytes.SplitAfter(must(os.ReadFile(p)), []byte("\n"))
			flipHex(lines[1], bytes.Index(lines[1], []byte(`"hash":"`))+8)
			writeFile(t, p, bytes.Join(lines, nil))
			return checkpointName("gw-test")
		}, false, 2, 10, "bad signature"},
		{"wrong public key", func(t *testing.T, dir string) string { return checkpointName("gw-test") }, true, 1, 5, "signed with unknown key id"},
		{"remove the checkpoints, signatures checked", func(t *testing.T, dir string) string {
			if err := os.Remove(filepath.Join(dir, checkpointName("gw-test"))); err != nil {
				t.Fatal(err)
			}
			return checkpointName("gw-test")
		}, false, 0, 0, "no checkpoint"},
		{"torn file without recovery entry", func(t *testing.T, dir string) string {
			name := tornName(segmentName("gw-test", 1), 10)
			writeFile(t, filepath.Join(dir, name), []byte("x"))
			return name
		}, false, 0, 0, "no audit.recovery entry"},
		{"entry of another chain", func(t *testing.T, dir string) string {
			return editSegment(t, dir, 0, func(l [][]byte) [][]byte {
				l[0] = reseal(t, bytes.Replace(l[0], []byte(`"chain":"gw-test"`), []byte(`"chain":"gw-other"`), 1))
				return l
			})
		}, false, 1, 1, "entry of chain"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			pub := signedChain(t, dir)
			if _, err := Verify(dir, pub); err != nil {
				t.Fatalf("untampered chain: %v", err)
			}
			file := tc.tamper(t, dir)
			var key ed25519.PublicKey
			if strings.Contains(tc.name, "signatures checked") {
				key = pub
			}
			if tc.wrongKey {
				key = wrongKey
			}
			rep, err := Verify(dir, key)
			var f *Failure
			if !errors.As(err, &f) {
				t.Fatalf("Verify = %v, want a *Failure", err)
			}
			if f.File != file || f.Line != tc.line || f.Seq != tc.seq || !strings.Contains(f.Reason, tc.reason) {
				t.Errorf("failure = %s line %d seq %d %q\nwant %s line %d seq %d %q", f.File, f.Line, f.Seq, f.Reason, file, tc.line, tc.seq, tc.reason)
			}
			if len(rep.Failures) != 1 || rep.Chains[0].Failure == nil {
				t.Errorf("report failures = %+v", rep.Failures)
			}
		})
	}
}

func TestVerifySeveralChains(t *testing.T) {
	dir := t.TempDir()
	a := openLog(t, Config{Dir: dir, Chain: "gw-a"})
	b := openLog(t, Config{Dir: dir, Chain: "gw-b"})
	appendN(t, a, 3)
	appendN(t, b, 4)
	for _, l := range []*Log{a, b} {
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
	rep := mustVerify(t, dir)
	if len(rep.Chains) != 2 || rep.Entries != 7 || rep.Chains[0].Chain != "gw-a" || rep.Chains[1].Entries != 4 {
		t.Fatalf("report %+v", rep)
	}
	if cp := rep.Chains[1].LastCheckpoint; cp == nil || cp.Seq != 4 || cp.Hash != rep.Chains[1].LastHash || cp.Signature != "" {
		t.Errorf("last checkpoint of gw-b = %+v", cp)
	}
	// Breaking one chain leaves the other verified.
	p := segments(t, dir, "gw-b")[0]
	writeFile(t, p, bytes.Replace(must(os.ReadFile(p)), []byte(`"s1"`), []byte(`"s2"`), 1))
	rep, err := Verify(dir, nil)
	if !IsFailure(err) || rep.Chains[0].Failure != nil || rep.Chains[1].Failure == nil || rep.Chains[1].Failure.Chain != "gw-b" {
		t.Fatalf("err %v, report %+v", err, rep)
	}
}

func TestVerifyEmptyAndMissingDir(t *testing.T) {
	rep, err := Verify(t.TempDir(), nil)
	if err != nil || len(rep.Chains) != 0 {
		t.Fatalf("empty dir: %v %+v", err, rep)
	}
	if _, err := Verify(filepath.Join(t.TempDir(), "nope"), nil); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing dir: %v", err)
	}
}

func TestCheckpointsEveryAndInterval(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, Config{Dir: dir, CheckpointEvery: 4, CheckpointInterval: 20 * time.Millisecond})
	appendN(t, l, 9) // checkpoints at 4 and 8 by count
	deadline := time.Now().Add(5 * time.Second)
	for l.Stats().Checkpoints < 3 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond) // the interval checkpoints seq 9
	}
	n := l.Stats().Checkpoints
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if n != 3 || l.Stats().Checkpoints != 3 {
		t.Fatalf("checkpoints before close %d, after %d; want 3 (Close has nothing new to attest)", n, l.Stats().Checkpoints)
	}
	rep := mustVerify(t, dir)
	if cp := rep.Chains[0].LastCheckpoint; rep.Chains[0].Checkpoints != 3 || cp.Seq != 9 {
		t.Errorf("checkpoints %d, last %+v", rep.Chains[0].Checkpoints, cp)
	}
}

func TestKeygen(t *testing.T) {
	dir := t.TempDir()
	priv, pub := filepath.Join(dir, "a.key"), filepath.Join(dir, "a.pub")
	if err := Keygen(priv, pub); err != nil {
		t.Fatal(err)
	}
	if fi := must(os.Stat(priv)); fi.Mode().Perm() != 0o600 {
		t.Errorf("private key mode %v", fi.Mode().Perm())
	}
	if err := Keygen(priv, filepath.Join(dir, "b.pub")); err == nil {
		t.Error("Keygen overwrote an existing private key")
	}
	k := must(LoadPrivateKey(priv))
	p := must(LoadPublicKey(pub))
	if !k.Public().(ed25519.PublicKey).Equal(p) {
		t.Error("public key does not match private key")
	}
	if _, err := LoadPublicKey(priv); err == nil {
		t.Error("private key accepted as public key")
	}
	cp := signCheckpoint(Checkpoint{Chain: "c", Seq: 1, Hash: GenesisHash, TS: "2026-01-02T03:04:05.000000000Z"}, k)
	if err := cp.verifySignature(p); err != nil {
		t.Fatal(err)
	}
	want := `{"chain":"c","hash":"` + GenesisHash + `","seq":1,"ts":"2026-01-02T03:04:05.000000000Z"}`
	if string(cp.SignedMessage()) != want {
		t.Errorf("signed message %s", cp.SignedMessage())
	}
	if _, err := parseCheckpoint(bytes.TrimSuffix(cp.line(), []byte("\n"))); err != nil {
		t.Errorf("own checkpoint line: %v", err)
	}
}

func TestAppendRejectsWithoutBreakingLog(t *testing.T) {
	l := openLog(t, Config{Dir: t.TempDir()})
	if _, err := l.Append(context.Background(), Record{}); err == nil || errors.Is(err, ErrUnavailable) {
		t.Fatalf("empty record: %v", err)
	}
	if e := appendN(t, l, 1)[0]; e.Seq != 1 {
		t.Errorf("seq %d", e.Seq)
	}
}

// flipHex changes the hex digit at b[i] to another hex digit.
func flipHex(b []byte, i int) {
	if b[i] == '0' {
		b[i] = '1'
	} else {
		b[i] = '0'
	}
}
