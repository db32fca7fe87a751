package redact

import (
	"encoding/json"
	"testing"

	"github.com/go-json-experiment/json/jsontext"
)

// A member name is the agent's text like any value: an address used as a
// key (metadata, logit_bias, a schema's properties, tool arguments) is
// masked, counted, and blocks where its detector blocks.
func TestJSONNames(t *testing.T) {
	r := mustNew(t, Config{Detectors: Names()})
	for _, tc := range []struct {
		name, in, want string
		total          int
	}{
		{"metadata key", `{"metadata":{"alice@example.com":"v"}}`, `{"metadata":{"` + rEmail + `":"v"}}`, 1},
		{"escaped name", `{"alice\u0040example.com":1}`, `{"` + rEmail + `":1}`, 1},
		{"deep in arrays", `[{"a":[{"10.0.0.1":null}]}]`, `[{"a":[{"` + rIP + `":null}]}]`, 1},
		{"two masked alike", `{"a@b.co":1,"c@d.co":2}`, `{"` + rEmail + `":1,"` + rEmail + `#2":2}`, 2},
		{"masked equals a later sibling", `{"a@b.co":1,"` + rEmail + `":2}`, `{"` + rEmail + `#2":1,"` + rEmail + `":2}`, 1},
		{"masked equals an earlier sibling", `{"` + rEmail + `":1,"a@b.co":2}`, `{"` + rEmail + `":1,"` + rEmail + `#2":2}`, 1},
		{"suffix taken too", `{"a@b.co":1,"c@d.co":2,"` + rEmail + `#2":3}`,
			`{"` + rEmail + `":1,"` + rEmail + `#3":2,"` + rEmail + `#2":3}`, 2},
		{"nested collisions, each object alone", `{"a@b.co":{"a@b.co":1,"e@f.co":{"x@y.co":"z"}},"c@d.co":[]}`,
			`{"` + rEmail + `":{"` + rEmail + `":1,"` + rEmail + `#2":{"` + rEmail + `":"z"}},"` + rEmail + `#2":[]}`, 5},
		{"clean names untouched", `{"plain":{"k\u00e9y":1}}`, `{"plain":{"k\u00e9y":1}}`, 0},
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
			if !jsontext.Value(got).IsValid() {
				t.Errorf("output is not valid JSON without repeated names: %s", got)
			}
		})
	}
}

func TestJSONNameBlocks(t *testing.T) {
	r := mustNew(t, Config{Detectors: []string{"email"}, Block: []string{"email"}})
	_, res, err := r.JSON([]byte(`{"tool":{"parameters":{"properties":{"alice@example.com":{"type":"string"}}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if res.Blocked != "email" || res.Counts["email"] != 1 {
		t.Errorf("result %+v, want blocked by email with one count", res)
	}
}

// FuzzJSONNames: whatever the names, the output of a document without
// repeated names has none either, and nothing a detector finds is left in
// it (redacting it again changes nothing).
func FuzzJSONNames(f *testing.F) {
	for _, s := range []string{`{"a@b.co":1,"c@d.co":2}`, `{"a@b.co":1,"[REDACTED:email]":2}`,
		`{"[REDACTED:email]#2":0,"x@y.co":{"10.0.0.1":"4111111111111111"},"a@b.co":1}`, `[{"k\u0040b.co":[]}]`} {
		f.Add([]byte(s))
	}
	r := mustNew(f, Config{Detectors: Names()})
	f.Fuzz(func(t *testing.T, in []byte) {
		out, _, err := r.JSON(in)
		if err != nil {
			return
		}
		if !json.Valid(out) {
			t.Fatalf("JSON(%q) = %q, not valid", in, out)
		}
		if jsontext.Value(in).IsValid() && !jsontext.Value(out).IsValid() {
			t.Fatalf("JSON(%q) = %q: a name repeats", in, out)
		}
		again, res, err := r.JSON(out)
		if err != nil || res.Total() != 0 || string(again) != string(out) {
			t.Fatalf("JSON(%q) = %q; again %q, %d found, %v", in, out, again, res.Total(), err)
		}
	})
}
