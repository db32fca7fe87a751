package audit

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gowebpki/jcs"
)

// TestVector holds the writer to a canonical form and hash written out by
// hand and computed with sha256sum (testdata/README.md).
func TestVector(t *testing.T) {
	var v struct {
		Record
		Summary  map[string]any `json:"summary"`
		Seq      int64          `json:"seq"`
		PrevHash string         `json:"prev_hash"`
		TS       time.Time      `json:"ts"`
		Chain    string         `json:"chain"`
	}
	data, err := os.ReadFile("testdata/vector.json")
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &v); err != nil {
		t.Fatal(err)
	}
	// The Record fields have no JSON tags; take them from the same file.
	var names struct {
		Kind          string `json:"kind"`
		AgentID       string `json:"agent_id"`
		SessionID     string `json:"session_id"`
		RequestID     string `json:"request_id"`
		PayloadSHA256 string `json:"payload_sha256"`
	}
	if err := json.Unmarshal(data, &names); err != nil {
		t.Fatal(err)
	}
	r := Record{Kind: names.Kind, AgentID: names.AgentID, SessionID: names.SessionID,
		RequestID: names.RequestID, PayloadSHA256: names.PayloadSHA256, Object: objectOf(v.Summary)}
	wantBody, err := os.ReadFile("testdata/vector.canonical")
	if err != nil {
		t.Fatal(err)
	}
	wantHash, err := os.ReadFile("testdata/vector.sha256")
	if err != nil {
		t.Fatal(err)
	}
	p, err := prepare(appendCanonicalString(nil, v.Chain), r)
	if err != nil {
		t.Fatal(err)
	}
	line, hash := p.appendLine(nil, v.Seq, v.PrevHash, v.TS)
	if want := strings.TrimSpace(string(wantHash)); hash != want {
		t.Errorf("hash = %s, want %s", hash, want)
	}
	wantLine := append(bytes.TrimSuffix(wantBody, []byte("}")), []byte(`,"hash":"`+hash+"\"}\n")...)
	if !bytes.Equal(line, wantLine) {
		t.Errorf("line =\n%s\nwant\n%s", line, wantLine)
	}
	if canon, err := jcs.Transform(wantBody); err != nil || !bytes.Equal(canon, wantBody) {
		t.Errorf("jcs disagrees that the vector is canonical: %v\n%s", err, canon)
	}
	e, err := parseEntry(bytes.TrimSuffix(line, []byte("\n")))
	if err != nil {
		t.Fatalf("parseEntry: %v", err)
	}
	if e.Seq != v.Seq || e.Hash != hash || e.RequestID != names.RequestID {
		t.Errorf("parsed %+v", e)
	}
}

func TestCanonicalStringMatchesJCS(t *testing.T) {
	for _, s := range []string{
		"", "plain", `quote " backslash \ slash /`, "tab\tnl\ncr\rbs\bff\f", "\x00\x01\x1f\x7f",
		"<script>&amp;", "line\u2028sep\u2029", "é€😀\ufb33", "\ufeffbom",
	} {
		got := appendCanonicalString(nil, s)
		raw, _ := json.Marshal(s)
		want, err := jcs.Transform(raw)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%q: got %s, jcs %s", s, got, want)
		}
	}
}

func TestPrepareRejects(t *testing.T) {
	chain := appendCanonicalString(nil, "c")
	for _, tc := range []struct {
		name string
		r    Record
		want string
	}{
		{"no kind", Record{}, "kind is required"},
		{"bad payload hash", Record{Kind: "k", PayloadSHA256: "ABC"}, "payload_sha256"},
		{"uppercase payload hash", Record{Kind: "k", PayloadSHA256: strings.Repeat("A", 64)}, "payload_sha256"},
		{"unencodable summary", Record{Kind: "k", Object: Members("f", func() {})}, "encode summary"},
		{"too large", Record{Kind: "k", Object: Members("m", strings.Repeat("x", MaxEntryBytes))}, "too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := prepare(chain, tc.r)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
}

// TestWrittenLinesAreCanonical checks, for awkward records, that every
// body the writer hashes is its own RFC 8785 form, so the documented shell
// check (strip the hash member, sha256sum) and a JCS verifier agree.
func TestWrittenLinesAreCanonical(t *testing.T) {
	chain := appendCanonicalString(nil, "gw.1_a-b")
	for i, r := range []Record{
		{Kind: "k"},
		{Kind: "k\u2028", AgentID: "<&>", SessionID: "\x01", RequestID: "é😀", Object: Members()},
		{Kind: "k", Object: Members("f", 0.1, "g", 1e300, "h", -1.5e-9, "n", nil, "a", []any{1, "x", true})},
		{Kind: "k", Object: Members("z", map[string]any{"b": 1, "a": map[string]any{"\ufb33": 1, "😀": 2}})},
		{Kind: "k", AgentID: "bad\xffutf8"},
	} {
		p, err := prepare(chain, r)
		if err != nil {
			t.Fatal(err)
		}
		line, hash := p.appendLine(nil, int64(i+1), GenesisHash, time.Unix(1700000000, 123).UTC())
		body := append(bytes.Clone(bytes.TrimSuffix(line, []byte(`,"hash":"`+hash+"\"}\n"))), '}')
		canon, err := jcs.Transform(body)
		if err != nil || !bytes.Equal(canon, body) {
			t.Errorf("record %d: body not canonical (%v):\n%s\n%s", i, err, body, canon)
		}
		sum := sha256.Sum256(body)
		if hex.EncodeToString(sum[:]) != hash {
			t.Errorf("record %d: hash is not sha256 of the body", i)
		}
		if _, err := parseEntry(bytes.TrimSuffix(line, []byte("\n"))); err != nil {
			t.Errorf("record %d: parseEntry: %v", i, err)
		}
	}
}

func TestParseEntryRejects(t *testing.T) {
	p, _ := prepare(appendCanonicalString(nil, "c"), Record{Kind: "k"})
	good, _ := p.appendLine(nil, 1, GenesisHash, time.Unix(0, 0))
	good = bytes.TrimSuffix(good, []byte("\n"))
	replace := func(old, new string) []byte { return bytes.Replace(good, []byte(old), []byte(new), 1) }
	for _, tc := range []struct {
		name string
		line []byte
		want string
	}{
		{"not json", []byte("{nope"), "canonicalizable"},
		{"array", []byte("[1]"), "not a JSON object"},
		{"missing field", replace(`"agent_id":"",`, ""), `missing field "agent_id"`},
		{"unknown field", replace(`{"agent_id"`, `{"extra":1,"agent_id"`), `unknown field "extra"`},
		{"duplicate key", replace(`{"agent_id":""`, `{"agent_id":"","agent_id":"x"`), "canonicalizable"},
		{"seq string", replace(`"seq":1`, `"seq":"1"`), "bad field"},
		{"seq zero", replace(`"seq":1`, `"seq":0`), "not positive"},
		{"summary null", replace(`"summary":{}`, `"summary":null`), "summary"},
		{"ts not utc", replace(`Z"`, `+01:00"`), "UTC"},
		{"hash edited", replace(`"kind":"k"`, `"kind":"K"`), "hash mismatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseEntry(tc.line)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	if _, err := parseEntry(good); err != nil {
		t.Fatalf("good line: %v", err)
	}
}
