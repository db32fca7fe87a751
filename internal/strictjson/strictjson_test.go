package strictjson

import (
	"reflect"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
)

var shape = Object(map[string]*Fields{
	"model":    nil,
	"messages": Array(Object(map[string]*Fields{"role": nil, "content": nil})),
})

func TestCheck(t *testing.T) {
	cases := []struct {
		note, in, path, msg string // msg "" = accepted
	}{
		{"plain", `{"model":"m","messages":[{"role":"user","content":"x"}]}`, "", ""},
		{"unknown members pass", `{"model":"m","extra":{"Model":1,"model":2}}`, "", ""},
		{"case variant", `{"model":"a","Model":"b"}`, "Model", "only by case"},
		{"lone case variant", `{"MODEL":"a"}`, "MODEL", "only by case"},
		{"nested case variant", `{"messages":[{"role":"u"},{"Role":"s"}]}`, "messages[1].Role", "only by case"},
		{"duplicate", `{"model":"a","model":"b"}`, "model", "duplicate key"},
		{"duplicate at unknown depth", `{"x":[{"k":1,"k":2}]}`, "x[0].k", "duplicate key"},
		{"trailing value", `{"model":"a"} {}`, "", "after the JSON value"},
		{"trailing garbage", `{"model":"a"} x`, "", "after the JSON value"},
		{"invalid utf-8", "{\"model\":\"\xff\"}", "", "invalid"},
		{"lone surrogate", `{"model":"\udc00"}`, "", "invalid"},
		{"empty", ``, "", "empty"},
		{"cut", `{"model":`, "", "unexpected EOF"},
		{"number out of float64 range", `{"temperature":1e400}`, "temperature", "out of range"},
		{"big but representable", `{"seed":123456789012345678901234567890,"t":1.7e308}`, "", ""},
	}
	for _, tc := range cases {
		err := Check([]byte(tc.in), shape)
		if tc.msg == "" {
			if err != nil {
				t.Errorf("%s: refused: %v", tc.note, err)
			}
			continue
		}
		se, ok := err.(*Error)
		if !ok || !strings.Contains(se.Msg, tc.msg) || (tc.path != "" && se.Path != tc.path) {
			t.Errorf("%s: got %v, want %q at %q", tc.note, err, tc.msg, tc.path)
		}
	}
}

func TestRewriteReplacesOnlyVisitedStrings(t *testing.T) {
	in := `{"model":"m","n":1.50e3,"messages":[{"role":"user","content":"mail bob@example.com"}],"k":"bob@example.com"}`
	out, changed, err := Rewrite([]byte(in), shape, func(p Path, s string) (string, bool) {
		if p.String() == "messages[0].content" {
			return "mail [x]", true
		}
		return s, false
	})
	if err != nil || !changed {
		t.Fatal(err, changed)
	}
	want := `{"model":"m","n":1.50e3,"messages":[{"role":"user","content":"mail [x]"}],"k":"bob@example.com"}`
	if string(out) != want {
		t.Fatalf("got  %s\nwant %s", out, want)
	}
	same, changed, _ := Rewrite([]byte(in), shape, func(_ Path, s string) (string, bool) { return s, false })
	if changed || string(same) != in {
		t.Fatal("an unchanged document must come back as it was")
	}
}

func TestFromStruct(t *testing.T) {
	type inner struct {
		Name string `json:"name"`
	}
	type outer struct {
		ID    string  `json:"id,omitempty"`
		Items []inner `json:"items"`
		Skip  string  `json:"-"`
	}
	f := FromStruct(reflect.TypeOf(&outer{}))
	if err := Check([]byte(`{"id":"a","items":[{"name":"x"}]}`), f); err != nil {
		t.Fatal(err)
	}
	if err := Check([]byte(`{"items":[{"Name":"x"}]}`), f); err == nil || !strings.Contains(err.Error(), "items[0].Name") {
		t.Fatalf("nested case variant: %v", err)
	}
}

// FuzzCheck: whatever Check accepts, encoding/json v2 (strict, case
// sensitive) accepts too, and Rewrite without changes is the identity.
func FuzzCheck(f *testing.F) {
	for _, s := range []string{`{"model":"m","messages":[{"role":"u","content":"c"}]}`, `{"a":[1,2,{"b":null}]}`, `"x"`, `{"model":"a","Model":"b"}`, `[{"k":1},{"k":1}]`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if err := Check([]byte(in), shape); err != nil {
			return
		}
		var v any
		if err := jsonv2.Unmarshal([]byte(in), &v); err != nil {
			t.Fatalf("accepted %q that a strict reader refuses: %v", in, err)
		}
		out, changed, err := Rewrite([]byte(in), shape, func(_ Path, s string) (string, bool) { return s + "!", true })
		if err != nil || (!changed && string(out) != in) {
			t.Fatalf("rewrite of %q: %v", in, err)
		}
		if err := Check(out, shape); err != nil {
			t.Fatalf("rewrite produced %q, which fails the strict reading: %v", out, err)
		}
	})
}
