package compact

import (
	"reflect"
	"testing"
)

func TestParseSpawnAppendixD(t *testing.T) {
	lib := seedLibrary(t)
	raw := readTestdata(t, "format_examples/appendixD_spawn.json")
	sp, r := lib.ParseSpawn(raw)
	if !r.Valid() {
		t.Fatalf("ParseSpawn = %+v", r)
	}
	const desc = "Checks visa requirements for a citizen traveling to a country"
	want := &Spawn{
		AgentName:   "VISA_AGENT",
		Verb:        "check",
		Tool:        "VISA_QUERY",
		Description: desc,
		Inputs:      []string{"nationality", "destination"},
		Outputs:     []string{"visa_required"},
		NewTools:    []Tool{{ID: "VISA_QUERY", Description: desc, SupportedVerbs: []string{"check"}}},
		NewVerbs:    []Verb{{Name: "check", Description: desc, Inputs: []string{"nationality", "destination"}, Outputs: "visa_required"}},

		MissingCapability: "visa_requirements_check",
	}
	if !reflect.DeepEqual(sp, want) {
		t.Fatalf("ParseSpawn =\n%+v\nwant\n%+v", sp, want)
	}

	// After approval the definitions join the library, and the spawned agent's
	// capability can be planned.
	ext, err := lib.Extend(sp.NewVerbs, sp.NewTools)
	if err != nil {
		t.Fatalf("Extend(spawn) = %v", err)
	}
	if r := ext.Validate([]byte(msg(`[["check","VISA_QUERY",{"nationality":"FR","destination":"JP"}]]`))); !r.Valid() {
		t.Errorf("message for the spawned agent: %+v", r)
	}
	// The same request again now names an existing tool.
	if _, r := ext.ParseSpawn(raw); r.Code != CodeMalformedPlan || r.Path != "plan[0][1]" {
		t.Errorf("second spawn = %+v, want MALFORMED_PLAN at plan[0][1]", r)
	}
}

func TestParseSpawnVariants(t *testing.T) {
	lib := seedLibrary(t)
	cases := []struct {
		name string
		msg  string
		want *Spawn
	}{
		{
			"library verb and tool, no define",
			`{"g":"SPAWN_AGENT","ctx":{"missing_capability":"price_forecast"},"plan":[["instantiate","PRICE_PREDICTOR",{"verb":"predict","tool":"PRC_EST"}]]}`,
			&Spawn{AgentName: "PRICE_PREDICTOR", Verb: "predict", Tool: "PRC_EST", Description: "price_forecast",
				Inputs: []string{"ctx.history", "method:string", "window:integer"}, Outputs: []string{"predictions"}, MissingCapability: "price_forecast"},
		},
		{
			"library verb, new tool, typed inputs, interface, instantiate first",
			`{"g":"SPAWN_AGENT","plan":[["instantiate","A2",{"verb":"s","tool":"H_API_V2"}],["define","H_API_V2",{"description":"v2","interface":"https://x","inputs":["c:string"],"outputs":["results","count"],"extra":1}]]}`,
			&Spawn{AgentName: "A2", Verb: "s", Tool: "H_API_V2", Description: "v2", Inputs: []string{"c:string"}, Outputs: []string{"results", "count"},
				NewTools: []Tool{{ID: "H_API_V2", Description: "v2", Interface: "https://x", SupportedVerbs: []string{"s"}}}},
		},
		{
			"endpoint",
			`{"g":"SPAWN_AGENT","plan":[["define","T",{}],["instantiate","A",{"verb":"v","tool":"T","endpoint":"http://a:9000/m"}]]}`,
			&Spawn{AgentName: "A", Verb: "v", Tool: "T", Endpoint: "http://a:9000/m",
				NewTools: []Tool{{ID: "T", SupportedVerbs: []string{"v"}}}, NewVerbs: []Verb{{Name: "v"}}},
		},
		{
			"new verb, empty define, ordinary steps ignored",
			`{"g":"SPAWN_AGENT","ctx":{"missing_capability":"m"},"plan":[["define","T",{}],["s","H_API",{}],["instantiate","A",{"verb":"v","tool":"T"}]]}`,
			&Spawn{AgentName: "A", Verb: "v", Tool: "T", Description: "m", MissingCapability: "m",
				NewTools: []Tool{{ID: "T", SupportedVerbs: []string{"v"}}}, NewVerbs: []Verb{{Name: "v"}}},
		},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sp, r := lib.ParseSpawn([]byte(tc.msg))
			if !r.Valid() {
				t.Fatalf("ParseSpawn = %+v", r)
			}
			if !reflect.DeepEqual(sp, tc.want) {
				t.Fatalf("ParseSpawn =\n%+v\nwant\n%+v", sp, tc.want)
			}
			if _, err := lib.Extend(sp.NewVerbs, sp.NewTools); err != nil {
				t.Errorf("Extend = %v", err)
			}
		})
	}
}

func TestParseSpawnErrors(t *testing.T) {
	lib := seedLibrary(t)
	inst := `["instantiate","A",{"verb":"v","tool":"T"}]`
	def := `["define","T",{}]`
	cases := []resultCase{
		{"not SPAWN_AGENT", msg(`[` + okStep + `]`), CodeInvalidField, "g", `goal is "FIND_HOTEL", not "SPAWN_AGENT"`},
		{"invalid message", `{"g":"SPAWN_AGENT"}`, CodeMissingField, "plan", ""},
		{"not JSON", `{`, CodeMalformedMessage, "", ""},
		{"invalid step", spawnMsg(`[` + def + `,["instantiate","A",{"verb":"v"}]]`), CodeInvalidParams, "plan[1][2].tool", ""},
		{"no instantiate", spawnMsg(`[` + def + `]`), CodeMalformedPlan, "plan", "needs an instantiate step"},
		{"two instantiates", spawnMsg(`[` + def + `,` + inst + `,["instantiate","B",{"verb":"w","tool":"T"}]]`), CodeMalformedPlan, "plan[2]", "exactly one instantiate step, and plan step 2 is one already"},
		{"orphan define", spawnMsg(`[["define","U",{}],` + def + `,` + inst + `]`), CodeMalformedPlan, "plan[0][1]", `tool "U" is defined but the instantiate step uses "T"`},
		{"missing_capability number", `{"g":"SPAWN_AGENT","ctx":{"missing_capability":1},"plan":[` + def + `,` + inst + `]}`, CodeInvalidField, "ctx.missing_capability", "must be a string"},
		{"endpoint not a string", spawnMsg(`[` + def + `,["instantiate","A",{"verb":"v","tool":"T","endpoint":8080}]]`), CodeInvalidParams, "plan[1][2].endpoint", "endpoint must be a string URL"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sp, r := lib.ParseSpawn([]byte(tc.msg))
			if sp != nil {
				t.Fatalf("ParseSpawn returned %+v with %+v", sp, r)
			}
			checkResult(t, tc, r)
		})
	}
}
