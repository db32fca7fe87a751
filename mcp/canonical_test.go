package mcp

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strconv"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// TestNumberKept: the numbers whose RFC 8785 form is the value the agent
// wrote pass (however written), the others are refused.
func TestNumberKept(t *testing.T) {
	for lit, kept := range map[string]bool{
		"0": true, "-0": true, "1.0": true, "1E2": true, "1e+21": true, "0.1": true, "0.10": true, "-1.5e-7": true,
		"9007199254740991": true, "-9007199254740991": true, "9007199254740994.0": true, "1e300": true, "5e-324": true,
		"9007199254740992": false, "-9007199254740993": false, "12345678901234567891": false,
		"0.10000000000000000001": false, "9007199254740993.0": false, "1e400": false, "1e-400": false,
		"0e-99999999999": false, "3.141592653589793238": false,
	} {
		err := numberKept(lit)
		if (err == nil) != kept || (err != nil && !errors.Is(err, errNumberChanged)) {
			t.Errorf("%s: %v, want kept %v", lit, err, kept)
		}
	}
}

// numbers are the decimal values of every number of v, sorted.
func numbers(t *testing.T, v []byte) []string {
	dec := jsontext.NewDecoder(bytes.NewReader(v))
	var out []string
	for {
		tok, err := dec.ReadToken()
		if err == io.EOF {
			slices.Sort(out)
			return out
		}
		if err != nil {
			t.Fatalf("%q: %v", v, err)
		}
		if tok.Kind() == '0' {
			neg, digits, exp, ok := decimal(tok.String())
			if !ok {
				t.Fatalf("%q: a number decimal cannot read", tok.String())
			}
			out = append(out, strconv.FormatBool(neg)+" "+digits+"e"+strconv.Itoa(exp))
		}
	}
}

// FuzzCanonicalForm: what canonicalForm accepts it returns in a form it
// accepts again unchanged, holding the same numbers as the value the
// agent sent (compared as decimals): the form forwarded and shown never
// carries another value than the one sent.
func FuzzCanonicalForm(f *testing.F) {
	for _, s := range []string{
		`{"n":9007199254740991,"a":[0.1,1E2,-0,{"b":1.5e-7}],"s":"caf\u00e9"}`,
		`{"n":9007199254740993}`, `{"amount":0.10000000000000000001}`, `[1e400]`, `{"z":{"y":[true,null,"x"]}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if !jsontext.Value(data).IsValid() {
			return
		}
		canon, err := canonicalForm(data)
		if err != nil {
			return
		}
		again, err := canonicalForm(canon)
		if err != nil || !bytes.Equal(again, canon) {
			t.Fatalf("%q: its canonical form %q is not its own (%q, %v)", data, canon, again, err)
		}
		if a, b := numbers(t, data), numbers(t, canon); !slices.Equal(a, b) {
			t.Fatalf("%q became %q: numbers %v, now %v", data, canon, a, b)
		}
	})
}
