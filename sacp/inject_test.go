package sacp

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
)

// decodeExact decodes JSON keeping numbers as written, so a test can tell
// 12345678901234567890 from its float64 rounding.
func decodeExact(t *testing.T, b []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", b, err)
	}
	return v
}

func TestInject(t *testing.T) {
	tpl := NewTemplate("PROTO")
	tests := []struct {
		name string
		body string
		want string
	}{
		{
			name: "no system message inserts one first",
			body: `{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
			want: `{"model":"m","messages":[{"role":"system","content":"PROTO"},{"role":"user","content":"hi"}]}`,
		},
		{
			name: "empty conversation gets a system message",
			body: `{"model":"m","messages":[]}`,
			want: `{"model":"m","messages":[{"role":"system","content":"PROTO"}]}`,
		},
		{
			name: "string system content is appended to",
			body: `{"messages":[{"role":"system","content":"Be terse."},{"role":"user","content":"hi"}]}`,
			want: `{"messages":[{"role":"system","content":"Be terse.\n\nPROTO"},{"role":"user","content":"hi"}]}`,
		},
		{
			name: "empty string system content gets no separator",
			body: `{"messages":[{"role":"system","content":""}]}`,
			want: `{"messages":[{"role":"system","content":"PROTO"}]}`,
		},
		{
			name: "null system content becomes the template",
			body: `{"messages":[{"role":"system","content":null}]}`,
			want: `{"messages":[{"role":"system","content":"PROTO"}]}`,
		},
		{
			name: "array system content gets a text part",
			body: `{"messages":[{"role":"system","content":[{"type":"text","text":"Be terse.","cache_control":{"type":"ephemeral"}}]}]}`,
			want: `{"messages":[{"role":"system","content":[{"type":"text","text":"Be terse.","cache_control":{"type":"ephemeral"}},{"type":"text","text":"\n\nPROTO"}]}]}`,
		},
		{
			name: "empty array system content gets a bare text part",
			body: `{"messages":[{"role":"system","content":[]}]}`,
			want: `{"messages":[{"role":"system","content":[{"type":"text","text":"PROTO"}]}]}`,
		},
		{
			name: "system then developer: the developer message closes the run",
			body: `{"messages":[{"role":"system","content":"A"},{"role":"developer","content":"B"},{"role":"user","content":"hi"}]}`,
			want: `{"messages":[{"role":"system","content":"A"},{"role":"developer","content":"B\n\nPROTO"},{"role":"user","content":"hi"}]}`,
		},
		{
			name: "later system messages are not touched",
			body: `{"messages":[{"role":"system","content":"A"},{"role":"user","content":"hi"},{"role":"system","content":"late"}]}`,
			want: `{"messages":[{"role":"system","content":"A\n\nPROTO"},{"role":"user","content":"hi"},{"role":"system","content":"late"}]}`,
		},
		{
			name: "a system message after the first user message does not count as leading",
			body: `{"messages":[{"role":"user","content":"hi"},{"role":"system","content":"late"}]}`,
			want: `{"messages":[{"role":"system","content":"PROTO"},{"role":"user","content":"hi"},{"role":"system","content":"late"}]}`,
		},
		{
			name: "other fields of body and messages are preserved",
			body: `{"model":"gpt-4o","temperature":0.70,"seed":12345678901234567890,"stream":true,
				"stream_options":{"include_usage":true},"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],
				"x_vendor":{"a":[1,"<b>&"]},
				"messages":[{"role":"system","name":"ops","content":"A","x_meta":{"k":1e400}},
					{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`,
			want: `{"model":"gpt-4o","temperature":0.70,"seed":12345678901234567890,"stream":true,
				"stream_options":{"include_usage":true},"tools":[{"type":"function","function":{"name":"f","parameters":{}}}],
				"x_vendor":{"a":[1,"<b>&"]},
				"messages":[{"role":"system","name":"ops","content":"A\n\nPROTO","x_meta":{"k":1e400}},
					{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`,
		},
		{
			name: "already injected string content is left alone",
			body: `{"messages":[{"role":"system","content":"A\n\nPROTO"}]}`,
			want: `{"messages":[{"role":"system","content":"A\n\nPROTO"}]}`,
		},
		{
			name: "already injected array content is left alone",
			body: `{"messages":[{"role":"system","content":[{"type":"text","text":"A"},{"type":"text","text":"\n\nPROTO"}]}]}`,
			want: `{"messages":[{"role":"system","content":[{"type":"text","text":"A"},{"type":"text","text":"\n\nPROTO"}]}]}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Inject([]byte(tt.body), tpl)
			if err != nil {
				t.Fatal(err)
			}
			if g, w := decodeExact(t, got), decodeExact(t, []byte(tt.want)); !reflect.DeepEqual(g, w) {
				t.Errorf("Inject() =\n%s\nwant\n%s", got, tt.want)
			}
			// Injection must be idempotent so a re-ask body built from an
			// injected one does not repeat the protocol.
			again, err := Inject(got, tpl)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(decodeExact(t, again), decodeExact(t, got)) {
				t.Errorf("second Inject() changed the body:\n%s\n->\n%s", got, again)
			}
		})
	}
}

// Raw values are carried over, not re-encoded through Go types: the exact
// number spelling survives and nothing is HTML-escaped.
func TestInjectKeepsRawBytes(t *testing.T) {
	body := `{"seed":12345678901234567890,"temperature":0.70,"x":"<b>&amp;</b>","messages":[{"role":"user","content":"a<b"}]}`
	got, err := Inject([]byte(body), NewTemplate("P <&>"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`12345678901234567890`, `0.70`, `"<b>&amp;</b>"`, `"a<b"`, `"P <&>"`} {
		if !strings.Contains(string(got), want) {
			t.Errorf("output %s lacks %s", got, want)
		}
	}
}

func TestInjectErrors(t *testing.T) {
	tests := []struct {
		name    string
		body    string
		wantErr string
	}{
		{name: "not json", body: `{"messages":`, wantErr: "body"},
		{name: "not an object", body: `[1,2]`, wantErr: "body"},
		{name: "null body", body: `null`, wantErr: "body"},
		{name: "no messages", body: `{"model":"m"}`, wantErr: "messages: missing"},
		{name: "messages not an array", body: `{"messages":{"role":"user"}}`, wantErr: "messages: not an array"},
		{name: "messages null", body: `{"messages":null}`, wantErr: "messages: not an array"},
		{name: "message not an object", body: `{"messages":["hi"]}`, wantErr: "messages[0]"},
		{name: "message without role", body: `{"messages":[{"content":"hi"}]}`, wantErr: "messages[0]: role: missing"},
		{name: "role not a string", body: `{"messages":[{"role":1}]}`, wantErr: "messages[0]"},
		{name: "system content not text", body: `{"messages":[{"role":"system","content":42}]}`, wantErr: "messages[0]: content: got number, want string or array"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Inject([]byte(tt.body), NewTemplate("P"))
			if err == nil {
				t.Fatal("Inject() succeeded, want an error")
			}
			if !errors.Is(err, ErrMalformedRequest) {
				t.Errorf("err = %v, want it to wrap ErrMalformedRequest", err)
			}
			if !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestInjectDefaultTemplateClosesSystemPrompt(t *testing.T) {
	tpl, err := LoadTemplate("")
	if err != nil {
		t.Fatal(err)
	}
	got, err := Inject([]byte(`{"messages":[{"role":"system","content":"You extract invoices."},{"role":"user","content":"go"}]}`), tpl)
	if err != nil {
		t.Fatal(err)
	}
	var req struct {
		Messages []struct{ Content string } `json:"messages"`
	}
	if err := json.Unmarshal(got, &req); err != nil {
		t.Fatal(err)
	}
	if c := req.Messages[0].Content; !strings.HasPrefix(c, "You extract invoices.\n\n### SYSTEM PROTOCOL") || !strings.HasSuffix(c, DefaultTemplate) {
		t.Errorf("system content = %q", c)
	}
}

func TestInjectRejectsEmptyTemplate(t *testing.T) {
	if _, err := Inject([]byte(`{"messages":[]}`), Template{}); err == nil {
		t.Error("Inject() with a zero Template succeeded; it would silently drop the protocol")
	}
}

// FuzzInject: whatever body Inject accepts, it returns valid JSON whose
// leading system prompt now ends with the template, and a second Inject
// leaves it as it is (a re-ask does not repeat the protocol).
func FuzzInject(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[]}`,
		`{"messages":[{"role":"system","content":"Be terse."},{"role":"user","content":"hi"}]}`,
		`{"messages":[{"role":"system","content":null}]}`,
		`{"messages":[{"role":"system","content":[{"type":"text","text":"A"}]}]}`,
		`{"messages":[{"role":"system","content":"A"},{"role":"developer","content":"B"},{"role":"user","content":"hi"}]}`,
		`{"x":[1,{"y":"z"}],"messages" : [ {"role":"user","content":"hi"} , {"role":"system"} ] , "n":1e400}`,
		`{"messages":`, `[1]`, `{"messages":[{"role":1}]}`,
	} {
		f.Add([]byte(s))
	}
	tpl := NewTemplate("PROTO")
	f.Fuzz(func(t *testing.T, body []byte) {
		out, err := Inject(body, tpl)
		if err != nil {
			if !errors.Is(err, ErrMalformedRequest) {
				t.Fatalf("error %v does not wrap ErrMalformedRequest", err)
			}
			return
		}
		if !json.Valid(out) {
			t.Fatalf("Inject(%q) = %q: not JSON", body, out)
		}
		if !bytes.Contains(out, []byte("PROTO")) {
			t.Fatalf("Inject(%q) = %q: no template", body, out)
		}
		again, err := Inject(out, tpl)
		if err != nil || !bytes.Equal(again, out) {
			t.Fatalf("second Inject changed %q to %q (%v)", out, again, err)
		}
	})
}
