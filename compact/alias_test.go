package compact

import (
	"reflect"
	"strings"
	"testing"
)

func TestAliasLibraryErrors(t *testing.T) {
	search := Verb{Name: "search", Aliases: []string{"s"}}
	rank := Verb{Name: "rank"}
	cases := []struct {
		name  string
		verbs []Verb
		tools []Tool
		want  []string // each a line of the joined error, in order
	}{
		{"empty alias", []Verb{{Name: "v", Aliases: []string{""}}}, nil, []string{`verb "v": empty alias`}},
		{"alias join", []Verb{{Name: "v", Aliases: []string{"join"}}}, nil, []string{`verb "v": alias "join" is a reserved verb name`}},
		{"alias define", []Verb{{Name: "v", Aliases: []string{"define"}}}, nil, []string{`verb "v": alias "define" is a reserved verb name`}},
		{"alias instantiate", []Verb{{Name: "v", Aliases: []string{"instantiate"}}}, nil, []string{`verb "v": alias "instantiate" is a reserved`}},
		{"alias is its own name", []Verb{{Name: "v", Aliases: []string{"v"}}}, nil, []string{`verb "v": alias "v" is the name of a verb`}},
		{"alias names a verb defined later", []Verb{{Name: "v", Aliases: []string{"rank"}}, rank}, nil, []string{`verb "v": alias "rank" is the name of a verb`}},
		{"alias listed twice", []Verb{{Name: "v", Aliases: []string{"x", "x"}}}, nil, []string{`verb "v": alias "x" is already an alias of verb "v"`}},
		{"alias of two verbs", []Verb{search, {Name: "scan", Aliases: []string{"s"}}}, nil, []string{`verb "scan": alias "s" is already an alias of verb "search"`}},
		{"tool lists an alias", []Verb{search}, []Tool{{ID: "H_API", SupportedVerbs: []string{"s"}}},
			[]string{`tool "H_API": "s" in supported_verbs is an alias of verb "search": list the verb's name`}},
		{"every clash reported", []Verb{search, {Name: "scan", Aliases: []string{"s", "search", ""}}, rank}, []Tool{{ID: "T", SupportedVerbs: []string{"s"}}},
			[]string{`verb "scan": alias "s" is already an alias of verb "search"`, `verb "scan": alias "search" is the name of a verb`,
				`verb "scan": empty alias`, `tool "T": "s" in supported_verbs is an alias`}},
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

// TestExtendAliases: definitions added later (a spawn) cannot take a name
// or alias the library uses already, and keep the library's aliases.
func TestExtendAliases(t *testing.T) {
	lib := aliasLibrary(t)
	for _, tc := range []struct {
		name  string
		verbs []Verb
		tools []Tool
		want  string
	}{
		{"verb named like an alias", []Verb{{Name: "s"}}, nil, `verb "s": name is already an alias of verb "search"`},
		{"alias named like a verb", []Verb{{Name: "scan", Aliases: []string{"search"}}}, nil, `verb "scan": alias "search" is the name of a verb`},
		{"alias taken", []Verb{{Name: "scan", Aliases: []string{"r"}}}, nil, `verb "scan": alias "r" is already an alias of verb "rank"`},
		{"tool lists an alias", nil, []Tool{{ID: "H_API_V2", SupportedVerbs: []string{"s"}}}, `tool "H_API_V2": "s" in supported_verbs is an alias of verb "search": list the verb's name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := lib.Extend(tc.verbs, tc.tools); err == nil || err.Error() != tc.want {
				t.Errorf("Extend = %v, want %q", err, tc.want)
			}
		})
	}
	ext, err := lib.Extend([]Verb{{Name: "scan", Aliases: []string{"sc"}}}, []Tool{{ID: "H_API_V2", SupportedVerbs: []string{"search", "scan"}}})
	if err != nil {
		t.Fatal(err)
	}
	if r := ext.Validate([]byte(msg(`[["s","H_API_V2",{}],["sc","H_API_V2",{}]]`))); !r.Valid() {
		t.Errorf("aliases after Extend: %+v", r)
	}
	if r := lib.Validate([]byte(msg(`[["sc","H_API",{}]]`))); r.Code != CodeUnknownVerb {
		t.Errorf("Extend changed the original library: %+v", r)
	}
}

func TestValidateAliases(t *testing.T) {
	lib := aliasLibrary(t)
	par := `{"parallel":[["fetch","PRICES",{}],["predict","PRC_EST",{}]]}`
	cases := []resultCase{
		{"alias", msg(`[["s","H_API",{"c":"Paris"}]]`), "", "", ""},
		{"name", msg(`[["search","H_API",{"c":"Paris"}]]`), "", "", ""},
		{"second alias", msg(`[["show","PRES",{"n":1}]]`), "", "", ""},
		{"alias in a parallel branch", msg(`[{"parallel":[["s","H_API",{}],["r","RANK",{}]]}]`), "", "", ""},
		{"alias of join", msg(`[` + par + `,["j","MERGE",{}]]`), "", "", ""},
		{"alias of join still follows a parallel group", msg(`[["s","H_API",{}],["j","MERGE",{}]]`), CodeMalformedPlan, "plan[1][0]", "join must directly follow"},
		{"alias of join checks the join tool", msg(`[` + par + `,["j","PRES",{}]]`), CodeVerbToolMismatch, "plan[1][1]", `does not support verb "join" (written "j")`},
		{"alias typed inputs", msg(`[["p","PRES",{"n":"5"}]]`), CodeInvalidParams, "plan[0][2].n", `param "n" must be an integer`},
		{"alias number input", msg(`[["s","H_API",{"p_max":"150"}]]`), CodeInvalidParams, "plan[0][2].p_max", "must be a number"},
		{"unknown abbreviation", msg(`[["x","H_API",{}]]`), CodeUnknownVerb, "plan[0][0]", `plan step 1: unknown verb "x"`},
		{"aliases are exact", msg(`[["S","H_API",{}]]`), CodeUnknownVerb, "plan[0][0]", `unknown verb "S"`},
		{"alias with an unknown tool", msg(`[["s","JET",{}]]`), CodeUnknownTool, "plan[0][1]", `unknown tool "JET"`},
		{"alias in a subtask", msg(`[["s","H_API",{}]]`, `"subtask":`+msg(`[["r","PRES",{}]]`)), CodeVerbToolMismatch, "subtask.plan[0][1]",
			`subtask: plan step 1: tool "PRES" does not support verb "rank" (written "r")`},
		{"instantiate by alias", spawnMsg(`[["instantiate","A",{"verb":"s","tool":"H_API"}]]`), "", "", ""},
		{"instantiate by alias, mismatch", spawnMsg(`[["instantiate","A",{"verb":"s","tool":"RANK"}]]`), CodeVerbToolMismatch, "plan[0][2].verb",
			`tool "RANK" does not support verb "search" (written "s")`},
		{"instantiate by alias of join", spawnMsg(`[["define","T",{}],["instantiate","A",{"verb":"j","tool":"T"}]]`), CodeInvalidParams, "plan[1][2].verb", `reserved verb "join"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkResult(t, tc, lib.Validate([]byte(tc.msg)))
		})
	}
}

// TestAliasSameErrorAsName: a step that names a verb by an alias is judged
// as the same step naming the verb: same code, same path, and the details
// of the verb's name plus the alias written.
func TestAliasSameErrorAsName(t *testing.T) {
	lib := aliasLibrary(t)
	for _, tc := range []struct {
		name, alias, verb, step string // step: %s stands for the verb
	}{
		{"tool without the verb", "s", "search", `[["%s","RANK",{}]]`},
		{"tool without the verb, later step", "p", "present", `[["s","H_API",{}],["%s","H_API",{}]]`},
		{"parallel branch", "r", "rank", `[{"parallel":[["s","H_API",{}],["%s","PRC_EST",{}]]}]`},
		{"param type", "p", "present", `[["%s","PRES",{"n":1.5}]]`},
		{"unknown tool", "r", "rank", `[["%s","NOPE",{}]]`},
		{"instantiate", "s", "search", `[["instantiate","A",{"verb":"%s","tool":"PRES"}]]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			build := func(v string) []byte {
				plan := strings.Replace(tc.step, "%s", v, 1)
				if strings.Contains(plan, "instantiate") {
					return []byte(spawnMsg(plan))
				}
				return []byte(msg(plan))
			}
			byName, byAlias := lib.Validate(build(tc.verb)), lib.Validate(build(tc.alias))
			if byName.Valid() {
				t.Fatalf("by name: VALID, want an error")
			}
			if byAlias.Code != byName.Code || byAlias.Path != byName.Path {
				t.Fatalf("by alias %+v, by name %+v: want the same code and path", byAlias, byName)
			}
			want := byName.Details
			if strings.Contains(want, `verb "`+tc.verb+`"`) {
				want += ` (written "` + tc.alias + `")`
			}
			if byAlias.Details != want {
				t.Errorf("by alias details %q, want %q", byAlias.Details, want)
			}
		})
	}
}

func TestParseSpawnAlias(t *testing.T) {
	lib := aliasLibrary(t)
	for _, tc := range []struct {
		name string
		msg  string
		want *Spawn
	}{
		{"library tool", spawnMsg(`[["instantiate","A",{"verb":"s","tool":"H_API"}]]`),
			&Spawn{AgentName: "A", Verb: "search", Tool: "H_API", Inputs: []string{"c:string", "p_max:number"}, Outputs: []string{"list"}}},
		{"defined tool", spawnMsg(`[["define","T",{"description":"d"}],["instantiate","A",{"verb":"p","tool":"T"}]]`),
			&Spawn{AgentName: "A", Verb: "present", Tool: "T", Description: "d",
				NewTools: []Tool{{ID: "T", Description: "d", SupportedVerbs: []string{"present"}}}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp, r := lib.ParseSpawn([]byte(tc.msg))
			if !r.Valid() {
				t.Fatalf("ParseSpawn = %+v", r)
			}
			if !reflect.DeepEqual(sp, tc.want) {
				t.Fatalf("ParseSpawn =\n%+v\nwant\n%+v", sp, tc.want)
			}
			ext, err := lib.Extend(sp.NewVerbs, sp.NewTools)
			if err != nil {
				t.Fatalf("Extend(spawn) = %v", err)
			}
			if !ext.tool(sp.Tool).supports(sp.Verb) {
				t.Errorf("after Extend, %s does not support %s", sp.Tool, sp.Verb)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	lib := aliasLibrary(t)
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{"s", "search", true}, {"search", "search", true}, {"show", "present", true}, {"j", "join", true}, {"join", "join", true},
		{"x", "", false}, {"S", "", false}, {"define", "", false}, {"", "", false},
	} {
		if got, ok := lib.Resolve(tc.in); got != tc.want || ok != tc.ok {
			t.Errorf("Resolve(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
	// join needs no definition to be planned, but is not a verb of a library
	// that does not define it.
	if got, ok := seedLibrary(t).Resolve("join"); ok {
		t.Errorf("Resolve(join) without a join verb = %q, true", got)
	}
	var nilLib *Library
	if _, ok := nilLib.Resolve("s"); ok {
		t.Error("nil library resolves a verb")
	}
}

func TestPlanVerbs(t *testing.T) {
	lib := aliasLibrary(t)
	for _, tc := range []struct {
		name string
		msg  string
		want []string
		code string
	}{
		{"aliases give names, once, in order", msg(`[["s","H_API",{}],["r","RANK",{}],["search","H_API",{}],["p","PRES",{}]]`),
			[]string{"search", "rank", "present"}, ""},
		{"parallel branches and join", msg(`[{"parallel":[["fetch","PRICES",{}],["predict","PRC_EST",{}]]},["j","MERGE",{}],["show","PRES",{}]]`),
			[]string{"fetch", "predict", "join", "present"}, ""},
		{"meta verbs as written", spawnMsg(`[["define","T",{}],["instantiate","A",{"verb":"s","tool":"T"}]]`),
			[]string{"define", "instantiate"}, ""},
		{"subtask left out", msg(`[["s","H_API",{}]]`, `"subtask":`+msg(`[["r","RANK",{}]]`)), []string{"search"}, ""},
		{"invalid message", msg(`[["s","RANK",{}]]`), nil, CodeVerbToolMismatch},
		{"not JSON", `{`, nil, CodeMalformedMessage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, r := lib.PlanVerbs([]byte(tc.msg))
			if r.Code != tc.code || (tc.code == "") != r.Valid() {
				t.Fatalf("PlanVerbs result %+v, want code %q", r, tc.code)
			}
			if r != lib.Validate([]byte(tc.msg)) {
				t.Errorf("PlanVerbs result %+v differs from Validate's", r)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("PlanVerbs = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestAliasAccessors: Verbs and Verb report aliases, and their copies do not
// reach the library.
func TestAliasAccessors(t *testing.T) {
	lib := aliasLibrary(t)
	v, ok := lib.Verb("present")
	if !ok || !reflect.DeepEqual(v.Aliases, []string{"p", "show"}) {
		t.Fatalf("Verb(present) = %+v, %v", v, ok)
	}
	if _, ok := lib.Verb("p"); ok {
		t.Error("Verb looks up aliases (Resolve does)")
	}
	v.Aliases[0] = "q"
	for _, lv := range lib.Verbs() {
		if lv.Name == "present" {
			lv.Aliases[1] = "q"
		}
	}
	if got, _ := lib.Verb("present"); !reflect.DeepEqual(got.Aliases, []string{"p", "show"}) {
		t.Errorf("a returned copy changed the library: %q", got.Aliases)
	}
	if r := lib.Validate([]byte(msg(`[["q","PRES",{}]]`))); r.Code != CodeUnknownVerb {
		t.Errorf("a returned copy added an alias: %+v", r)
	}

	// Nor does the caller's slice, after NewLibrary.
	verbs := []Verb{{Name: "search", Aliases: []string{"s"}}}
	own, err := NewLibrary(verbs, []Tool{{ID: "H_API", SupportedVerbs: []string{"search"}}})
	if err != nil {
		t.Fatal(err)
	}
	verbs[0].Aliases[0] = "x"
	if got, _ := own.Verb("search"); got.Aliases[0] != "s" {
		t.Errorf("the caller's slice changed the library: %q", got.Aliases)
	}
}
