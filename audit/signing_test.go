package audit

import (
	"bytes"
	"crypto/ed25519"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// life is one run of the gateway on a chain: n entries, checkpointed every
// 3 and at Close, signed with the named key ("" = no signing key).
type life struct {
	key string
	n   int
}

// keyPair is a key made by Keygen, as an operator would.
type keyPair struct {
	priv, pubFile string
	pub           ed25519.PublicKey
	id            string
}

func newKeyPair(t *testing.T) keyPair {
	t.Helper()
	d := t.TempDir()
	k := keyPair{priv: filepath.Join(d, "k.key"), pubFile: filepath.Join(d, "k.pub")}
	if err := Keygen(k.priv, k.pubFile); err != nil {
		t.Fatal(err)
	}
	k.pub = must(LoadPublicKey(k.pubFile))
	k.id = KeyID(k.pub)
	return k
}

// writeLives runs the lives one after another on chain gw-test in dir.
func writeLives(t *testing.T, dir string, keys map[string]keyPair, lives ...life) {
	t.Helper()
	for _, lf := range lives {
		cfg := Config{Dir: dir, CheckpointEvery: 3, CheckpointInterval: -1}
		if lf.key != "" {
			cfg.SigningKeyFile = keys[lf.key].priv
		}
		l := openLog(t, cfg)
		appendN(t, l, lf.n)
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// firstMonth is the trail of the issue "the operator's first month": a
// week unsigned (entries 1-7, checkpoints at 3, 6, 7: lines 1-3), then
// signed with key a (entries 8-12, checkpoints at 10, 12: lines 4-5), then,
// after a key rotation, signed with key b (entries 13-16, checkpoints at
// 15, 16: lines 6-7).
func firstMonth(t *testing.T) (dir string, a, b keyPair) {
	t.Helper()
	dir, a, b = t.TempDir(), newKeyPair(t), newKeyPair(t)
	writeLives(t, dir, map[string]keyPair{"a": a, "b": b}, life{"", 7}, life{"a", 5}, life{"b", 4})
	var layout []string
	for _, c := range readCheckpoints(t, dir) {
		layout = append(layout, itoa(c.Seq)+":"+c.KeyID)
	}
	want := "3: 6: 7: 10:" + a.id + " 12:" + a.id + " 15:" + b.id + " 16:" + b.id
	if got := strings.Join(layout, " "); got != want {
		t.Fatalf("checkpoints (seq:key id) %s\nwant %s", got, want)
	}
	return dir, a, b
}

func readCheckpoints(t *testing.T, dir string) []Checkpoint {
	t.Helper()
	var out []Checkpoint
	for _, line := range bytes.Split(bytes.TrimSuffix(must(os.ReadFile(filepath.Join(dir, checkpointName("gw-test")))), []byte("\n")), []byte("\n")) {
		out = append(out, must(parseCheckpoint(line)))
	}
	return out
}

// rewriteCheckpoints replaces the checkpoints file with edit's result,
// each written as the gateway writes a checkpoint line.
func rewriteCheckpoints(t *testing.T, dir string, edit func([]Checkpoint) []Checkpoint) {
	t.Helper()
	var b []byte
	for _, c := range edit(readCheckpoints(t, dir)) {
		b = append(b, c.line()...)
	}
	writeFile(t, filepath.Join(dir, checkpointName("gw-test")), b)
}

// forgeLast rewrites the chain's last entry (another agent, hash resealed)
// as someone with write access but without the signing key would, and
// returns the new hash.
func forgeLast(t *testing.T, dir string) string {
	t.Helper()
	var forged []byte
	editSegment(t, dir, 0, func(l [][]byte) [][]byte {
		last := &l[len(l)-1]
		*last = reseal(t, bytes.Replace(*last, []byte(`"agent-b"`), []byte(`"agent-x"`), 1))
		forged = *last
		return l
	})
	return must(parseEntry(bytes.TrimSuffix(forged, []byte("\n")))).Hash
}

// TestVerifyRefusesSigningDowngrade: unsigned checkpoints are accepted
// only before the first signed one. Each case is an attack by someone who
// can write the audit directory but has no signing key; each would verify
// if an unsigned checkpoint were accepted anywhere in the chain.
func TestVerifyRefusesSigningDowngrade(t *testing.T) {
	for _, tc := range []struct {
		name   string
		attack func(t *testing.T, dir string)
		line   int
		seq    int64
		reason string
	}{
		{"rewrite the last entry and replace its signed checkpoint by an unsigned one", func(t *testing.T, dir string) {
			h := forgeLast(t, dir)
			rewriteCheckpoints(t, dir, func(c []Checkpoint) []Checkpoint {
				c[6] = Checkpoint{Chain: "gw-test", Seq: 16, Hash: h, TS: c[6].TS}
				return c
			})
		}, 7, 16, "unsigned checkpoint after signing began at checkpoint seq 10 (line 4)"},
		{"strip the signature of the last checkpoint", func(t *testing.T, dir string) {
			rewriteCheckpoints(t, dir, func(c []Checkpoint) []Checkpoint {
				c[6].Signature, c[6].KeyID = "", ""
				return c
			})
		}, 7, 16, "unsigned checkpoint after signing began"},
		{"append an unsigned checkpoint after the signed ones", func(t *testing.T, dir string) {
			rewriteCheckpoints(t, dir, func(c []Checkpoint) []Checkpoint {
				u := c[6]
				u.Signature, u.KeyID = "", ""
				return append(c, u)
			})
		}, 8, 16, "unsigned checkpoint after signing began"},
		{"rewrite the last entry and replace every signed checkpoint by an unsigned one", func(t *testing.T, dir string) {
			h := forgeLast(t, dir)
			rewriteCheckpoints(t, dir, func(c []Checkpoint) []Checkpoint {
				return append(c[:3], Checkpoint{Chain: "gw-test", Seq: 16, Hash: h, TS: c[6].TS})
			})
		}, 0, 0, "no signed checkpoint"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, a, b := firstMonth(t)
			if _, err := Verify(dir, a.pub, b.pub); err != nil {
				t.Fatalf("before the attack: %v", err)
			}
			tc.attack(t, dir)
			if _, err := Verify(dir); err != nil {
				t.Fatalf("the attack is not even visible without keys, as intended for this test: %v", err)
			}
			_, err := Verify(dir, a.pub, b.pub)
			var f *Failure
			if !errors.As(err, &f) {
				t.Fatalf("Verify after the attack = %v, want a *Failure", err)
			}
			if f.File != checkpointName("gw-test") || f.Line != tc.line || f.Seq != tc.seq || !strings.Contains(f.Reason, tc.reason) {
				t.Errorf("failure %s line %d seq %d %q\nwant %s line %d seq %d ~%q", f.File, f.Line, f.Seq, f.Reason,
					checkpointName("gw-test"), tc.line, tc.seq, tc.reason)
			}
		})
	}
}

// TestVerifyFirstMonth: a trail that was unsigned at first, then signed,
// then signed with a new key verifies with both public keys and reports
// where signing began; a key missing, or a checkpoint's key id changed,
// names the checkpoint and the key id.
func TestVerifyFirstMonth(t *testing.T) {
	stripKeyIDs := func(t *testing.T, dir string, id string) {
		// As written by a gateway from before key ids.
		rewriteCheckpoints(t, dir, func(c []Checkpoint) []Checkpoint {
			for i := range c {
				if c[i].KeyID == id {
					c[i].KeyID = ""
				}
			}
			return c
		})
	}
	for _, tc := range []struct {
		name   string
		keys   string // of a, b, w (an unrelated key), in order
		edit   func(t *testing.T, dir string, a, b keyPair)
		line   int // of the failure; 0: none expected
		seq    int64
		reason string // with %a and %b standing for the key ids
	}{
		{name: "both keys", keys: "ab"},
		{name: "both keys, the other order, one twice", keys: "bab"},
		{name: "no key: signatures not checked", keys: ""},
		{name: "only the new key", keys: "b", line: 4, seq: 10, reason: "signed with unknown key id %a (the keys given have key ids %b)"},
		{name: "only the old key", keys: "a", line: 6, seq: 15, reason: "signed with unknown key id %b (the keys given have key ids %a)"},
		{name: "an unrelated key", keys: "w", line: 4, seq: 10, reason: "signed with unknown key id %a"},
		{name: "checkpoints without key id verify with their key", keys: "ba",
			edit: func(t *testing.T, dir string, a, _ keyPair) { stripKeyIDs(t, dir, a.id) }},
		{name: "checkpoint without key id and its key not given", keys: "bw", line: 4, seq: 10, reason: "bad signature under each of the 2 keys given",
			edit: func(t *testing.T, dir string, a, _ keyPair) { stripKeyIDs(t, dir, a.id) }},
		{name: "key id changed to the other key's", keys: "ab", line: 5, seq: 12, reason: "bad signature (key id %b)",
			edit: func(t *testing.T, dir string, a, b keyPair) {
				rewriteCheckpoints(t, dir, func(c []Checkpoint) []Checkpoint { c[4].KeyID = b.id; return c })
			}},
		{name: "a signed checkpoint's hash changed", keys: "ab", line: 6, seq: 15, reason: "bad signature (key id %b)",
			edit: func(t *testing.T, dir string, _, _ keyPair) {
				rewriteCheckpoints(t, dir, func(c []Checkpoint) []Checkpoint { c[5].Hash = c[4].Hash; return c })
			}},
		{name: "an unsigned checkpoint's hash changed", keys: "ab", line: 2, seq: 6, reason: "checkpoint hash does not match",
			edit: func(t *testing.T, dir string, _, _ keyPair) {
				rewriteCheckpoints(t, dir, func(c []Checkpoint) []Checkpoint { c[1].Hash = c[0].Hash; return c })
			}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, a, b := firstMonth(t)
			w := newKeyPair(t)
			if tc.edit != nil {
				tc.edit(t, dir, a, b)
			}
			var keys []ed25519.PublicKey
			for _, k := range tc.keys {
				keys = append(keys, map[rune]keyPair{'a': a, 'b': b, 'w': w}[k].pub)
			}
			rep, err := Verify(dir, keys...)
			if tc.line == 0 {
				if err != nil {
					t.Fatalf("Verify: %v", err)
				}
				cr := rep.Chains[0]
				if cr.SignaturesChecked != (len(keys) > 0) || cr.UnsignedBeforeSigning != 3 || cr.FirstSigned == nil || cr.FirstSigned.Seq != 10 || cr.LastCheckpoint.Seq != 16 {
					t.Errorf("report: signatures checked %v, %d unsigned before signing began at %+v, last %+v",
						cr.SignaturesChecked, cr.UnsignedBeforeSigning, cr.FirstSigned, cr.LastCheckpoint)
				}
				return
			}
			var f *Failure
			if !errors.As(err, &f) {
				t.Fatalf("Verify = %v, want a *Failure", err)
			}
			reason := strings.NewReplacer("%a", a.id, "%b", b.id).Replace(tc.reason)
			if f.File != checkpointName("gw-test") || f.Line != tc.line || f.Seq != tc.seq || !strings.Contains(f.Reason, reason) {
				t.Errorf("failure %s line %d seq %d %q\nwant line %d seq %d ~%q", f.File, f.Line, f.Seq, f.Reason, tc.line, tc.seq, reason)
			}
		})
	}
}

// TestVerifyReportsKeyIDs: the report lists the keys that signed, one
// each time the key changed, "" for checkpoints from before key ids; a
// return to an earlier key shows.
func TestVerifyReportsKeyIDs(t *testing.T) {
	a, b := newKeyPair(t), newKeyPair(t)
	keys := map[string]keyPair{"a": a, "b": b}
	for _, tc := range []struct {
		name  string
		lives []life
		edit  func([]Checkpoint) []Checkpoint
		want  []string
	}{
		{"one key", []life{{"a", 7}}, nil, []string{a.id}},
		{"rotated", []life{{"", 4}, {"a", 4}, {"b", 4}}, nil, []string{a.id, b.id}},
		{"rotated and back", []life{{"a", 4}, {"b", 4}, {"a", 4}}, nil, []string{a.id, b.id, a.id}},
		{"the first signed before key ids", []life{{"a", 7}, {"b", 4}},
			func(c []Checkpoint) []Checkpoint { c[0].KeyID = ""; return c }, []string{"", a.id, b.id}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			writeLives(t, dir, keys, tc.lives...)
			if tc.edit != nil {
				rewriteCheckpoints(t, dir, tc.edit)
			}
			got := must(Verify(dir, a.pub, b.pub)).Chains[0].KeyIDs
			if strings.Join(got, ",") != strings.Join(tc.want, ",") {
				t.Errorf("key ids %q, want %q", got, tc.want)
			}
		})
	}
}

// TestVerifySignedFromTheStart: a chain signed from its first checkpoint
// has nothing unsigned to report.
func TestVerifySignedFromTheStart(t *testing.T) {
	dir := t.TempDir()
	a := newKeyPair(t)
	writeLives(t, dir, map[string]keyPair{"a": a}, life{"a", 4})
	cr := must(Verify(dir, a.pub)).Chains[0]
	if cr.UnsignedBeforeSigning != 0 || cr.FirstSigned == nil || cr.FirstSigned.Seq != 3 || !cr.SignaturesChecked {
		t.Errorf("report %+v", cr)
	}
}

// TestKeyID: the key id is the SHA-256 of the .pub file's DER, as the
// docs tell an auditor to compute it, cut to 16 hex digits.
func TestKeyID(t *testing.T) {
	k := newKeyPair(t)
	der := must(readPEM(k.pubFile, "PUBLIC KEY"))
	if want := sha256Hex(der)[:16]; k.id != want {
		t.Errorf("KeyID %s, want %s", k.id, want)
	}
	if other := newKeyPair(t); other.id == k.id {
		t.Error("two keys, one key id")
	}
}

// TestParseCheckpointKeyID: key_id is optional, and only as the gateway
// writes it.
func TestParseCheckpointKeyID(t *testing.T) {
	const head = `{"chain":"c","hash":"` + GenesisHash + `",`
	const tail = `"seq":1,"signature":"c2ln","ts":"2026-01-02T03:04:05.000000000Z"}`
	for _, tc := range []struct {
		name, line, err string
		keyID           string
	}{
		{"no key id", head + tail, "", ""},
		{"key id", head + `"key_id":"0123456789abcdef",` + tail, "", "0123456789abcdef"},
		{"key id too short", head + `"key_id":"0123",` + tail, "want 16 lowercase hex digits", ""},
		{"key id upper case", head + `"key_id":"0123456789ABCDEF",` + tail, "want 16 lowercase hex digits", ""},
		{"key id empty", head + `"key_id":"",` + tail, "want 16 lowercase hex digits", ""},
		{"key id not a string", head + `"key_id":12,` + tail, "bad field", ""},
		{"key id unsigned", head + `"key_id":"0123456789abcdef",` + strings.Replace(tail, "c2ln", "", 1), "key_id without a signature", ""},
		{"another field", head + `"kid":"0123456789abcdef",` + tail, "unknown field", ""},
		{"seq re-spelled", head + strings.Replace(tail, `"seq":1`, `"seq":1.0`, 1), "not in canonical form", ""},
		{"string re-spelled", head + strings.Replace(tail, `"c2ln"`, `"c2l\u006e"`, 1), "not in canonical form", ""},
		{"whitespace", head + " " + tail, "not in canonical form", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := parseCheckpoint([]byte(tc.line))
			if tc.err == "" {
				if err != nil || c.KeyID != tc.keyID {
					t.Fatalf("parse = %+v, %v", c, err)
				}
				if got := string(c.line()); got != tc.line+"\n" {
					t.Errorf("line() = %s, want the line parsed", got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parse error %v, want ~%q", err, tc.err)
			}
		})
	}
}

// TestVerifyRefusesMalformedKey: a key of the wrong size is an error, not
// a panic inside ed25519.Verify.
func TestVerifyRefusesMalformedKey(t *testing.T) {
	dir, a, _ := firstMonth(t)
	if _, err := Verify(dir, a.pub, a.pub[:31]); err == nil || IsFailure(err) || !strings.Contains(err.Error(), "public key 2 is 31 bytes") {
		t.Errorf("Verify with a 31-byte key = %v", err)
	}
}
