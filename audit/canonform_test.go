package audit

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"
)

// numbersChain writes three entries whose second carries numbers a double
// does not tell apart from other spellings, and returns the directory.
func numbersChain(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	l := openLog(t, Config{Dir: dir})
	for i, s := range []map[string]any{
		{"model": "mock-1"},
		{"model": "mock-1", "big": float64(1 << 53), "tenth": 0.1, "i": 7},
		{"model": "mock-1"},
	} {
		if _, err := l.Append(context.Background(), Record{Kind: KindLLMRequest, AgentID: "agent-a", Object: objectOf(s)}); err != nil {
			t.Fatalf("Append %d: %v", i, err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// respellings each write one value of the second entry another way that
// RFC 8785 maps back to the same bytes, so the recorded hash still holds.
var respellings = []struct{ name, from, to string }{
	{"integer beyond 2^53", `"big":9007199254740992`, `"big":9007199254740993`},
	{"decimal beyond a double", `"tenth":0.1`, `"tenth":0.10000000000000000001`},
	{"integer as a decimal", `"i":7`, `"i":7.0`},
	{"integer with an exponent", `"i":7`, `"i":7e0`},
	{"escaped string", `"model":"mock-1"`, `"model":"mock\u002d1"`},
	{"whitespace", `{"agent_id"`, `{ "agent_id"`},
}

// TestVerifyRefusesARespelledEntry: an entry whose bytes are not the
// canonical form its hash covers is refused at its line, by verify, the
// operator's tail and the export check, although its hash still holds.
func TestVerifyRefusesARespelledEntry(t *testing.T) {
	for _, tc := range respellings {
		t.Run(tc.name, func(t *testing.T) {
			dir := numbersChain(t)
			mustVerify(t, dir)
			out := filepath.Join(t.TempDir(), "export.jsonl")
			if _, err := Export(dir, Filter{}, "jsonl", out, Options{}); err != nil {
				t.Fatal(err)
			}
			respell := func(l [][]byte) [][]byte {
				if !bytes.Contains(l[1], []byte(tc.from)) {
					t.Fatalf("line 2 has no %s: %s", tc.from, l[1])
				}
				l[1] = bytes.Replace(l[1], []byte(tc.from), []byte(tc.to), 1)
				return l
			}
			file := editSegment(t, dir, 0, respell)
			if err := hashStillHolds(allLines(t, dir, "gw-test")[1]); err != nil {
				t.Fatalf("the re-spelled line no longer hashes alike, the test proves nothing: %v", err)
			}

			_, err := Verify(dir, nil)
			var f *Failure
			if !errors.As(err, &f) {
				t.Fatalf("Verify = %v, want a failure", err)
			}
			if f.File != file || f.Line != 2 || f.Seq != 2 || !strings.Contains(f.Reason, "entry is not in canonical form") {
				t.Errorf("failure %s line %d seq %d %q; want %s line 2 seq 2, not in canonical form", f.File, f.Line, f.Seq, f.Reason, file)
			}

			tail, err := ReadTail(dir, "gw-test", 1<<20)
			if err != nil {
				t.Fatal(err)
			}
			if len(tail.Entries) != 1 || !strings.Contains(tail.Problem, "entry is not in canonical form") {
				t.Errorf("tail: %d entries, problem %q", len(tail.Entries), tail.Problem)
			}

			cp := tamper(t, out, respell, nil)
			_, err = VerifyExport(cp, cp+".manifest.json", Options{})
			if !errors.As(err, &f) {
				t.Fatalf("VerifyExport = %v, want a failure", err)
			}
			if f.Line != 2 || f.Seq != 2 || !strings.Contains(f.Reason, "entry is not in canonical form") {
				t.Errorf("export failure line %d seq %d %q; want line 2 seq 2, not in canonical form", f.Line, f.Seq, f.Reason)
			}
		})
	}
}

// hashStillHolds checks that line's recorded hash is still the hash of
// its RFC 8785 form without "hash" (all verify checked before this rule).
func hashStillHolds(line []byte) error {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(line, &fields); err != nil {
		return err
	}
	var hash string
	if err := json.Unmarshal(fields["hash"], &hash); err != nil {
		return err
	}
	delete(fields, "hash")
	body, err := jcs.Transform(must(json.Marshal(fields)))
	if err != nil {
		return err
	}
	if sha256Hex(body) != hash {
		return errors.New("hash differs")
	}
	return nil
}

// TestSummaryIntegersAreRecordedAsSeen: an integer beyond ±(2^53-1) is
// recorded as the string of its digits, from a map summary and from an
// Object alike, so the trail holds the value observed rather than the
// nearest double; the chain and its export verify.
func TestSummaryIntegersAreRecordedAsSeen(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, Config{Dir: dir})
	var o Object
	o.Int("error_code", 1<<60+1)
	o.Int("max", 1<<53-1)
	for _, r := range []Record{
		{Kind: KindLLMResponse, Object: Members(
			"error_code", int64(1<<60+1), "round", int64(1<<60), "max", 1<<53-1, "min", -(1<<53 - 1),
			"neg", int64(-1<<53), "huge", uint64(math.MaxUint64), "small", uint(3))},
		{Kind: KindLLMResponse, Object: &o},
	} {
		if _, err := l.Append(context.Background(), r); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	mustVerify(t, dir)
	out := filepath.Join(t.TempDir(), "export.jsonl")
	if _, err := Export(dir, Filter{}, "jsonl", out, Options{}); err != nil {
		t.Fatal(err)
	}
	if _, err := VerifyExport(out, out+".manifest.json", Options{}); err != nil {
		t.Fatalf("VerifyExport: %v", err)
	}
	want := []map[string]any{
		{"error_code": "1152921504606846977", "round": "1152921504606846976", "max": json.Number("9007199254740991"),
			"min": json.Number("-9007199254740991"), "neg": "-9007199254740992", "huge": "18446744073709551615", "small": json.Number("3")},
		{"error_code": "1152921504606846977", "max": json.Number("9007199254740991")},
	}
	for i, line := range bytes.Split(bytes.TrimSpace(must(os.ReadFile(out))), []byte("\n")) {
		var e struct{ Summary map[string]any }
		dec := json.NewDecoder(bytes.NewReader(line))
		dec.UseNumber()
		if err := dec.Decode(&e); err != nil {
			t.Fatal(err)
		}
		for k, v := range want[i] {
			if e.Summary[k] != v {
				t.Errorf("entry %d: %s = %#v, want %#v", i+1, k, e.Summary[k], v)
			}
		}
	}
}
