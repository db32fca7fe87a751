package policy

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"

	sj "github.com/sacpgw/gateway/internal/strictjson"
)

// JSONInput must give the policies the same document encoding/json and
// ast.InterfaceToValue would, for every document the strict reading
// accepts; it exists only to do it in one pass.
func FuzzJSONInput(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0.2}`,
		`{"a":{"b":[1,2.5,-3e4,null,true,false,"x\u00e9\n"]},"":{}}`,
		`[]`, `"s"`, `12345678901234567890`, `{"z":1,"a":2}`, `1.0`, `{"k":[[],[{}]]}`,
		`{"r\u006fle":"\u0075ser","messages":[{"role":"system"},{"role":"tool","tool_calls":[]}]}`,
		`[{"a":[1,{"b":[2,{"c":3}]}],"d":4},[5,[6]]]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.UseNumber()
		var v any
		if dec.Decode(&v) != nil || dec.More() {
			return
		}
		if _, err := dec.Token(); err == nil {
			return
		}
		want, err := ast.InterfaceToValue(v)
		if err != nil {
			return
		}
		got, err := JSONInput(data)
		if err != nil {
			// jsontext refuses what encoding/json tolerates (invalid
			// UTF-8, duplicate names): the strict reading has refused
			// those before.
			return
		}
		if want.Compare(got) != 0 {
			t.Fatalf("JSONInput(%q) = %v, want %v", data, got, want)
		}
	})
}

func TestJSONInputRefusesTrailingData(t *testing.T) {
	for _, s := range []string{`{} {}`, `{"a":1}x`, `{"a":`, ``} {
		if _, err := JSONInput([]byte(s)); err == nil {
			t.Errorf("JSONInput(%q): no error", s)
		}
	}
}

// A RawJSON member is read by the decision as JSONInput reads it; a body
// no reader can convert fails the decision closed.
func TestRawJSONInput(t *testing.T) {
	e := newEngine(t, Options{Dir: defaultDir, NoWatch: true})
	ctx := context.Background()
	var msgs strings.Builder
	msgs.WriteString(`{"model":"m","messages":[`)
	for i := range 1001 {
		if i > 0 {
			msgs.WriteString(",")
		}
		msgs.WriteString(`{"role":"user","content":"x"}`)
	}
	msgs.WriteString(`]}`)
	for _, tc := range []struct {
		body string
		deny string
	}{
		{`{"model":"m","messages":[{"role":"user","content":"hi"}]}`, ""},
		{msgs.String(), "the conversation has 1001 messages, over the limit of 1000"},
		{`{"model":"m"}`, "request.messages must be an array"},
	} {
		d, err := e.ChatDeny(ctx, map[string]any{"agent": map[string]any{"id": "a"}, "model": "m", "request": RawJSON(tc.body)})
		if err != nil || d.Deny != (tc.deny != "") || (tc.deny != "" && d.Reasons[0] != tc.deny) {
			t.Errorf("%.40s: %+v %v", tc.body, d, err)
		}
	}
	d, _ := e.ChatDeny(ctx, map[string]any{"request": RawJSON(`{"a":`)})
	if !d.Deny || !d.FailClosed {
		t.Errorf("unreadable body: %+v", d)
	}
}

// BenchmarkJSONInput converts a small chat request, as the chat policy
// stage does on every request whose decision reads the input.
func BenchmarkJSONInput(b *testing.B) {
	body := []byte(`{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"What is six times seven?"}],"temperature":0.2,"max_tokens":64}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := JSONInput(body); err != nil {
			b.Fatal(err)
		}
	}
}

// inputBuilderSeeds are documents of every shape the strict reader may
// hand an InputBuilder: nesting, escapes, numbers as written, empty
// containers, and chat requests with text and content parts.
var inputBuilderSeeds = []string{
	`{"model":"m","messages":[{"role":"user","content":"hi"}],"temperature":0.2}`,
	`{"a":{"b":[1,2.5,-3e4,null,true,false,"x\u00e9\n"]},"":{}}`,
	`[]`, `"s"`, `12345678901234567890`, `{"z":1,"a":2}`, `1.0`, `{"k":[[],[{}]]}`, `null`, `true`,
	`{"r\u006fle":"\u0075ser","messages":[{"role":"system"},{"role":"tool","tool_calls":[]}]}`,
	`[{"a":[1,{"b":[2,{"c":3}]}],"d":4},[5,[6]]]`,
	`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"-----BEGIN PRIVATE KEY-----"},{"type":"image_url","image_url":{"url":"https://x"}}]}]}`,
}

// The reader's pass builds exactly the value JSONInput converts from the
// same bytes, for every document the strict reading accepts: a decision
// made on the built value is the decision made on the body.
func FuzzInputBuilder(f *testing.F) {
	for _, s := range inputBuilderSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b := NewInputBuilder()
		defer b.Release()
		if sj.CheckInto(data, nil, b) != nil {
			return
		}
		want, err := JSONInput(data)
		if err != nil {
			t.Fatalf("the strict reading accepted %q, JSONInput refused it: %v", data, err)
		}
		got, ok := b.Value().(ast.Value)
		if !ok {
			t.Fatalf("%q: no value built", data)
		}
		if got.Compare(want) != 0 {
			t.Fatalf("%q:\nbuilt     %v\nconverted %v", data, got, want)
		}
	})
}

// A walk that fails leaves no value, and the pooled builder keeps nothing
// of it for the next document.
func TestInputBuilderAfterAFailedWalk(t *testing.T) {
	b := NewInputBuilder()
	if err := sj.CheckInto([]byte(`{"messages":[{"role":"user","content":"a"},{"role":`), nil, b); err == nil {
		t.Fatal("a truncated document passed")
	}
	if v := b.Value(); v != nil {
		t.Errorf("a failed walk built %v", v)
	}
	b.Release()
	b = NewInputBuilder()
	defer b.Release()
	body := []byte(`{"messages":[{"role":"user","content":"b"}]}`)
	if err := sj.CheckInto(body, nil, b); err != nil {
		t.Fatal(err)
	}
	want, _ := JSONInput(body)
	if got, _ := b.Value().(ast.Value); got == nil || got.Compare(want) != 0 {
		t.Errorf("after a failed walk: built %v, want %v", got, want)
	}
}
