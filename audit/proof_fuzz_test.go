package audit

import (
	"bytes"
	"crypto/ed25519"
	"testing"
)

// FuzzParseProof feeds arbitrary files to the proof readers verify-proof
// uses on what a third party sends: they must not panic, what they accept
// must be exactly what Marshal writes for it (one spelling per proof), and
// checking it must not panic either.
func FuzzParseProof(f *testing.F) {
	dir, k := t0Chain(f)
	f.Add(must(Prove(dir, "", 3, nil)).Marshal())
	f.Add(must(ProveConsistency(dir, must(LatestCheckpointNote(dir, "gw-test", 4)), must(LatestCheckpointNote(dir, "gw-test", 7)))).Marshal())
	f.Add([]byte("c2sp.org/tlog-proof@v1\nextra e30=\nindex 0\n\nx\n\n— x AAAA\n"))
	f.Add([]byte(`{"format":"sacpgw.audit/consistency-proof@v1","old":"a","new":"b","proof":[],"proof":[]}`))
	keys := []ed25519.PublicKey{k}
	f.Fuzz(func(t *testing.T, data []byte) {
		if p, err := ParseInclusionProof(data); err == nil {
			if !bytes.Equal(p.Marshal(), data) {
				t.Fatalf("accepted an inclusion proof that is not its own spelling:\n%q\n%q", data, p.Marshal())
			}
			_, _ = VerifyInclusionProof(p, keys)
		}
		if p, err := ParseConsistencyProof(data); err == nil {
			if len(p.Old) == 0 || len(p.New) == 0 {
				t.Fatal("accepted a consistency proof without checkpoints")
			}
			_, _ = VerifyConsistencyProof(p, keys)
		}
	})
}

// t0Chain writes 7 signed entries with checkpoints every 4 and at Close.
func t0Chain(f *testing.F) (string, ed25519.PublicKey) {
	dir := f.TempDir()
	priv, pub := dir+"/k.key", dir+"/k.pub"
	if err := Keygen(priv, pub); err != nil {
		f.Fatal(err)
	}
	l := openLog(f, Config{Dir: dir, SigningKeyFile: priv, CheckpointEvery: 4, CheckpointInterval: -1})
	appendN(f, l, 7)
	if err := l.Close(); err != nil {
		f.Fatal(err)
	}
	return dir, must(LoadPublicKey(pub))
}
