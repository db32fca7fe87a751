package sacp

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// stdDecode is the reference: encoding/json with UseNumber, the decoding the
// schema library documents, for the documents jsontext (the tokenizer of
// the gateway's strict reader) also accepts, which refuses what two readers
// could read differently: invalid UTF-8, unpaired surrogate escapes and a
// name repeated in an object.
func stdDecode(s string) (any, bool) {
	if !json.Valid([]byte(s)) || !jsontext.Value(s).IsValid() {
		return nil, false
	}
	dec := json.NewDecoder(strings.NewReader(s))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false
	}
	return v, true
}

func TestDecodeValueMatchesEncodingJSON(t *testing.T) {
	tests := []string{
		`{}`, `[]`, `""`, `0`, `-0`, `-0.5e+10`, `1E-2`, `true`, `false`, `null`,
		` {"a" : [1, 2.50, {"b": null}], "c": "d"} `,
		`{"a":1,"a":2}`,
		`"esc: \" \\ \/ \b \f \n \r \t \u00e9 \u20AC"`,
		`"pair: \ud83d\ude00"`,
		`"lone high: \ud83d x"`,
		`"lone low: \ude00"`,
		`"high then non-low: \ud83d\u0041"`,
		`"high at end: \ud83d"`,
		"\"invalid utf-8: \xff\xfe, overlong \xc0\xaf\"",
		`"a\u0000b"`,
		`12345678901234567890123456789`,
		// invalid
		``, ` `, `{`, `{"a"}`, `{"a":}`, `{"a":1,}`, `[1,]`, `[1 2]`, `{a:1}`, `'x'`,
		`01`, `1.`, `.5`, `-`, `1e`, `1e+`, `+1`, `tru`, `nul`, `falsey`, `"abc`, `"\x"`, `"\u12"`,
		`"\u12G4"`, "\"tab\tinside\"", "\"nl\ninside\"", `{} {}`, `[]]`, "\xef\xbb\xbf{}",
	}
	for _, in := range tests {
		got, err := decodeValue(in)
		want, ok := stdDecode(in)
		if (err == nil) != ok {
			t.Errorf("decodeValue(%q): err = %v, encoding/json ok = %v", in, err, ok)
			continue
		}
		if ok && !reflect.DeepEqual(got, want) {
			t.Errorf("decodeValue(%q) = %#v, encoding/json gives %#v", in, got, want)
		}
	}
}

func TestParseObject(t *testing.T) {
	tests := []struct {
		name     string
		in       string
		wantText string
		wantKeys []string
		wantErr  string
	}{
		{name: "stops after the object", in: `{"a":1} trailing {`, wantText: `{"a":1}`, wantKeys: []string{"a"}},
		{name: "empty", in: `{ }x`, wantText: `{ }`},
		{name: "escaped key", in: `{"d\u0061ta":{}}`, wantText: `{"d\u0061ta":{}}`, wantKeys: []string{"data"}},
		{name: "unpaired surrogate", in: `{"data":{"n":"x\ud800"}}`, wantErr: `invalid unpaired surrogate escape \ud800 in string literal`},
		{name: "surrogate pair", in: `{"n":"\ud83d\ude00"}`, wantText: `{"n":"\ud83d\ude00"}`, wantKeys: []string{"n"}},
		{name: "invalid UTF-8", in: "{\"n\":\"\xff\"}", wantErr: `invalid UTF-8 in string literal`},
		{name: "repeated name", in: `{"a":1,"b":2,"a":3}`, wantErr: `duplicate object key "a"`},
		{name: "repeated name, escaped", in: `{"data":{},"d\u0061ta":{}}`, wantErr: `duplicate object key "data"`},
		{name: "repeated name in a value", in: `{"data":{"x":[{"n":1,"n":2}]}}`, wantErr: `duplicate object key "n"`},
		{name: "repeated name in a big object", in: `{` + manyNames(40) + `,"k7":0}`, wantErr: `duplicate object key "k7"`},
		{name: "repeated name in a big nested object", in: `{"data":{` + manyNames(40) + `,"k39":0}}`, wantErr: `duplicate object key "k39"`},
		{name: "names repeated across objects", in: `{"a":{"a":{"a":1}},"b":{"a":2}}`, wantText: `{"a":{"a":{"a":1}},"b":{"a":2}}`, wantKeys: []string{"a", "b"}},
		{name: "long repeated name", in: `{"` + strings.Repeat("x", 100) + `":1,"` + strings.Repeat("x", 100) + `":2}`, wantErr: `duplicate object key "` + strings.Repeat("x", 32) + `..."`},
		{name: "bad key", in: `{"a":1,}`, wantErr: "invalid character '}' looking for beginning of object key string"},
		{name: "missing colon", in: `{"a" 1}`, wantErr: "invalid character '1' after object key"},
		{name: "bad separator", in: `{"a":1 "b":2}`, wantErr: `invalid character '"' after object key:value pair`},
		{name: "unterminated", in: `{"a":[1,2`, wantErr: "unexpected end of JSON input"},
		{name: "control character", in: "{\"a\":\"x\ty\"}", wantErr: `invalid character '\t' in string literal`},
		{name: "too deep", in: `{"a":` + strings.Repeat("[", maxDepth) + strings.Repeat("]", maxDepth) + `}`, wantErr: "exceeded max depth"},
		{name: "deep enough", in: `{"a":` + strings.Repeat("[", maxDepth-1) + strings.Repeat("]", maxDepth-1) + `}`, wantText: `{"a":` + strings.Repeat("[", maxDepth-1) + strings.Repeat("]", maxDepth-1) + `}`, wantKeys: []string{"a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj, err := parseObject(tt.in, true)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, m := range obj.members {
				keys = append(keys, m.key)
			}
			if obj.text != tt.wantText || !reflect.DeepEqual(keys, tt.wantKeys) {
				t.Errorf("text %q keys %q, want %q %q", obj.text, keys, tt.wantText, tt.wantKeys)
			}
		})
	}
}

func manyNames(n int) string {
	names := make([]string, n)
	for i := range names {
		names[i] = `"k` + strconv.Itoa(i) + `":` + strconv.Itoa(i)
	}
	return strings.Join(names, ",")
}

// A repeated "data" is refused rather than read as the last (or first) of
// them: the validator must check the one value the client will read.
func TestParseObjectRepeatedData(t *testing.T) {
	for _, in := range []string{`{"data":{"a":1},"data":{"b":2}}`, `{"data":{"a":1,"a":"x"}}`} {
		for _, decode := range []bool{true, false} {
			if _, err := parseObject(in, decode); err == nil || !strings.Contains(err.Error(), "duplicate object key") {
				t.Errorf("parseObject(%s, %v): %v, want a duplicate key error", in, decode, err)
			}
		}
	}
}

// FuzzParseMatchesEncodingJSON holds the reader to its contract: it accepts
// what encoding/json accepts (but for nesting deeper than maxDepth and a name
// repeated in an object) and decodes to the same values.
func FuzzParseMatchesEncodingJSON(f *testing.F) {
	for _, s := range []string{
		`{"thought":"t","status":"success","data":{"a":[1,2.5e3,true,null,"x"]},"message":"m"}`,
		`"\ud83d\ude00\ud83d\u0041\ude00"`, "\"\xff\xc0\xaf\"", `[-0.0e-0,{"":{}}]`, `{"a":1,"a":"2"}`,
		`"\u0000\/\\"`, `tru`, `[1,]`, `01`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, err := decodeValue(in)
		var se *syntaxError
		if err != nil && !errors.As(err, &se) {
			t.Fatalf("error %v is not a syntaxError", err)
		}
		if err != nil && err.Error() == "exceeded max depth" {
			return
		}
		want, ok := stdDecode(in)
		if (err == nil) != ok {
			t.Fatalf("decodeValue(%q): err = %v, encoding/json ok = %v", in, err, ok)
		}
		if ok && !reflect.DeepEqual(got, want) {
			t.Fatalf("decodeValue(%q) = %#v, encoding/json gives %#v", in, got, want)
		}
		// An object parsed in place must agree with the whole-value parse.
		if trimmed := bytes.TrimLeft([]byte(in), " \t\r\n"); ok && len(trimmed) > 0 && trimmed[0] == '{' {
			obj, err := parseObject(string(trimmed), true)
			if err != nil {
				t.Fatalf("parseObject(%q): %v", trimmed, err)
			}
			if raw, has := obj.get("data"); has {
				if d, _ := stdDecode(raw); !reflect.DeepEqual(obj.data, d) {
					t.Fatalf("data %#v, want %#v", obj.data, d)
				}
			}
		}
	})
}
