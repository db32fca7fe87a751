package definition

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// renderRoot is what the engine passes to Render after the research node
// answered: JSON-decoded with json.Number.
func renderRoot(t *testing.T) map[string]any {
	t.Helper()
	return decode(t, `{
		"input": {"company": "Acme <Corp>", "n": 3, "ratio": 0.25, "strict": true, "none": null,
		          "nested": {"k": {"v": "deep"}}, "tags": ["a", "b<c"]},
		"context": {"vendor": {"name": "acme"}},
		"research": {"status": "success", "message": "found 2", "thought": "",
		             "data": {"guesses": ["ceo@acme.com", "boss@acme.com"], "obj": {"b": 1, "a": [true, null]},
		                      "file": {"blob": "sha256:abc", "size": 12}}}
	}`, true).(map[string]any)
}

func TestTemplateRender(t *testing.T) {
	cases := []struct {
		name, tmpl, want string
	}{
		{"plain text", "no placeholders", "no placeholders"},
		{"empty", "", ""},
		{"string raw", "Find the e-mail of the CEO of {{input.company}}.", "Find the e-mail of the CEO of Acme <Corp>."},
		{"array as JSON", "Validate these addresses: {{research.data.guesses}}", `Validate these addresses: ["ceo@acme.com","boss@acme.com"]`},
		{"array not HTML-escaped", "{{input.tags}}", `["a","b<c"]`},
		{"integer", "n={{input.n}}", "n=3"},
		{"float", "{{input.ratio}}", "0.25"},
		{"boolean", "{{input.strict}}", "true"},
		{"null", "{{input.none}}", "null"},
		{"nested", "{{input.nested.k.v}}", "deep"},
		{"object sorted keys", "{{research.data.obj}}", `{"a":[true,null],"b":1}`},
		{"index", "first: {{research.data.guesses.0}}, second: {{ research.data.guesses.1 }}", "first: ceo@acme.com, second: boss@acme.com"},
		{"message", "{{research.message}}", "found 2"},
		{"empty string value", "[{{research.thought}}]", "[]"},
		{"context", "{{context.vendor.name}}", "acme"},
		{"whole answer", "{{research.status}}/{{ research.data.file }}", `success/{"blob":"sha256:abc","size":12}`},
		{"spaces and adjacency", "{{ input.n }}{{input.n}}", "33"},
		{"braces in text", "a } b }} c {", "a } b }} c {"},
	}
	root := renderRoot(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			tm, err := ParseTemplate(c.tmpl)
			if err != nil {
				t.Fatalf("ParseTemplate(%q): %v", c.tmpl, err)
			}
			got, err := tm.Render(root, nil)
			if err != nil {
				t.Fatalf("Render: %v", err)
			}
			if got != c.want {
				t.Errorf("Render(%q) = %q, want %q", c.tmpl, got, c.want)
			}
			if tm.String() != c.tmpl {
				t.Errorf("String() = %q, want the source %q", tm.String(), c.tmpl)
			}
		})
	}
}

func TestTemplateRenderErrors(t *testing.T) {
	cases := []struct {
		name string
		root map[string]any // nil: renderRoot
		tmpl string
		want string
	}{
		{"missing key", map[string]any{"research": map[string]any{"data": map[string]any{}}},
			"{{research.data.guesses}}", `{{research.data.guesses}}: "guesses" is not in research.data`},
		{"missing key deep", nil, "x {{ input.nested.k.w }}", `{{input.nested.k.w}}: "w" is not in input.nested.k`},
		{"node not answered", nil, "{{validate.data}}", `{{validate.data}}: "validate" is not available (no such input, context or node answer)`},
		{"index out of range", nil, "{{research.data.guesses.2}}", `{{research.data.guesses.2}}: index 2 is out of range of research.data.guesses (length 2)`},
		{"huge index", nil, "{{research.data.guesses.99999999999999999999}}", `index 99999999999999999999 is out of range of research.data.guesses (length 2)`},
		{"name on array", nil, "{{research.data.guesses.first}}", `{{research.data.guesses.first}}: "first" is not an index: research.data.guesses is an array`},
		{"index a string", nil, "{{input.company.name}}", `{{input.company.name}}: cannot read "name": input.company is a string, not an object or array`},
		{"index a number", nil, "{{input.n.0}}", `cannot read "0": input.n is a number, not an object or array`},
		{"index null", nil, "{{input.none.x}}", `cannot read "x": input.none is null, not an object or array`},
		{"blob without function", nil, "{{blob research.data.file}}", `{{blob research.data.file}}: no blob function`},
		{"unencodable", map[string]any{"input": map[string]any{"ch": make(chan int)}}, "{{input.ch}}", `{{input.ch}}: cannot encode the value as JSON`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			root := c.root
			if root == nil {
				root = renderRoot(t)
			}
			tm, err := ParseTemplate(c.tmpl)
			if err != nil {
				t.Fatalf("ParseTemplate: %v", err)
			}
			out, err := tm.Render(root, nil)
			if err == nil {
				t.Fatalf("Render = %q, want an error containing %q", out, c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("Render error = %q, want it to contain %q", err, c.want)
			}
		})
	}
}

func TestTemplateRenderGoTypes(t *testing.T) {
	// A root assembled by hand rather than decoded still resolves.
	tm, err := ParseTemplate("{{input.list.1}} {{input.m.k}}")
	if err != nil {
		t.Fatal(err)
	}
	got, err := tm.Render(map[string]any{"input": map[string]any{"list": []string{"a", "b"}, "m": map[string]string{"k": "v"}}}, nil)
	if err != nil || got != "b v" {
		t.Errorf("Render = %q, %v; want \"b v\"", got, err)
	}
}

func TestTemplateBlob(t *testing.T) {
	tm, err := ParseTemplate("see {{blob research.data.file}} and {{ blob  input.company }}")
	if err != nil {
		t.Fatal(err)
	}
	root := renderRoot(t)
	var got []any
	out, err := tm.Render(root, func(ref any) (string, error) {
		got = append(got, ref)
		if s, ok := ref.(string); ok {
			return "<" + s + ">", nil
		}
		return "CONTENT", nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if want := "see CONTENT and <Acme <Corp>>"; out != want {
		t.Errorf("Render = %q, want %q", out, want)
	}
	file := root["research"].(map[string]any)["data"].(map[string]any)["file"]
	if len(got) != 2 || !reflect.DeepEqual(got[0], file) || got[1] != "Acme <Corp>" {
		t.Errorf("blob called with %#v, want [%#v, \"Acme <Corp>\"]", got, file)
	}

	boom := errors.New("blob store down")
	_, err = tm.Render(root, func(any) (string, error) { return "", boom })
	if !errors.Is(err, boom) || !strings.Contains(err.Error(), "{{blob research.data.file}}") {
		t.Errorf("Render with a failing blob = %v, want the blob error with its placeholder", err)
	}
}

func TestParseTemplateErrors(t *testing.T) {
	cases := []struct {
		tmpl, want string
	}{
		{"Find {{input.company", `"{{" at offset 5 has no closing "}}"`},
		{"{{input.a}} {{", `"{{" at offset 12 has no closing "}}"`},
		{"{{}}", "empty path"},
		{"{{   }}", "empty path"},
		{"{{input..company}}", `bad path segment ""`},
		{"{{input.}}", `bad path segment ""`},
		{"{{.input}}", `bad path segment ""`},
		{"{{input.comp any}}", `unknown function "input.comp"`},
		{"{{input.company!}}", `bad path segment "company!"`},
		{"{{input.a{b}}", `bad path segment "a{b"`},
		{"{{upper input.company}}", `unknown function "upper"`},
		{"{{blob a b}}", "too many words"},
		{"{{blob a.é}}", `bad path segment "é"`},
	}
	for _, c := range cases {
		t.Run(c.tmpl, func(t *testing.T) {
			tm, err := ParseTemplate(c.tmpl)
			if err == nil {
				t.Fatalf("ParseTemplate(%q) = %v, want an error containing %q", c.tmpl, tm, c.want)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Errorf("ParseTemplate(%q) error = %q, want it to contain %q", c.tmpl, err, c.want)
			}
		})
	}
}

func TestTemplateNodes(t *testing.T) {
	cases := []struct {
		tmpl string
		want []string
	}{
		{"no refs", nil},
		{"{{input.a}} {{context.b}}", nil},
		// A lone word is a path, so {{blob}} is the answer of a node named blob.
		{"{{blob}}", []string{"blob"}},
		{"{{research.a}} {{input.x}} {{validate.b}} {{research.c}} {{context.y}} {{blob validate.d}} {{score}}", []string{"research", "validate", "score"}},
	}
	for _, c := range cases {
		tm, err := ParseTemplate(c.tmpl)
		if err != nil {
			t.Fatal(err)
		}
		if got := tm.Nodes(); !slices.Equal(got, c.want) {
			t.Errorf("Nodes(%q) = %v, want %v", c.tmpl, got, c.want)
		}
	}
}
