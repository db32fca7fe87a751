package strictjson

import (
	"strings"
	"testing"

	"github.com/sacpgw/gateway/redact"
)

// upper is a name visitor that replaces every name holding '@' by "X".
func upper(seen *[]string) Visit {
	return func(p Path, s string) (string, bool) {
		*seen = append(*seen, p.String())
		if strings.Contains(s, "@") {
			return "X", true
		}
		return s, false
	}
}

// Unknown member names reach the name visitor with the member's path; known
// ones (the gateway's vocabulary) do not, and the values below a replaced
// name keep the original path.
func TestRewriteNamesVisitsUnknownNames(t *testing.T) {
	in := `{"model":"m","meta":{"a@b.co":{"deep":"v"}},"messages":[{"role":"user","content":"c","extra":1}]}`
	var names, values []string
	out, changed, err := RewriteNames([]byte(in), shape, func(p Path, s string) (string, bool) {
		values = append(values, p.String())
		return s, false
	}, upper(&names))
	if err != nil || !changed {
		t.Fatal(err, changed)
	}
	if want := `{"model":"m","meta":{"X":{"deep":"v"}},"messages":[{"role":"user","content":"c","extra":1}]}`; string(out) != want {
		t.Errorf("got  %s\nwant %s", out, want)
	}
	if got, want := strings.Join(names, " "), "meta meta.a@b.co meta.a@b.co.deep messages[0].extra"; got != want {
		t.Errorf("names visited %q, want %q", got, want)
	}
	if got, want := strings.Join(values, " "), "model meta.a@b.co.deep messages[0].role messages[0].content"; got != want {
		t.Errorf("values visited %q, want %q", got, want)
	}
}

// A replaced name never repeats a sibling's, nor shadows a known field up
// to case; each object is resolved on its own.
func TestRewriteNamesCollisions(t *testing.T) {
	for _, tc := range []struct{ note, in, want string }{
		{"two alike", `{"k":{"a@b":1,"c@d":2}}`, `{"k":{"X":1,"X#2":2}}`},
		{"equals a later sibling", `{"k":{"a@b":1,"X":2}}`, `{"k":{"X#2":1,"X":2}}`},
		{"equals an earlier sibling", `{"k":{"X":1,"a@b":2}}`, `{"k":{"X":1,"X#2":2}}`},
		{"suffix taken", `{"k":{"a@b":1,"c@d":2,"X#2":3}}`, `{"k":{"X":1,"X#3":2,"X#2":3}}`},
		{"nested objects apart", `{"k":{"a@b":{"c@d":1,"X":2},"e@f":[{"g@h":0}]}}`, `{"k":{"X":{"X#2":1,"X":2},"X#2":[{"X":0}]}}`},
	} {
		var seen []string
		out, _, err := RewriteNames([]byte(tc.in), shape, nil, upper(&seen))
		if err != nil {
			t.Fatalf("%s: %v", tc.note, err)
		}
		if string(out) != tc.want {
			t.Errorf("%s:\n got %s\nwant %s", tc.note, out, tc.want)
		}
		if err := Check(out, shape); err != nil {
			t.Errorf("%s: output fails the strict reading: %v", tc.note, err)
		}
	}
	// A name replaced by a known field's name, or a case variant of one,
	// would be read as that field by a case-insensitive reader.
	out, _, err := RewriteNames([]byte(`{"model":"m","a@b":1}`), shape, nil, func(_ Path, s string) (string, bool) {
		return "MODEL", s == "a@b"
	})
	if err != nil || string(out) != `{"model":"m","MODEL#2":1}` {
		t.Errorf("shadowing rename: %s, %v", out, err)
	}
}

// FuzzRewriteNames: rewriting names and values with the gateway's redactor
// gives a document the strict reading accepts (no repeated name, no case
// variant of a known field) in which redaction finds nothing more.
func FuzzRewriteNames(f *testing.F) {
	for _, s := range []string{`{"model":"m","a@b.co":{"c@d.co":1,"[REDACTED:email]":2}}`, `[{"10.0.0.1":"x","k\u0040b.co":[]}]`,
		`{"messages":[{"role":"u","content":"a@b.co","x@y.co":null}]}`} {
		f.Add(s)
	}
	r, err := redact.New(redact.Config{Detectors: redact.Names()})
	if err != nil {
		f.Fatal(err)
	}
	var found int
	red := func(_ Path, s string) (string, bool) {
		o, res := r.String(s)
		found += res.Total()
		return o, o != s
	}
	f.Fuzz(func(t *testing.T, in string) {
		out, _, err := RewriteNames([]byte(in), shape, red, red)
		if err != nil {
			return
		}
		if err := Check(out, shape); err != nil {
			t.Fatalf("RewriteNames(%q) = %q, refused by the strict reading: %v", in, out, err)
		}
		found = 0
		again, changed, err := RewriteNames(out, shape, red, red)
		if err != nil || changed || found != 0 {
			t.Fatalf("RewriteNames(%q) = %q; again %q, %d found, %v", in, out, again, found, err)
		}
	})
}
