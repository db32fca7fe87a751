package compact

import (
	"reflect"
	"strings"
	"testing"
)

func TestNewLibraryErrors(t *testing.T) {
	search := Verb{Name: "search", Inputs: []string{"q:string"}}
	cases := []struct {
		name  string
		verbs []Verb
		tools []Tool
		want  []string // each a line of the joined error
	}{
		{"empty verb name", []Verb{search, {Name: ""}}, nil, []string{"verbs[1]: empty name"}},
		{"duplicate verb", []Verb{search, search}, nil, []string{`verb "search": duplicate name`}},
		{"reserved define", []Verb{{Name: "define"}}, nil, []string{`verb "define": name reserved for SPAWN_AGENT messages`}},
		{"reserved instantiate", []Verb{{Name: "instantiate"}}, nil, []string{`verb "instantiate": name reserved`}},
		{"unknown input type", []Verb{{Name: "v", Inputs: []string{"a", "b:date"}}}, nil,
			[]string{`verb "v": input "b:date": unknown type "date" (want string, number, integer, boolean, array, object or any)`}},
		{"colon in a type", []Verb{{Name: "v", Inputs: []string{"a:string:x"}}}, nil, []string{`verb "v": input "a:string:x": unknown type "string:x"`}},
		{"empty input name", []Verb{{Name: "v", Inputs: []string{":string"}}}, nil, []string{`verb "v": input ":string": empty name`}},
		{"duplicate input", []Verb{{Name: "v", Inputs: []string{"a", "a:number"}}}, nil, []string{`verb "v": input "a:number": duplicate name "a"`}},
		{"empty tool id", []Verb{search}, []Tool{{ID: "", SupportedVerbs: []string{"search"}}}, []string{"tools[0]: empty id"}},
		{"duplicate tool", []Verb{search}, []Tool{{ID: "T"}, {ID: "T"}}, []string{`tool "T": duplicate id`}},
		{"unknown verb in tool", []Verb{search}, []Tool{{ID: "T", SupportedVerbs: []string{"search", "fly"}}}, []string{`tool "T": unknown verb "fly" in supported_verbs`}},
		{"verb listed twice", []Verb{search}, []Tool{{ID: "T", SupportedVerbs: []string{"search", "search"}}}, []string{`tool "T": verb "search" listed twice`}},
		{"every problem reported", []Verb{{Name: ""}, search, search}, []Tool{{ID: "T", SupportedVerbs: []string{"x"}}, {ID: ""}},
			[]string{"verbs[0]: empty name", `verb "search": duplicate name`, `tool "T": unknown verb "x"`, "tools[1]: empty id"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			lib, err := NewLibrary(tc.verbs, tc.tools)
			if err == nil || lib != nil {
				t.Fatalf("NewLibrary = %v, %v; want an error", lib, err)
			}
			lines := strings.Split(err.Error(), "\n")
			if len(lines) != len(tc.want) {
				t.Fatalf("error %q: %d problems, want %d", err, len(lines), len(tc.want))
			}
			for i, w := range tc.want {
				if !strings.HasPrefix(lines[i], w) {
					t.Errorf("problem %d = %q, want prefix %q", i, lines[i], w)
				}
			}
		})
	}
}

func TestNewLibraryAccepts(t *testing.T) {
	// join needs no verb definition to appear in supported_verbs; every type
	// name is known; a tool may support nothing yet.
	lib, err := NewLibrary(
		[]Verb{{Name: "v", Inputs: []string{"a:string", "b:number", "c:integer", "d:boolean", "e:array", "f:object", "g:any", "ctx.history"}}},
		[]Tool{{ID: "M", SupportedVerbs: []string{"join"}}, {ID: "E"}})
	if err != nil {
		t.Fatal(err)
	}
	if !lib.hasJoinTools() {
		t.Error("hasJoinTools = false")
	}
	if got := lib.verb("v").typed; len(got) != 6 || got["c"] != typeInteger || got["a"] != typeString {
		t.Errorf("typed inputs = %v", got)
	}
	empty, err := NewLibrary(nil, nil)
	if err != nil || len(empty.Verbs()) != 0 || len(empty.Tools()) != 0 {
		t.Errorf("NewLibrary(nil, nil) = %v, %v", empty, err)
	}
}

func TestLibraryAccessors(t *testing.T) {
	verbs, tools := seedVerbs(), seedTools()
	lib := seedLibrary(t)

	gotVerbs := lib.Verbs()
	if len(gotVerbs) != len(verbs) {
		t.Fatalf("Verbs: %d, want %d", len(gotVerbs), len(verbs))
	}
	for i := 1; i < len(gotVerbs); i++ {
		if gotVerbs[i-1].Name >= gotVerbs[i].Name {
			t.Fatalf("Verbs not sorted: %q before %q", gotVerbs[i-1].Name, gotVerbs[i].Name)
		}
	}
	gotTools := lib.Tools()
	if len(gotTools) != len(tools) || gotTools[0].ID != "FEEDBACK_DOC" || gotTools[len(gotTools)-1].ID != "SUMMARY" {
		t.Fatalf("Tools = %v", gotTools)
	}

	v, ok := lib.Verb("generate")
	if !ok || !reflect.DeepEqual(v, verbs[6]) {
		t.Errorf("Verb(generate) = %+v, %v; want %+v", v, ok, verbs[6])
	}
	tl, ok := lib.Tool("H_API")
	if !ok || !reflect.DeepEqual(tl, tools[0]) {
		t.Errorf("Tool(H_API) = %+v, %v; want %+v", tl, ok, tools[0])
	}
	if _, ok := lib.Verb("fly"); ok {
		t.Error("Verb(fly) found")
	}
	if _, ok := lib.Tool("JET"); ok {
		t.Error("Tool(JET) found")
	}

	// Neither the caller's slices nor returned copies reach the library.
	verbs[0].Inputs[0] = "c:number"
	tools[1].SupportedVerbs[0] = "p"
	v.Inputs[0] = "changed"
	tl.SupportedVerbs[0] = "changed"
	gotVerbs[0].Inputs = nil
	if r := lib.Validate([]byte(msg(`[["s","H_API",{"c":1}]]`))); r.Code != CodeInvalidParams {
		t.Errorf("caller's Inputs changed the library: %+v", r)
	}
	if r := lib.Validate([]byte(msg(`[["r","RANK",{}]]`))); !r.Valid() {
		t.Errorf("caller's SupportedVerbs changed the library: %+v", r)
	}
	if v2, _ := lib.Verb("generate"); !reflect.DeepEqual(v2, seedVerbs()[6]) {
		t.Errorf("returned Verb changed the library: %+v", v2)
	}
	if tl2, _ := lib.Tool("H_API"); !reflect.DeepEqual(tl2, seedTools()[0]) {
		t.Errorf("returned Tool changed the library: %+v", tl2)
	}

	var nilLib *Library
	if nilLib.Verbs() != nil || nilLib.Tools() != nil {
		t.Error("nil library lists definitions")
	}
	if _, ok := nilLib.Verb("s"); ok {
		t.Error("nil library has a verb")
	}
}

func TestExtend(t *testing.T) {
	lib := seedLibrary(t)
	ext, err := lib.Extend(
		[]Verb{{Name: "check", Inputs: []string{"nationality", "destination"}, Outputs: "visa_required"}},
		[]Tool{{ID: "VISA_QUERY", SupportedVerbs: []string{"check"}}, {ID: "H_API2", SupportedVerbs: []string{"s"}}})
	if err != nil {
		t.Fatal(err)
	}
	step := msg(`[["check","VISA_QUERY",{}],["s","H_API2",{"c":"x"}]]`)
	if r := ext.Validate([]byte(step)); !r.Valid() {
		t.Errorf("extended library: %+v", r)
	}
	if r := lib.Validate([]byte(step)); r.Code != CodeUnknownVerb {
		t.Errorf("original library changed: %+v", r)
	}
	if _, ok := lib.Tool("VISA_QUERY"); ok {
		t.Error("original library has the new tool")
	}
	if len(ext.Verbs()) != len(lib.Verbs())+1 || len(ext.Tools()) != len(lib.Tools())+2 {
		t.Errorf("extended library has %d verbs, %d tools", len(ext.Verbs()), len(ext.Tools()))
	}

	for _, tc := range []struct {
		name  string
		verbs []Verb
		tools []Tool
		want  string
	}{
		{"existing verb", []Verb{{Name: "s"}}, nil, `verb "s": duplicate name`},
		{"existing tool", nil, []Tool{{ID: "H_API"}}, `tool "H_API": duplicate id`},
		{"unknown verb", nil, []Tool{{ID: "T", SupportedVerbs: []string{"check"}}}, `tool "T": unknown verb "check" in supported_verbs`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := lib.Extend(tc.verbs, tc.tools); err == nil || err.Error() != tc.want {
				t.Errorf("Extend = %v, want %q", err, tc.want)
			}
		})
	}

	// A join tool added later makes join tools checked from then on.
	par := `{"parallel":[` + okStep + `,` + okStep + `]}`
	anyJoin := []byte(msg(`[` + par + `,["join","ANYTHING",{}]]`))
	if r := lib.Validate(anyJoin); !r.Valid() {
		t.Errorf("no join tools yet: %+v", r)
	}
	withJoin, err := lib.Extend(nil, []Tool{{ID: "MERGE", SupportedVerbs: []string{"join"}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := withJoin.Validate(anyJoin); r.Code != CodeUnknownTool {
		t.Errorf("with a join tool: %+v, want UNKNOWN_TOOL", r)
	}

	var nilLib *Library
	if ext, err := nilLib.Extend([]Verb{{Name: "v"}}, nil); err != nil || len(ext.Verbs()) != 1 {
		t.Errorf("nil.Extend = %v, %v", ext, err)
	}
}
