package redact

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

func TestJSON(t *testing.T) {
	r := mustNew(t, Config{Detectors: Names()})
	for _, tc := range []struct {
		name, in, want string
		total          int
	}{
		{"top-level string", `"mail a@b.co"`, `"mail ` + rEmail + `"`, 1},
		{"names redacted like values", `{"a@b.co": "a@b.co"}`, `{"` + rEmail + `":"` + rEmail + `"}`, 2},
		{"nested and compacted", "{\n  \"data\": {\"ips\": [\"10.0.0.1\", 42, true, null, {\"x\": [\"4111111111111111\"]}]},\n  \"message\": \"ok\"\n}",
			`{"data":{"ips":["` + rIP + `",42,true,null,{"x":["` + rCard + `"]}]},"message":"ok"}`, 2},
		{"member order kept", `{"z":1,"a":2,"m":"x"}`, `{"z":1,"a":2,"m":"x"}`, 0},
		{"numbers kept as written", `[1.50, -0, 1e400, 12345678901234567890]`, `[1.50,-0,1e400,12345678901234567890]`, 0},
		{"escapes decoded before detection", `"a\u0040b.co"`, `"` + rEmail + `"`, 1},
		{"unchanged string keeps its escapes", `"tab\there \u00e9 \/"`, `"tab\there \u00e9 \/"`, 0},
		{"redacted string re-escaped", `"line\n\"a@b.co\"\u2028"`, `"line\n\"` + rEmail + `\"\u2028"`, 1},
		{"surrogate pair", `"\ud83d\ude00 a@b.co"`, "\"\U0001F600 " + rEmail + `"`, 1},
		{"every escape", `"\b\f\r\t\u0001\/\\ a@b.co \u00e9x"`, `"\u0008\u000c\r\t\u0001/\\ ` + rEmail + " \u00e9x\"", 1},
		{"empty containers", `{"a":[],"b":{}}`, `{"a":[],"b":{}}`, 0},
		{"number is not redacted", `{"card": 4111111111111111}`, `{"card":4111111111111111}`, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, res, err := r.JSON([]byte(tc.in))
			if err != nil {
				t.Fatalf("JSON(%s): %v", tc.in, err)
			}
			if string(got) != tc.want {
				t.Errorf("JSON(%s)\n got %s\nwant %s", tc.in, got, tc.want)
			}
			if res.Total() != tc.total {
				t.Errorf("Total() = %d, want %d", res.Total(), tc.total)
			}
			if !json.Valid(got) {
				t.Errorf("output is not valid JSON: %s", got)
			}
		})
	}
}

// TestJSONKeepsStructure compares a redacted document with its input through
// encoding/json: same shape, same keys, and only strings differ.
func TestJSONKeepsStructure(t *testing.T) {
	r := mustNew(t, Config{Detectors: Names()})
	in := `{"thought":"look up","status":"success","message":"Call 555-123-4567",
		"data":{"users":[{"email":"a@b.co","age":31,"tags":["x","10.1.2.3"]}],"ok":true,"n":null}}`
	out, res, err := r.JSON([]byte(in))
	if err != nil {
		t.Fatal(err)
	}
	var a, b any
	if err := json.Unmarshal([]byte(in), &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(out, &b); err != nil {
		t.Fatalf("output %s: %v", out, err)
	}
	wantShape := strings.NewReplacer("Call 555-123-4567", "Call "+rPhone, "a@b.co", rEmail, "10.1.2.3", rIP)
	var c any
	if err := json.Unmarshal([]byte(wantShape.Replace(in)), &c); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(b, c) {
		t.Errorf("got %v\nwant %v", b, c)
	}
	if res.Total() != 3 {
		t.Errorf("Total() = %d, want 3", res.Total())
	}
}

func TestJSONBlock(t *testing.T) {
	r := mustNew(t, Config{Detectors: Names(), Block: []string{"ssn"}})
	_, res, err := r.JSON([]byte(`{"a":"fine","b":["ssn 123-45-6789"]}`))
	if err != nil || res.Blocked != "ssn" {
		t.Errorf("Blocked = %q, err %v", res.Blocked, err)
	}
}

func TestJSONInvalid(t *testing.T) {
	r := mustNew(t, Config{Detectors: Names()})
	for _, in := range []string{
		``, ` `, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[1 2]`, `{a:1}`, `"abc`, "\"a\x01\"",
		`"\x"`, `"\u12"`, `"\u12g4"`, `01`, `1.`, `-`, `1e`, `+1`, `tru`, `nul`, `"a" "b"`, `{"k":"v"} x`,
		`{"secret.person@example.com": }`,
		strings.Repeat("[", maxJSONDepth+1) + strings.Repeat("]", maxJSONDepth+1),
	} {
		_, _, err := r.JSON([]byte(in))
		if err == nil {
			t.Errorf("JSON(%.40q) succeeded, want an error", in)
			continue
		}
		if json.Valid([]byte(in)) && !strings.Contains(err.Error(), "nested") {
			t.Errorf("JSON(%.40q) failed on valid JSON: %v", in, err)
		}
		if strings.Contains(err.Error(), "secret") || strings.Contains(err.Error(), "example") {
			t.Errorf("error %q shows the content", err)
		}
	}
}

// TestJSONAgreesWithEncodingJSON checks validity against encoding/json on
// the corpus, wrapped in a few shapes.
func TestJSONAgreesWithEncodingJSON(t *testing.T) {
	r := mustNew(t, Config{Detectors: Names()})
	for _, text := range corpus() {
		enc, _ := json.Marshal(map[string]any{"message": text, "data": []any{text, 1.5, map[string]string{"k": text}}})
		out, _, err := r.JSON(enc)
		if err != nil {
			t.Fatalf("JSON(%s): %v", enc, err)
		}
		var v struct {
			Message string
			Data    []any
		}
		if err := json.Unmarshal(out, &v); err != nil {
			t.Fatalf("output %s: %v", out, err)
		}
		if want, _ := r.String(text); v.Message != want {
			t.Errorf("message %q, want %q", v.Message, want)
		}
	}
}

func TestJSONSpecial8(t *testing.T) {
	for c := 0; c < 256; c++ {
		for pos := 0; pos < 8; pos++ {
			b := []byte("abcdefgh")
			b[pos] = byte(c)
			want := c < 0x20 || c == '"' || c == '\\'
			if got := jsonSpecial8(load64(string(b), 0)); got != want {
				t.Fatalf("byte %#x at %d: got %v, want %v", c, pos, got, want)
			}
			if got := quoteSpecial8(load64(string(b), 0)); got != (want || c == 0xe2) {
				t.Fatalf("quote: byte %#x at %d: got %v", c, pos, got)
			}
		}
	}
}

// FuzzJSON checks that JSON never panics, accepts exactly what jsontext
// accepts with repeated names allowed (the redactor rewrites every string
// and has no use for names: encoding/json's grammar, without invalid UTF-8
// or unpaired surrogate escapes), and returns valid JSON.
func FuzzJSON(f *testing.F) {
	for _, s := range []string{`{"a":"b@c.de","n":[1,2.5e3,true,null]}`, `"x"`, `[]`, `{"k":"\u00e9\ud83d\ude00"}`, `{`} {
		f.Add([]byte(s))
	}
	r := mustNew(f, Config{Detectors: Names()})
	f.Fuzz(func(t *testing.T, in []byte) {
		out, _, err := r.JSON(in)
		if valid := jsontext.Value(in).IsValid(jsontext.AllowDuplicateNames(true)); valid != (err == nil) {
			t.Fatalf("JSON(%q): err %v, jsontext says valid=%v", in, err, valid)
		}
		if err == nil && !json.Valid(out) {
			t.Fatalf("JSON(%q) = %q, not valid", in, out)
		}
	})
}

func BenchmarkJSON(b *testing.B) {
	r := mustNew(b, Config{Detectors: Names()})
	text := prose(16 << 10)
	var parts []any
	for i := 0; i < len(text); i += 400 {
		parts = append(parts, map[string]any{"id": i, "text": text[i:min(i+400, len(text))], "score": 0.5})
	}
	doc, _ := json.Marshal(map[string]any{"status": "success", "message": "done", "data": map[string]any{"parts": parts}})
	b.Run("16KB", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(doc)))
		for b.Loop() {
			if _, _, err := r.JSON(doc); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// What no strict reader of the gateway accepts, the redactor refuses too,
// naming the offset and none of the content.
func TestJSONRefuses(t *testing.T) {
	r := mustNew(t, Config{Detectors: Names()})
	for _, tc := range []struct{ in, want string }{
		{`{"a":"x\ud800"}`, "offset 7: unpaired surrogate escape"},
		{"{\"a\":\"x\xff\"}", "offset 7: invalid UTF-8 in string"},
		{`{"a":"x`, "offset 7: unexpected end of input"},
		{`[01]`, "offset 2: invalid number: leading zero"},
		{`[tru]`, "offset 4: invalid literal"},
		{"\"a@b.co\tx\"", "offset 7: control character in string"},
	} {
		_, _, err := r.JSON([]byte(tc.in))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("JSON(%q): %v, want %q", tc.in, err, tc.want)
		}
		if err != nil && strings.Contains(err.Error(), "a@b") {
			t.Errorf("the error quotes the content: %v", err)
		}
	}
}
