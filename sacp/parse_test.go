package sacp

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// stdDecode is the reference: encoding/json with UseNumber, the decoding the
// schema library documents.
func stdDecode(s string) (any, bool) {
	if !json.Valid([]byte(s)) {
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
		{name: "duplicate keys kept in order", in: `{"a":1,"b":2,"a":3}`, wantText: `{"a":1,"b":2,"a":3}`, wantKeys: []string{"a", "b", "a"}},
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

// The last duplicate wins, as with encoding/json maps, for both the raw
// member and the decoded data.
func TestParseObjectDuplicateData(t *testing.T) {
	obj, err := parseObject(`{"data":{"a":1},"data":{"b":2}}`, true)
	if err != nil {
		t.Fatal(err)
	}
	raw, _ := obj.get("data")
	if raw != `{"b":2}` || !reflect.DeepEqual(obj.data, map[string]any{"b": json.Number("2")}) {
		t.Errorf("raw %s data %#v", raw, obj.data)
	}
}

// FuzzParseMatchesEncodingJSON holds the reader to its contract: it accepts
// what encoding/json accepts (but for nesting deeper than maxDepth) and
// decodes to the same values.
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
