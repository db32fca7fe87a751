package audit

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	tdlog "github.com/transparency-dev/formats/log"
	tdproof "github.com/transparency-dev/formats/proof"
	"golang.org/x/mod/sumdb/note"
)

// provedChain writes n entries on chain gw-test in a new directory, with
// checkpoints every 4 and at Close, signed with a new key.
func provedChain(t *testing.T, n int) (string, keyPair) {
	t.Helper()
	dir, k := t.TempDir(), newKeyPair(t)
	l := openLog(t, Config{Dir: dir, SigningKeyFile: k.priv, CheckpointEvery: 4, CheckpointInterval: -1})
	appendN(t, l, n)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir, k
}

// TestInclusionProofIndependent: a proof written by Prove verifies with the
// independent RFC verifier (and with VerifyInclusionProof) for the first,
// a middle and the last entry, against the latest checkpoint and against an
// earlier one; the proof's entry is the line in the segment.
func TestInclusionProofIndependent(t *testing.T) {
	dir, k := provedChain(t, 37)
	lines := allLines(t, dir, "gw-test")
	if got := rfcMTH(lines); !bytes.Equal(got, mustRoot(t, must(LatestCheckpointNote(dir, "gw-test", -1)), k.pub)) {
		t.Fatal("the latest checkpoint's root is not the RFC 6962 root of the 37 lines")
	}
	for _, size := range []int64{-1, 12, 4} {
		var cp []byte
		if size > 0 {
			cp = must(LatestCheckpointNote(dir, "gw-test", size))
		}
		last := int64(37)
		if size > 0 {
			last = size
		}
		for _, seq := range []int64{1, (last + 1) / 2, last} {
			p, err := Prove(dir, "", seq, cp)
			if err != nil {
				t.Fatalf("Prove seq %d at size %d: %v", seq, size, err)
			}
			file := p.Marshal()
			entry, index, err := rfcCheckProofFile(file, k.pub)
			if err != nil {
				t.Fatalf("independent verifier, seq %d at size %d: %v\n%s", seq, size, err, file)
			}
			if !bytes.Equal(entry, lines[seq-1]) || index != uint64(seq-1) {
				t.Fatalf("seq %d proves index %d, entry %s", seq, index, entry)
			}
			res, err := VerifyInclusionProof(must(ParseInclusionProof(file)), []ed25519.PublicKey{k.pub})
			if err != nil || res.Entry.Seq != seq || res.Chain != "gw-test" {
				t.Fatalf("VerifyInclusionProof seq %d: %+v, %v", seq, res, err)
			}
		}
	}
	if _, err := Prove(dir, "", 38, nil); err == nil || !strings.Contains(err.Error(), "not in the checkpoint's tree") {
		t.Errorf("Prove beyond the checkpoint: %v", err)
	}
}

func mustRoot(t *testing.T, note []byte, pub ed25519.PublicKey) []byte {
	t.Helper()
	cp, err := rfcOpenCheckpoint(note, pub)
	if err != nil {
		t.Fatalf("checkpoint: %v\n%s", err, note)
	}
	return cp.root
}

// TestInclusionProofTampered: every change to a proof is refused, by the
// independent verifier and by VerifyInclusionProof.
func TestInclusionProofTampered(t *testing.T) {
	dir, k := provedChain(t, 21)
	other := newKeyPair(t)
	p := must(Prove(dir, "", 9, nil))
	lines := allLines(t, dir, "gw-test")
	flip := func(b []byte, i int) []byte { b = bytes.Clone(b); b[i] ^= 1; return b }
	for _, tc := range []struct {
		name   string
		edit   func(InclusionProof) InclusionProof
		key    ed25519.PublicKey
		reason string
	}{
		{"a proof hash", func(p InclusionProof) InclusionProof {
			p.Hashes = append([][]byte{flip(p.Hashes[0], 3)}, p.Hashes[1:]...)
			return p
		}, k.pub, "not leaf 8"},
		{"a proof hash missing", func(p InclusionProof) InclusionProof { p.Hashes = p.Hashes[1:]; return p }, k.pub, "not leaf 8"},
		{"a proof hash too many", func(p InclusionProof) InclusionProof { p.Hashes = append(p.Hashes, p.Hashes[0]); return p }, k.pub, "not leaf 8"},
		{"the index", func(p InclusionProof) InclusionProof { p.Index = 9; return p }, k.pub, "not leaf 9"},
		{"another entry of the chain", func(p InclusionProof) InclusionProof { p.Entry = lines[9]; return p }, k.pub, "seq 10 is not leaf 8"},
		{"the entry resealed", func(p InclusionProof) InclusionProof {
			p.Entry = bytes.TrimSuffix(reseal(t, append(bytes.Replace(p.Entry, []byte(`"agent-a"`), []byte(`"agent-x"`), 1), '\n')), []byte("\n"))
			return p
		}, k.pub, "is not leaf 8"},
		{"the entry's bytes", func(p InclusionProof) InclusionProof { p.Entry = flip(p.Entry, 30); return p }, k.pub, "the proof's entry"},
		{"the checkpoint signature", func(p InclusionProof) InclusionProof {
			n := len(p.Checkpoint)
			sig := bytes.LastIndexByte(p.Checkpoint[:n-1], ' ') + 10
			p.Checkpoint = flip(p.Checkpoint, sig)
			return p
		}, k.pub, "checkpoint"},
		{"the checkpoint's tree size", func(p InclusionProof) InclusionProof {
			p.Checkpoint = bytes.Replace(p.Checkpoint, []byte("\n21\n"), []byte("\n20\n"), 1)
			return p
		}, k.pub, "checkpoint signature"},
		{"another key", func(p InclusionProof) InclusionProof { return p }, other.pub, "no signature by the key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			file := tc.edit(p).Marshal()
			if _, _, err := rfcCheckProofFile(file, tc.key); err == nil {
				t.Errorf("independent verifier accepts it")
			}
			q, err := ParseInclusionProof(file)
			if err == nil {
				_, err = VerifyInclusionProof(q, []ed25519.PublicKey{tc.key})
			}
			if err == nil || !strings.Contains(err.Error(), tc.reason) {
				t.Errorf("VerifyInclusionProof = %v, want ~%q", err, tc.reason)
			}
		})
	}
	if _, err := VerifyInclusionProof(p, []ed25519.PublicKey{k.pub}); err != nil {
		t.Fatalf("the untouched proof: %v", err)
	}
}

// TestConsistencyProof: the proof between two checkpoints of a chain
// verifies with the independent verifier and VerifyConsistencyProof, for
// sizes a power of two or not; a changed hash, swapped checkpoints, or a
// checkpoint of another trail are refused.
func TestConsistencyProof(t *testing.T) {
	dir, k := provedChain(t, 37)
	keys := []ed25519.PublicKey{k.pub}
	note := func(size int64) []byte { return must(LatestCheckpointNote(dir, "gw-test", size)) }
	for _, sizes := range [][2]int64{{4, 37}, {16, 37}, {12, 36}, {36, 37}, {37, 37}} {
		oldN, newN := note(sizes[0]), note(sizes[1])
		p, err := ProveConsistency(dir, oldN, newN)
		if err != nil {
			t.Fatalf("ProveConsistency %v: %v", sizes, err)
		}
		q := must(ParseConsistencyProof(p.Marshal()))
		o, n := mustRFC(t, q.Old, k.pub), mustRFC(t, q.New, k.pub)
		if !rfcVerifyConsistency(o.size, n.size, o.root, n.root, q.Hashes) {
			t.Fatalf("independent verifier refuses %v", sizes)
		}
		res, err := VerifyConsistencyProof(q, keys)
		if err != nil || res.OldSize != uint64(sizes[0]) || res.NewSize != uint64(sizes[1]) {
			t.Fatalf("VerifyConsistencyProof %v: %+v %v", sizes, res, err)
		}
		if len(q.Hashes) > 0 {
			bad := q
			bad.Hashes = append([][]byte{bytes.Clone(q.Hashes[0])}, q.Hashes[1:]...)
			bad.Hashes[0][0] ^= 1
			if rfcVerifyConsistency(o.size, n.size, o.root, n.root, bad.Hashes) {
				t.Errorf("%v: independent verifier accepts a changed hash", sizes)
			}
			if _, err := VerifyConsistencyProof(bad, keys); err == nil {
				t.Errorf("%v: a changed hash verifies", sizes)
			}
			swapped := ConsistencyProof{Old: q.New, New: q.Old, Hashes: q.Hashes}
			if _, err := VerifyConsistencyProof(swapped, keys); err == nil {
				t.Errorf("%v: swapped checkpoints verify", sizes)
			}
		}
	}
	// A checkpoint of another trail (same chain name, another history).
	otherDir, _ := provedChain(t, 37)
	if _, err := ProveConsistency(dir, note(12), must(LatestCheckpointNote(otherDir, "gw-test", 36))); err == nil ||
		!strings.Contains(err.Error(), "not this trail's checkpoint") {
		t.Errorf("ProveConsistency with a foreign checkpoint: %v", err)
	}
}

func mustRFC(t *testing.T, note []byte, pub ed25519.PublicKey) rfcCheckpoint {
	t.Helper()
	cp, err := rfcOpenCheckpoint(note, pub)
	if err != nil {
		t.Fatalf("checkpoint: %v", err)
	}
	return cp
}

// TestPreMerkleTrail: a trail written before Merkle trees (testdata) still
// verifies; a gateway continuing it (after a key rotation) marks the
// tree's start with a checkpoint of size 0 at its last entry, the tree
// holds only the entries after it, the whole trail verifies with both keys,
// and an entry before the mark cannot be proved (the hash chain covers it).
func TestPreMerkleTrail(t *testing.T) {
	dir := t.TempDir()
	for _, f := range []string{"gw-old-00000000000000000001.jsonl", "gw-old.checkpoints.jsonl"} {
		writeFile(t, filepath.Join(dir, f), must(os.ReadFile(filepath.Join("testdata", "premerkle", f))))
	}
	oldKey := must(LoadPublicKey(filepath.Join("testdata", "premerkle", "gw-old.pub")))
	rep, err := Verify(dir, oldKey)
	if err != nil || rep.Chains[0].MerkleStart != 0 || rep.Entries != 7 {
		t.Fatalf("the old trail as it was: %+v, %v", rep.Chains, err)
	}
	k := newKeyPair(t)
	l := openLog(t, Config{Dir: dir, Chain: "gw-old", SigningKeyFile: k.priv, CheckpointEvery: 5, CheckpointInterval: -1})
	appendN(t, l, 12)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	rep, err = Verify(dir, oldKey, k.pub)
	if err != nil {
		t.Fatalf("Verify the continued trail: %v", err)
	}
	if c := rep.Chains[0]; c.MerkleStart != 8 || c.Entries != 19 {
		t.Fatalf("report: merkle start %d, %d entries; want 8, 19", c.MerkleStart, c.Entries)
	}
	cps := readCheckpointsOf(t, dir, "gw-old")
	if len(cps) < 4 || cps[2].Merkle != nil || cps[3].Merkle == nil {
		t.Fatalf("checkpoints: %+v", cps)
	}
	mark := cps[3]
	if mark.Seq != 7 || mark.Merkle.Start != 8 || mark.Merkle.Size != 0 || mark.KeyID != k.id {
		t.Fatalf("mark = seq %d, tree %+v, key %s; want seq 7, start 8, size 0, key %s", mark.Seq, mark.Merkle, mark.KeyID, k.id)
	}
	lines := allLines(t, dir, "gw-old")
	if got := mustRoot(t, must(LatestCheckpointNote(dir, "gw-old", -1)), k.pub); !bytes.Equal(got, rfcMTH(lines[7:])) {
		t.Fatal("the tree is not over the entries after the mark")
	}
	p, err := Prove(dir, "gw-old", 8, nil)
	if err != nil || p.Index != 0 {
		t.Fatalf("Prove seq 8: index %d, %v", p.Index, err)
	}
	if _, _, err := rfcCheckProofFile(p.Marshal(), k.pub); err != nil {
		t.Fatalf("independent verifier, seq 8: %v", err)
	}
	if _, err := Prove(dir, "gw-old", 7, nil); err == nil || !strings.Contains(err.Error(), "seqs 8 to 19") {
		t.Errorf("Prove seq 7 (before the tree): %v", err)
	}
	// Reopening does not mark again: the tree goes on.
	l = openLog(t, Config{Dir: dir, Chain: "gw-old", SigningKeyFile: k.priv, CheckpointEvery: 5, CheckpointInterval: -1})
	appendN(t, l, 2)
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if rep, err := Verify(dir, oldKey, k.pub); err != nil || rep.Chains[0].MerkleStart != 8 {
		t.Fatalf("after a restart: %+v, %v", rep.Chains, err)
	}
}

func readCheckpointsOf(t *testing.T, dir, chain string) []Checkpoint {
	t.Helper()
	var out []Checkpoint
	for _, l := range bytes.Split(bytes.TrimSuffix(must(os.ReadFile(filepath.Join(dir, checkpointName(chain)))), []byte("\n")), []byte("\n")) {
		out = append(out, must(parseCheckpoint(l)))
	}
	return out
}

// TestVerifyChecksTheTree: a checkpoint whose tree is not the entries'
// tree fails Verify (unsigned, so only the recomputation can tell), and a
// signed checkpoint whose note is missing or signed by no given key fails
// with keys.
func TestVerifyChecksTheTree(t *testing.T) {
	t.Run("range", func(t *testing.T) {
		dir := t.TempDir()
		l := openLog(t, Config{Dir: dir, CheckpointEvery: 4, CheckpointInterval: -1})
		appendN(t, l, 9)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		rewriteCheckpoints(t, dir, func(c []Checkpoint) []Checkpoint {
			r := c[1].Merkle.Range
			r[0] = strings.Repeat("0", 64)
			return c
		})
		_, err := Verify(dir)
		if f, ok := err.(*Failure); !ok || f.Line != 2 || f.Seq != 8 || !strings.Contains(f.Reason, "not the tree of the entries") {
			t.Fatalf("Verify = %v", err)
		}
	})
	t.Run("note", func(t *testing.T) {
		dir, k := provedChain(t, 7)
		rewriteCheckpoints(t, dir, func(c []Checkpoint) []Checkpoint {
			c[0].Note = ""
			return c
		})
		if _, err := Verify(dir); err != nil {
			t.Fatalf("without keys the note is not required: %v", err)
		}
		_, err := Verify(dir, k.pub)
		if f, ok := err.(*Failure); !ok || f.Line != 1 || !strings.Contains(f.Reason, "has no signed note") {
			t.Fatalf("Verify = %v", err)
		}
	})
	t.Run("note root", func(t *testing.T) {
		dir, _ := provedChain(t, 7)
		rewriteCheckpoints(t, dir, func(c []Checkpoint) []Checkpoint {
			root := base64.StdEncoding.EncodeToString(make([]byte, 32))
			lines := strings.SplitN(c[0].Note, "\n", 4)
			lines[2] = root
			c[0].Note = strings.Join(lines, "\n")
			return c
		})
		_, err := Verify(dir)
		if f, ok := err.(*Failure); !ok || f.Line != 1 || !strings.Contains(f.Reason, "note is not the checkpoint of this chain's tree") {
			t.Fatalf("Verify = %v", err)
		}
	})
}

// TestProofReadByC2SPTools: the proof file and its checkpoint are read by
// transparency-dev's implementations of the C2SP formats, another reader
// than the package's, with the public key as a signed-note verifier key.
func TestProofReadByC2SPTools(t *testing.T) {
	dir, k := provedChain(t, 13)
	file := must(Prove(dir, "", 6, nil)).Marshal()
	var p tdproof.TLogProof
	if err := p.Unmarshal(file); err != nil {
		t.Fatalf("tlog-proof Unmarshal: %v", err)
	}
	vkey := must(VerifierKey("gw-test", k.pub))
	v := must(note.NewVerifier(vkey))
	cp, _, _, err := tdlog.ParseCheckpoint(p.Checkpoint, Origin("gw-test"), v)
	if err != nil {
		t.Fatalf("ParseCheckpoint: %v", err)
	}
	path := make([][]byte, len(p.Hashes))
	for i := range p.Hashes {
		path[i] = p.Hashes[i][:]
	}
	leaf := rfcLeaf(p.ExtraData)
	if cp.Size != 13 || p.Index != 5 || !rfcVerifyInclusion(p.Index, cp.Size, leaf, path, cp.Hash) {
		t.Fatalf("size %d, index %d: the proof read by the C2SP tools does not verify", cp.Size, p.Index)
	}
	if !bytes.Equal(p.Marshal(), file) {
		t.Errorf("the C2SP tools write the proof differently:\n%s\n%s", p.Marshal(), file)
	}
}
