package audit

import (
	"bytes"
	"crypto/ed25519"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// exportedChain writes 12 signed entries (checkpoints at 5, 10 and 12)
// and exports them all with their signatures checked; it returns the
// export file and the key.
func exportedChain(t *testing.T, format string) (string, keyPair) {
	t.Helper()
	dir := t.TempDir()
	k := newKeyPair(t)
	l := openLog(t, Config{Dir: dir, SigningKeyFile: k.priv, SegmentMaxBytes: 1500, CheckpointEvery: 5})
	appendN(t, l, 12)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "export."+format)
	if _, err := Export(dir, Filter{}, format, out, Options{Keys: []ed25519.PublicKey{k.pub}}); err != nil {
		t.Fatal(err)
	}
	return out, k
}

// tamper copies the export and its manifest to a new directory, applies
// edit to the export's lines (each with its newline) and manifest to the
// manifest's JSON object, and returns the copy's path.
func tamper(t *testing.T, out string, edit func([][]byte) [][]byte, manifest func(map[string]any)) string {
	t.Helper()
	cp := filepath.Join(t.TempDir(), filepath.Base(out))
	lines := bytes.SplitAfter(must(os.ReadFile(out)), []byte("\n"))
	if edit != nil {
		lines = edit(lines)
	}
	writeFile(t, cp, bytes.Join(lines, nil))
	var m map[string]any
	if err := json.Unmarshal(must(os.ReadFile(out+".manifest.json")), &m); err != nil {
		t.Fatal(err)
	}
	if manifest != nil {
		manifest(m)
	}
	writeFile(t, cp+".manifest.json", must(json.Marshal(m)))
	return cp
}

func chain0(m map[string]any) map[string]any { return m["chains"].([]any)[0].(map[string]any) }

func TestVerifyExportWhole(t *testing.T) {
	for _, format := range []string{"jsonl", "csv"} {
		t.Run(format, func(t *testing.T) {
			out, k := exportedChain(t, format)
			rep, err := VerifyExport(out, out+".manifest.json", Options{Keys: []ed25519.PublicKey{k.pub}})
			if err != nil {
				t.Fatal(err)
			}
			c := rep.Chains[0]
			if rep.Entries != 12 || !c.Contiguous || !c.CheckpointInExport || !c.SignaturesChecked || c.Checkpoint.Seq != 12 {
				t.Errorf("report %+v, chain %+v", rep, c)
			}
			// Without keys the signatures are not checked, and the report says so.
			rep, err = VerifyExport(out, out+".manifest.json", Options{})
			if err != nil || rep.Chains[0].SignaturesChecked {
				t.Errorf("without keys: %v, %+v", err, rep.Chains)
			}
		})
	}
}

// TestVerifyExportNamesTheFirstProblem tampers with an export in each way
// an auditor must catch, and wants the place and the reason named.
func TestVerifyExportNamesTheFirstProblem(t *testing.T) {
	out, k := exportedChain(t, "jsonl")
	other := newKeyPair(t)
	swap := func(i, j int) func([][]byte) [][]byte {
		return func(l [][]byte) [][]byte { l[i], l[j] = l[j], l[i]; return l }
	}
	for _, tc := range []struct {
		name     string
		edit     func([][]byte) [][]byte
		manifest func(map[string]any)
		key      ed25519.PublicKey
		file     string // "" the export, "m" its manifest
		line     int
		reason   string
	}{
		{name: "changed entry", edit: func(l [][]byte) [][]byte {
			l[2] = bytes.Replace(l[2], []byte(`"model":"mock-1"`), []byte(`"model":"mock-2"`), 1)
			return l
		}, line: 3, reason: "hash mismatch"},
		{name: "changed and resealed entry", edit: func(l [][]byte) [][]byte {
			l[2] = reseal(t, bytes.Replace(l[2], []byte(`"model":"mock-1"`), []byte(`"model":"mock-2"`), 1))
			return l
		}, line: 4, reason: "broken link: prev_hash is not the hash of seq 3"},
		{name: "removed line", edit: func(l [][]byte) [][]byte { return append(l[:4:4], l[5:]...) },
			line: 5, reason: "seq gap: expected seq 5 of chain \"gw-test\", found seq 6"},
		{name: "reordered lines", edit: swap(6, 7), line: 7, reason: "seq gap: expected seq 7"},
		{name: "removed first line", edit: func(l [][]byte) [][]byte { return l[1:] },
			line: 1, reason: "the first entry of chain \"gw-test\" is seq 2"},
		{name: "cut mid-line", edit: func(l [][]byte) [][]byte { l[11] = l[11][:40]; return l },
			line: 12, reason: "torn line"},
		{name: "cut at a line", edit: func(l [][]byte) [][]byte { return l[:10] },
			reason: "after line 10, the end of the file: chain \"gw-test\" ends at seq 10, the manifest's last_seq is 12"},
		{name: "line appended", edit: func(l [][]byte) [][]byte { return append(l, l[11]) },
			line: 13, reason: "seq 12 after seq 12"},
		{name: "manifest count", manifest: func(m map[string]any) { m["count"] = 13 },
			reason: "12 entries, the manifest says count 13"},
		{name: "manifest sha256", manifest: func(m map[string]any) { m["sha256"] = strings.Repeat("ab", 32) },
			reason: "the manifest says " + strings.Repeat("ab", 32)},
		{name: "manifest chain count", manifest: func(m map[string]any) { chain0(m)["count"] = 11 }, file: "m",
			reason: "contiguous is true for 11 entries from seq 1 to 12"},
		{name: "manifest unknown member", manifest: func(m map[string]any) { m["trust_me"] = true }, file: "m",
			reason: "malformed manifest: json: unknown field \"trust_me\""},
		{name: "forged checkpoint signature", manifest: func(m map[string]any) {
			cp := chain0(m)["latest_checkpoint"].(map[string]any)
			forged := Checkpoint{Chain: "gw-test", Seq: 12, Hash: cp["hash"].(string), TS: cp["ts"].(string)}
			cp["signature"] = signCheckpoint(forged, ed25519.NewKeyFromSeed(make([]byte, 32))).Signature
		}, file: "m", reason: "latest_checkpoint: bad signature"},
		{name: "wrong public key", key: other.pub, file: "m", reason: "signed with unknown key id " + k.id},
		{name: "checkpoint moved", manifest: func(m map[string]any) {
			chain0(m)["latest_checkpoint"].(map[string]any)["hash"] = chain0(m)["first_hash"]
		}, file: "m", reason: "latest_checkpoint: hash differs from chain_last_hash at seq 12"},
		{name: "entry outside the filter", manifest: func(m map[string]any) {
			m["filter"].(map[string]any)["agent"] = "agent-a"
		}, line: 2, reason: "entry outside the manifest's filter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cp := tamper(t, out, tc.edit, tc.manifest)
			key := k.pub
			if tc.key != nil {
				key = tc.key
			}
			_, err := VerifyExport(cp, cp+".manifest.json", Options{Keys: []ed25519.PublicKey{key}})
			var f *Failure
			if !errors.As(err, &f) {
				t.Fatalf("VerifyExport: %v, want a failure", err)
			}
			file := filepath.Base(cp)
			if tc.file == "m" {
				file += ".manifest.json"
			}
			if f.File != file || f.Line != tc.line || !strings.Contains(f.Reason, tc.reason) {
				t.Errorf("failure %q at %s line %d; want %q at %s line %d", f.Reason, f.File, f.Line, tc.reason, file, tc.line)
			}
		})
	}
}

func TestVerifyExportCSVCell(t *testing.T) {
	out, k := exportedChain(t, "csv")
	cp := tamper(t, out, func(l [][]byte) [][]byte {
		l[3] = bytes.Replace(l[3], []byte(",mock-1,"), []byte(",mock-9,"), 1) // the model column, not the entry
		return l
	}, nil)
	_, err := VerifyExport(cp, cp+".manifest.json", Options{Keys: []ed25519.PublicKey{k.pub}})
	var f *Failure
	if !errors.As(err, &f) || f.Line != 4 || f.Seq != 3 || !strings.Contains(f.Reason, `column model is "mock-9", its entry says "mock-1"`) {
		t.Fatalf("VerifyExport: %v", err)
	}
}

// windowChain writes 40 entries (a signed checkpoint every 10, segments of
// a few entries), then, after since, 10 more; it returns the directory,
// since and the key.
func windowChain(t *testing.T) (string, time.Time, keyPair) {
	t.Helper()
	dir := t.TempDir()
	k := newKeyPair(t)
	l := openLog(t, Config{Dir: dir, SigningKeyFile: k.priv, SegmentMaxBytes: 2500, CheckpointEvery: 10, CheckpointInterval: -1})
	appendN(t, l, 40)
	time.Sleep(2 * time.Millisecond) // the checkpoint at seq 40 is written before since
	since := time.Now()
	appendN(t, l, 10)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, since, k
}

// TestExportSinceVerifiesFromTheCheckpoint: an export of a window, given
// the key, verifies from the last signed checkpoint before the window (a
// damaged entry before it, which a full verify reports, is not read) and
// its manifest says so; the auditor's check of it passes.
func TestExportSinceVerifiesFromTheCheckpoint(t *testing.T) {
	dir, since, k := windowChain(t)
	keys := []ed25519.PublicKey{k.pub}
	editSegment(t, dir, 0, func(lines [][]byte) [][]byte {
		lines[1] = bytes.Replace(lines[1], []byte(`"model":"mock-1"`), []byte(`"model":"mock-2"`), 1)
		return lines
	})
	if _, err := Verify(dir, k.pub); !IsFailure(err) {
		t.Fatalf("full verify: %v, want the damage at seq 2 found", err)
	}
	out := filepath.Join(t.TempDir(), "window.jsonl")
	m, err := Export(dir, Filter{Since: since}, "jsonl", out, Options{Keys: keys})
	if err != nil {
		t.Fatalf("window export: %v", err)
	}
	c := m.Chains[0]
	if m.Count != 10 || c.VerifiedFrom == nil || c.VerifiedFrom.Seq != 40 || c.EntriesVerified != 11 || !c.SignaturesChecked {
		t.Fatalf("manifest count %d, chain %+v; want 10 entries verified from checkpoint seq 40 (11 entries checked)", m.Count, c)
	}
	if c.VerifiedFrom.Signature == "" || c.VerifiedFrom.KeyID != k.id {
		t.Errorf("verified_from %+v: want the signed checkpoint", c.VerifiedFrom)
	}
	if _, err := VerifyExport(out, out+".manifest.json", Options{Keys: keys}); err != nil {
		t.Errorf("VerifyExport of the window: %v", err)
	}
	// Without a key no signature can anchor the window: everything is
	// verified, and the damage refuses the export.
	if _, err := Export(dir, Filter{Since: since}, "jsonl", out, Options{}); !IsFailure(err) {
		t.Errorf("window export without keys: %v, want refused", err)
	}
}

// TestExportSinceChecksFromTheAnchorOn: damage at or after the checkpoint
// the window starts from refuses the export.
func TestExportSinceChecksFromTheAnchorOn(t *testing.T) {
	for _, tc := range []struct {
		name   string
		seq    int64
		reseal bool
		want   string
	}{
		{"entry after the checkpoint", 45, false, "hash mismatch"},
		{"checkpoint's entry resealed", 40, true, "does not have the hash of the checkpoint verify started from"},
		{"entry after the checkpoint resealed", 41, true, "broken link"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, since, k := windowChain(t)
			damage(t, dir, tc.seq, tc.reseal)
			_, err := Export(dir, Filter{Since: since}, "jsonl", filepath.Join(t.TempDir(), "w.jsonl"), Options{Keys: []ed25519.PublicKey{k.pub}})
			var f *Failure
			if !errors.As(err, &f) || !strings.Contains(f.Reason, tc.want) {
				t.Fatalf("export: %v, want %q", err, tc.want)
			}
		})
	}
}

// damage changes the model of the entry at seq (resealing its hash, as a
// forger would, when reseal).
func damage(t *testing.T, dir string, seq int64, resealIt bool) {
	t.Helper()
	for i := range segments(t, dir, "gw-test") {
		editSegment(t, dir, i, func(lines [][]byte) [][]byte {
			for j, l := range lines {
				if e, err := parseEntry(bytes.TrimSuffix(l, []byte("\n"))); err == nil && e.Seq == seq {
					lines[j] = bytes.Replace(l, []byte(`"model":"mock-1"`), []byte(`"model":"mock-2"`), 1)
					if resealIt {
						lines[j] = reseal(t, lines[j])
					}
				}
			}
			return lines
		})
	}
}

// FuzzVerifyExport feeds VerifyExport an export and a manifest as someone
// could hand them over: it must not panic, and whatever it accepts must
// be what the manifest says (the count and the sha256 of the bytes).
func FuzzVerifyExport(f *testing.F) {
	dir := f.TempDir()
	l := openLog(f, Config{Dir: dir, CheckpointEvery: 2})
	appendN(f, l, 3)
	if err := l.Close(); err != nil {
		f.Fatal(err)
	}
	for _, format := range []string{"jsonl", "csv"} {
		out := filepath.Join(f.TempDir(), "e."+format)
		if _, err := Export(dir, Filter{}, format, out, Options{}); err != nil {
			f.Fatal(err)
		}
		f.Add(must(os.ReadFile(out)), must(os.ReadFile(out+".manifest.json")))
	}
	f.Add([]byte("{}\n"), []byte(`{"version":1,"format":"jsonl","sha256":"`+strings.Repeat("0", 64)+`","chains":[{"chain":"c","count":-1}]}`))
	f.Fuzz(func(t *testing.T, export, manifest []byte) {
		rep, err := verifyExport(bytes.NewReader(export), manifest, "e", "e.manifest.json", Options{})
		if err != nil {
			return
		}
		var m Manifest
		_ = json.Unmarshal(manifest, &m)
		if rep.Entries != m.Count || rep.SHA256 != sha256Hex(export) || rep.SHA256 != m.SHA256 {
			t.Fatalf("accepted: report %+v, manifest count %d sha256 %s", rep, m.Count, m.SHA256)
		}
	})
}

// TestExportRereadsWhatWasVerified: the export reads the segments again
// after verifying them; an entry resealed or removed in between is an
// error, not an entry exported unverified.
func TestExportRereadsWhatWasVerified(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(t *testing.T, dir string)
	}{
		{"entry resealed", func(t *testing.T, dir string) { damage(t, dir, 7, true) }},
		{"last entry removed", func(t *testing.T, dir string) {
			editSegment(t, dir, len(segments(t, dir, "gw-test"))-1, func(l [][]byte) [][]byte { return l[:len(l)-1] })
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			signedChain(t, dir)
			rep := mustVerify(t, dir)
			tc.edit(t, dir)
			cfs := must(scanDir(dir))
			var n int
			var last error
			for _, err := range entries(os.DirFS(dir), cfs[0], rep.Chains[0], nil) {
				if err != nil {
					last = err
					break
				}
				n++
			}
			if last == nil || !strings.Contains(last.Error(), "changed after it was verified") {
				t.Fatalf("read %d entries, error %v; want the change found", n, last)
			}
		})
	}
}
