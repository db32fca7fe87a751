package audit

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
)

// FuzzParseEntry feeds arbitrary lines to the parser Verify uses: it must
// not panic, and whatever it accepts must hold the entry invariants and be
// spelled exactly as the writer spells it.
func FuzzParseEntry(f *testing.F) {
	p, _ := prepare(appendCanonicalString(nil, "gw"), Record{Kind: "k", AgentID: "a", Object: Members("x", []any{1.5, "y"})})
	good, _ := p.appendLine(nil, 3, GenesisHash, time.Unix(1, 2))
	f.Add(bytes.TrimSuffix(good, []byte("\n")))
	f.Add([]byte(`{"seq":1}`))
	f.Add([]byte(`{"a":1,"a":2}`))
	f.Add([]byte("\xff\xfe"))
	f.Add([]byte(`[[[[[[[[[[[[[[[[[[[[`))
	f.Fuzz(func(t *testing.T, line []byte) {
		e, err := parseEntry(line)
		if err != nil {
			return
		}
		if e.Seq < 1 || !isHex64(e.Hash) || !isHex64(e.PrevHash) || e.Kind == "" || e.Chain == "" || !json.Valid(e.Summary) {
			t.Fatalf("accepted an invalid entry: %+v", e)
		}
		if _, err := parseOwnEntry(line); err != nil {
			t.Fatalf("parseEntry accepts but parseOwnEntry rejects: %v", err)
		}
		// What it accepts is the writer's form, the one spelling its hash
		// stands for: the canonical body with the hash member appended.
		body := append(bytes.Clone(line[:len(line)-hashSuffixLen]), '}')
		if canon, err := jcs.Transform(body); err != nil || !bytes.Equal(canon, body) || sha256Hex(body) != e.Hash {
			t.Fatalf("accepted a line that is not its canonical body and hash: %s", line)
		}
	})
}

// FuzzCanonicalString holds appendCanonicalString to RFC 8785 for any input.
func FuzzCanonicalString(f *testing.F) {
	for _, s := range []string{"", "a\"b\\c", "\x00\x1f\u2028", "é😀", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := appendCanonicalString(nil, s)
		canon, err := jcs.Transform(got)
		if err != nil || !bytes.Equal(canon, got) {
			t.Fatalf("%q -> %s, jcs %s (%v)", s, got, canon, err)
		}
		var back string
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatal(err)
		}
		if utf8.ValidString(s) && back != s {
			t.Fatalf("%q round-trips to %q", s, back)
		}
	})
}
