package compact

import (
	"strings"
	"testing"
)

// TestGoalSpellings: the goal is "g" or its long name "goal", never both.
func TestGoalSpellings(t *testing.T) {
	lib := seedLibrary(t)
	plan := `"plan":[` + okStep + `]`
	cases := []resultCase{
		{"g", `{"g":"FIND_HOTEL",` + plan + `}`, "", "", ""},
		{"goal", `{"goal":"FIND_HOTEL",` + plan + `}`, "", "", ""},
		{"goal after plan", `{` + plan + `,"goal":"FIND_HOTEL"}`, "", "", ""},
		{"both", `{"g":"X","goal":"X",` + plan + `}`, CodeMalformedMessage, "goal", `"g" and "goal" are the same field`},
		{"both, goal first", `{"goal":"X",` + plan + `,"g":"Y"}`, CodeMalformedMessage, "g", `"goal" and "g" are the same field`},
		{"both, one empty", `{"g":"X","goal":"",` + plan + `}`, CodeMalformedMessage, "goal", ""},
		{"neither", `{` + plan + `}`, CodeMissingField, "g", `message has no "g" (or "goal")`},
		{"goal number", `{"goal":1,` + plan + `}`, CodeInvalidField, "goal", `"goal" must be a non-empty string of at most 256 bytes, got a number`},
		{"goal empty", `{"goal":"",` + plan + `}`, CodeInvalidField, "goal", ""},
		{"goal too long", `{"goal":"` + strings.Repeat("x", 257) + `",` + plan + `}`, CodeInvalidField, "goal", "got 257 bytes"},
		{"g number still says g", `{"g":1,` + plan + `}`, CodeInvalidField, "g", `"g" must be`},
		{"case variant of goal", `{"g":"X","Goal":"Y",` + plan + `}`, CodeMalformedMessage, "Goal", `differs from the field "goal" only by case`},
		{"GOAL alone", `{"GOAL":"X",` + plan + `}`, CodeMalformedMessage, "GOAL", ""},
		{"goal in ctx is data", `{"g":"X","ctx":{"goal":"Y","g":"Z","GOAL":1},` + plan + `}`, "", "", ""},
		{"subtask goal", msg(`[`+okStep+`]`, `"subtask":{"goal":"Y",`+plan+`}`), "", "", ""},
		{"subtask both", msg(`[`+okStep+`]`, `"subtask":{"goal":"Y","g":"Y",`+plan+`}`), CodeMalformedMessage, "subtask.g", "subtask: "},
		{"spawn by goal", `{"goal":"SPAWN_AGENT","plan":[["define","T",{}],["instantiate","A",{"verb":"v","tool":"T"}]]}`, "", "", ""},
		{"meta verbs need the SPAWN_AGENT goal", `{"goal":"X","plan":[["define","T",{}]]}`, CodeUnknownVerb, "plan[0][0]", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkResult(t, tc, lib.Validate([]byte(tc.msg)))
		})
	}

	// An answer that reports a result may spell the goal either way too.
	if r := lib.ValidateAnswer([]byte(`{"goal":"X","plan":[],"reply_to":"m1","state":"DONE"}`)); !r.Valid() {
		t.Errorf("DONE reply with goal: %+v", r)
	}
}

func TestParseSpawnGoal(t *testing.T) {
	lib := seedLibrary(t)
	sp, r := lib.ParseSpawn([]byte(`{"goal":"SPAWN_AGENT","plan":[["define","T",{}],["instantiate","A",{"verb":"v","tool":"T"}]]}`))
	if !r.Valid() || sp.AgentName != "A" || sp.Verb != "v" {
		t.Fatalf("ParseSpawn(goal) = %+v, %+v", sp, r)
	}
	for _, tc := range []resultCase{
		{"another goal under goal", `{"goal":"FIND_HOTEL","plan":[` + okStep + `]}`, CodeInvalidField, "goal", `goal is "FIND_HOTEL", not "SPAWN_AGENT"`},
		{"another goal under g", `{"g":"FIND_HOTEL","plan":[` + okStep + `]}`, CodeInvalidField, "g", ""},
		{"both", `{"g":"SPAWN_AGENT","goal":"SPAWN_AGENT","plan":[["define","T",{}],["instantiate","A",{"verb":"v","tool":"T"}]]}`, CodeMalformedMessage, "goal", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			sp, r := lib.ParseSpawn([]byte(tc.msg))
			if sp != nil {
				t.Fatalf("ParseSpawn = %+v, want none", sp)
			}
			checkResult(t, tc, r)
		})
	}
}
