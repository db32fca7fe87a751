package jsonlex

import (
	"bytes"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

func TestString(t *testing.T) {
	tests := []struct {
		in      string
		end     int // want: offset after the token (when no error)
		escaped bool
		kind    Kind
		off     int
		want    string // decoded contents
	}{
		{in: `""`, end: 2},
		{in: `"abc" tail`, end: 5, want: "abc"},
		{in: `"a long plain run of ascii text, eight at a time"`, end: 49, want: "a long plain run of ascii text, eight at a time"},
		{in: `"é € 😀"`, end: 13, want: "é € 😀"},
		{in: `"\" \\ \/ \b \f \n \r \t"`, end: 25, escaped: true, want: "\" \\ / \b \f \n \r \t"},
		{in: `"\u00e9\u20AC\ud83d\ude00"`, end: 26, escaped: true, want: "é€😀"},
		{in: `"\u0000"`, end: 8, escaped: true, want: "\x00"},
		{in: `"abc`, kind: EOF, off: 4},
		{in: `"abc\`, kind: EOF, off: 5},
		{in: `"\u12`, kind: EOF, off: 5},
		{in: `"\ud83d`, kind: EOF, off: 7},
		{in: `"\ud83d\`, kind: EOF, off: 8},
		{in: "\"a\tb\"", kind: Control, off: 2},
		{in: "\"a\nb\"", kind: Control, off: 2},
		{in: `"\x"`, kind: BadEscape, off: 1},
		{in: `"\'"`, kind: BadEscape, off: 1},
		{in: `"\u12G4"`, kind: BadUnicodeEscape, off: 1},
		{in: `"\u12"`, kind: BadUnicodeEscape, off: 1},
		{in: `"\ude00"`, kind: Surrogate, off: 1},
		{in: `"x\ud83d"`, kind: Surrogate, off: 2},
		{in: `"\ud83d\u0041"`, kind: Surrogate, off: 1},
		{in: `"\ud83d\ud83d"`, kind: Surrogate, off: 1},
		{in: `"\ud83d\uXXXX"`, kind: BadUnicodeEscape, off: 7},
		{in: "\"\xff\"", kind: BadUTF8, off: 1},
		{in: "\"ab\xc0\xaf\"", kind: BadUTF8, off: 3},       // overlong '/'
		{in: "\"\xed\xa0\x80\"", kind: BadUTF8, off: 1},     // an encoded surrogate
		{in: "\"\xf4\x90\x80\x80\"", kind: BadUTF8, off: 1}, // past U+10FFFF
		{in: "\"\xe2\x82\"", kind: BadUTF8, off: 1},         // cut short by the quote
		{in: "\"abcdefgh\xe2", kind: EOF, off: 10},          // cut off by the end of the input
		{in: "\"abcdefgh\xe2\x82", kind: EOF, off: 11},
		{in: "\"\xe0\x80", kind: BadUTF8, off: 1}, // overlong, whatever follows
	}
	for _, tc := range tests {
		for _, asBytes := range []bool{false, true} {
			var end int
			var esc bool
			var err *Error
			if asBytes {
				end, esc, err = String([]byte(tc.in), 0)
			} else {
				end, esc, err = String(tc.in, 0)
			}
			if tc.kind != 0 {
				if err == nil || err.Kind != tc.kind || err.Off != tc.off {
					t.Errorf("String(%q): err %+v, want %v at %d", tc.in, err, tc.kind, tc.off)
				}
				continue
			}
			if err != nil || end != tc.end || esc != tc.escaped {
				t.Errorf("String(%q) = %d, %v, %+v; want %d, %v", tc.in, end, esc, err, tc.end, tc.escaped)
				continue
			}
			if got := Unquote(tc.in[1:end-1], esc); got != tc.want {
				t.Errorf("Unquote(%q) = %q, want %q", tc.in[1:end-1], got, tc.want)
			}
		}
	}
}

func TestNumber(t *testing.T) {
	tests := []struct {
		in   string
		end  int
		kind Kind
		off  int
	}{
		{in: "0", end: 1}, {in: "-0", end: 2}, {in: "12.50e+10,", end: 9}, {in: "1E-2", end: 4},
		{in: "0.5]", end: 3}, {in: "1x", end: 1}, {in: "123456789012345678901234567890", end: 30},
		{in: "-", kind: EOF, off: 1}, {in: "-x", kind: NoIntDigit, off: 1}, {in: "01", kind: LeadingZero, off: 1},
		{in: "-00", kind: LeadingZero, off: 2}, {in: "1.", kind: EOF, off: 2}, {in: "1.e5", kind: NoFracDigit, off: 2},
		{in: "1e", kind: EOF, off: 2}, {in: "1e+", kind: EOF, off: 3}, {in: "1e+x", kind: NoExpDigit, off: 3},
	}
	for _, tc := range tests {
		end, err := Number(tc.in, 0)
		if tc.kind != 0 {
			if err == nil || err.Kind != tc.kind || err.Off != tc.off {
				t.Errorf("Number(%q): err %+v, want %v at %d", tc.in, err, tc.kind, tc.off)
			}
			continue
		}
		if err != nil || end != tc.end {
			t.Errorf("Number(%q) = %d, %+v; want %d", tc.in, end, err, tc.end)
		}
	}
}

func TestLiteralAndSpace(t *testing.T) {
	if end, err := Literal("true,", 0, "true"); err != nil || end != 4 {
		t.Errorf("Literal(true) = %d, %v", end, err)
	}
	if _, err := Literal("trUe", 0, "true"); err == nil || err.Kind != BadLiteral || err.Off != 2 {
		t.Errorf("Literal(trUe): %+v", err)
	}
	if _, err := Literal("nul", 0, "null"); err == nil || err.Kind != EOF || err.Off != 3 {
		t.Errorf("Literal(nul): %+v", err)
	}
	if i := Space(" \t\r\n x", 0); i != 5 {
		t.Errorf("Space = %d", i)
	}
	if i := Space("\u00a0", 0); i != 0 {
		t.Errorf("a no-break space is not JSON whitespace: Space = %d", i)
	}
}

// FuzzToken holds the lexer to jsontext, the tokenizer of the gateway's
// strict reader (internal/strictjson): a string or number token is accepted
// exactly when jsontext accepts the same bytes as a JSON value, and a
// string decodes to the same contents.
func FuzzToken(f *testing.F) {
	for _, s := range []string{
		`"abc"`, `"\u00e9\ud83d\ude00"`, `"\ud83d"`, "\"\xff\"", `"\u0000\/"`, `-0.5e+10`, `01`, `1.`, `"a\tb"`,
		"\"\xed\xa0\x80\"", `"\ud83d\u0041"`, `"` + strings.Repeat("x", 20) + `\n"`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if in == "" {
			return
		}
		var end int
		var esc bool
		var err *Error
		switch c := in[0]; {
		case c == '"':
			end, esc, err = String(in, 0)
		case c == '-' || isDigit(c):
			end, err = Number(in, 0)
		default:
			return
		}
		// jsontext allows whitespace after the value.
		ok := err == nil && Space(in, end) == len(in)
		valid := jsontext.Value(in).IsValid()
		if ok != valid {
			t.Fatalf("%q: lexer accepts %v (end %d, err %+v), jsontext %v", in, ok, end, err, valid)
		}
		if err == nil && end > len(in) {
			t.Fatalf("%q: end %d past the input", in, end)
		}
		if ok && in[0] == '"' {
			want, uerr := jsontext.AppendUnquote(nil, in[:end])
			if uerr != nil {
				t.Fatalf("%q: jsontext cannot unquote: %v", in, uerr)
			}
			if got := AppendUnquoted(nil, []byte(in[1:end-1])); !bytes.Equal(got, want) {
				t.Fatalf("%q: unquoted %q, jsontext %q", in, got, want)
			}
			if !esc && in[1:end-1] != string(want) {
				t.Fatalf("%q: reported without escapes but decodes to %q", in, want)
			}
		}
	})
}

func BenchmarkString(b *testing.B) {
	doc := `"` + strings.Repeat("plain ascii text, and some more of it. ", 400) + `\n é"`
	b.SetBytes(int64(len(doc)))
	for b.Loop() {
		if _, _, err := String(doc, 0); err != nil {
			b.Fatal(err)
		}
	}
}
