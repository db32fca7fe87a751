package compact

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type resultCase struct {
	name    string
	msg     string
	code    string // "" means VALID
	path    string
	details string // substring of Details
}

func checkResult(t *testing.T, tc resultCase, got Result) {
	t.Helper()
	if tc.code == "" {
		if !got.Valid() || got != (Result{Status: StatusValid}) {
			t.Fatalf("got %+v, want VALID", got)
		}
		return
	}
	if got.Status != StatusErr || got.Code != tc.code || got.Path != tc.path {
		t.Fatalf("got %+v, want ERR code %s path %q", got, tc.code, tc.path)
	}
	if !strings.Contains(got.Details, tc.details) {
		t.Fatalf("details %q do not contain %q", got.Details, tc.details)
	}
}

// msg builds a message around a plan, with extra top-level fields.
func msg(plan string, extra ...string) string {
	s := `{"g":"FIND_HOTEL","plan":` + plan
	for _, e := range extra {
		s += "," + e
	}
	return s + "}"
}

func spawnMsg(plan string) string { return `{"g":"SPAWN_AGENT","plan":` + plan + `}` }

const okStep = `["s","H_API",{"c":"Paris"}]`

func nested(depth int) string {
	// depth counts the top-level object: {"g":..,"plan":[okStep],"ctx":{"a":{"a":...}}}
	inner := "1"
	for range depth - 1 {
		inner = `{"a":` + inner + `}`
	}
	return msg(`[`+okStep+`]`, `"ctx":`+inner)
}

func TestValidate(t *testing.T) {
	lib := seedLibrary(t)
	long := strings.Repeat("x", 300)
	cases := []resultCase{
		// The document.
		{"empty", ``, CodeMalformedMessage, "", "no JSON value"},
		{"not JSON", `hello`, CodeMalformedMessage, "", "unexpected character 'h' at byte 0"},
		{"array", `[]`, CodeMalformedMessage, "", "message is an array, not a JSON object"},
		{"string", `"x"`, CodeMalformedMessage, "", "a string, not a JSON object"},
		{"truncated", `{"g":"X","plan":[`, CodeMalformedMessage, "", "unexpected end of input"},
		{"trailing comma", `{"g":"X",}`, CodeMalformedMessage, "", "expected a string key"},
		{"trailing data", msg(`[`+okStep+`]`) + ` {}`, CodeMalformedMessage, "", "data after the JSON value"},
		{"BOM", "\xef\xbb\xbf" + msg(`[`+okStep+`]`), CodeMalformedMessage, "", "at byte 0"},
		{"duplicate top-level key", `{"g":"X","g":"Y","plan":[]}`, CodeMalformedMessage, "", `duplicate key "g" at byte 9`},
		{"duplicate key spelled with an escape", `{"g":"X","\u0067":"Y","plan":[]}`, CodeMalformedMessage, "", `duplicate key "g"`},
		{"duplicate key in params", msg(`[["s","H_API",{"c":"a","c":"b"}]]`), CodeMalformedMessage, "", `duplicate key "c"`},
		{"duplicate key in a large object", msg(`[`+okStep+`]`, `"ctx":{`+manyKeys(40)+`,"k7":1}`), CodeMalformedMessage, "", `duplicate key "k7"`},
		{"duplicate key clipped", `{"` + long + `":1,"` + long + `":2}`, CodeMalformedMessage, "", `"... at byte`},
		{"depth 64", nested(64), "", "", ""},
		{"depth 65", nested(65), CodeMalformedMessage, "", "nesting deeper than 64 levels"},
		{"invalid UTF-8", msg(`[`+okStep+`]`, "\"ctx\":{\"a\":\"\xff\"}"), CodeMalformedMessage, "", "invalid UTF-8"},
		{"UTF-8 surrogate bytes", msg(`[`+okStep+`]`, "\"ctx\":{\"a\":\"\xed\xa0\x80\"}"), CodeMalformedMessage, "", "invalid UTF-8"},
		{"lone high surrogate", msg(`[`+okStep+`]`, `"ctx":{"a":"\ud800"}`), CodeMalformedMessage, "", "unpaired surrogate"},
		{"lone low surrogate", msg(`[`+okStep+`]`, `"ctx":{"a":"\udc00x"}`), CodeMalformedMessage, "", "unpaired surrogate"},
		{"surrogate pair", msg(`[`+okStep+`]`, `"ctx":{"a":"\ud83d\ude00 \u00e9"}`), "", "", ""},
		{"control character", msg(`[`+okStep+`]`, "\"ctx\":{\"a\":\"\x01\"}"), CodeMalformedMessage, "", "control character"},
		{"bad escape", msg(`[`+okStep+`]`, `"ctx":{"a":"\x"}`), CodeMalformedMessage, "", "invalid escape"},
		{"leading zero", msg(`[`+okStep+`]`, `"ctx":{"a":01}`), CodeMalformedMessage, "", "invalid number: leading zero at byte 67"},

		// Required fields.
		{"no g", `{"plan":[` + okStep + `]}`, CodeMissingField, "g", `message has no "g"`},
		{"no plan", `{"g":"X"}`, CodeMissingField, "plan", `message has no "plan"`},
		{"g number", `{"g":1,"plan":[]}`, CodeInvalidField, "g", "got a number"},
		{"g empty", `{"g":"","plan":[]}`, CodeInvalidField, "g", "non-empty string"},
		{"g too long", `{"g":"` + long + `","plan":[]}`, CodeInvalidField, "g", "got 300 bytes"},
		{"status in a message", msg(`[`+okStep+`]`, `"status":"ERR"`), CodeInvalidField, "status", "only allowed in an ERR object"},

		// Optional fields.
		{"msg_id ok", msg(`[`+okStep+`]`, `"msg_id":"a.b_c:d-9"`, `"reply_to":"x"`), "", "", ""},
		{"msg_id space", msg(`[`+okStep+`]`, `"msg_id":"a b"`), CodeInvalidField, "msg_id", `"msg_id" must be 1-128 characters`},
		{"msg_id empty", msg(`[`+okStep+`]`, `"msg_id":""`), CodeInvalidField, "msg_id", `got the string ""`},
		{"msg_id too long", msg(`[`+okStep+`]`, `"msg_id":"`+strings.Repeat("a", 129)+`"`), CodeInvalidField, "msg_id", "..."},
		{"reply_to number", msg(`[`+okStep+`]`, `"reply_to":7`), CodeInvalidField, "reply_to", "got a number"},
		{"state", msg(`[`+okStep+`]`, `"state":"DONEE"`), CodeInvalidField, "state", `got the string "DONEE"`},
		{"state lower case", msg(`[`+okStep+`]`, `"state":"done"`), CodeInvalidField, "state", "PENDING, IN_PROGRESS, DONE, FAILED"},
		{"proto_ver ok", msg(`[`+okStep+`]`, `"proto_ver":"1.2.3"`), "", "", ""},
		{"proto_ver v", msg(`[`+okStep+`]`, `"proto_ver":"v1"`), CodeInvalidField, "proto_ver", "digits and dots"},
		{"proto_ver empty part", msg(`[`+okStep+`]`, `"proto_ver":"1..2"`), CodeInvalidField, "proto_ver", ""},
		{"proto_ver number", msg(`[`+okStep+`]`, `"proto_ver":0.1`), CodeInvalidField, "proto_ver", "got a number"},
		{"out_fmt", msg(`[`+okStep+`]`, `"out_fmt":"html"`), CodeInvalidField, "out_fmt", "human, raw, summary"},
		{"ctx array", msg(`[`+okStep+`]`, `"ctx":[]`), CodeInvalidField, "ctx", "got an array"},
		{"test_mode string", msg(`[`+okStep+`]`, `"test_mode":"yes"`), CodeInvalidField, "test_mode", "must be a boolean"},
		{"test_mode ok", msg(`[`+okStep+`]`, `"test_mode":false`), "", "", ""},
		{"unknown keys allowed", msg(`[`+okStep+`]`, `"bdg":150`, `"result":null`), "", "", ""},
		{"fields before plan", `{"g":"X","plan":{},"state":1}`, CodeInvalidField, "state", ""},

		// Subtask.
		{"subtask ok", msg(`[`+okStep+`]`, `"subtask":`+msg(`[["p","PRES",{"n":1}]]`)), "", "", ""},
		{"subtask string", msg(`[`+okStep+`]`, `"subtask":"x"`), CodeInvalidField, "subtask", "must be a message object"},
		{"subtask no plan", msg(`[`+okStep+`]`, `"subtask":{"g":"Y"}`), CodeMissingField, "subtask.plan", `subtask: message has no "plan"`},
		{"subtask status", msg(`[`+okStep+`]`, `"subtask":{"g":"Y","plan":[`+okStep+`],"status":"ERR"}`), CodeInvalidField, "subtask.status", ""},
		{"subtask of subtask", msg(`[`+okStep+`]`, `"subtask":`+msg(`[`+okStep+`]`, `"subtask":`+msg(`[["s","RANK",{}]]`))),
			CodeVerbToolMismatch, "subtask.subtask.plan[0][1]", "subtask.subtask: plan step 1: tool \"RANK\" does not support verb \"s\""},
		{"outer plan first", msg(`[["zz","H_API",{}]]`, `"subtask":{"g":"Y"}`), CodeUnknownVerb, "plan[0][0]", ""},

		// Plan shape.
		{"plan object", msg(`{}`), CodeMalformedPlan, "plan", "must be an array of steps, got an object"},
		{"plan string", msg(`"s H_API"`), CodeMalformedPlan, "plan", "got the string"},
		{"plan empty", msg(`[]`), CodeReqClarify, "plan", "plan has no steps"},
		{"step string", msg(`[` + okStep + `,"p"]`), CodeMalformedPlan, "plan[1]", `plan step 2: got the string "p"`},
		{"step null", msg(`[null]`), CodeMalformedPlan, "plan[0]", "got null"},
		{"step empty", msg(`[[]]`), CodeMalformedPlan, "plan[0]", "plan step 1: empty step"},
		{"step 1 element", msg(`[["s"]]`), CodeMalformedPlan, "plan[0][1]", "plan step 1: missing tool and parameters"},
		{"step 2 elements (seed section 8)", msg(`[` + okStep + `,["r","RANK"]]`), CodeMalformedPlan, "plan[1][2]", "plan step 2: missing parameters (want [verb, tool, params])"},
		{"step 4 elements", msg(`[["s","H_API",{},{}]]`), CodeMalformedPlan, "plan[0][3]", "plan step 1: 4 elements"},
		{"verb number", msg(`[[1,"H_API",{}]]`), CodeMalformedPlan, "plan[0][0]", "verb must be a non-empty string, got a number"},
		{"verb empty", msg(`[["","H_API",{}]]`), CodeMalformedPlan, "plan[0][0]", "verb must be a non-empty string"},
		{"tool null", msg(`[["s",null,{}]]`), CodeMalformedPlan, "plan[0][1]", "tool must be a non-empty string, got null"},
		{"shape before params", msg(`[["s",2,"x"]]`), CodeMalformedPlan, "plan[0][1]", ""},
		{"params array", msg(`[["s","H_API",[]]]`), CodeInvalidParams, "plan[0][2]", "params must be an object, got an array"},
		{"params string", msg(`[["s","H_API","c=Paris"]]`), CodeInvalidParams, "plan[0][2]", "got the string"},

		// Parallel groups and join.
		{"parallel + join", msg(`[{"parallel":[["fetch","PRICE_HIST",{}],["predict","PRC_EST",{}]]},["join","ANYTHING",{}]]`), "", "", ""},
		{"parallel without join", msg(`[{"parallel":[["fetch","PRICE_HIST",{}],["predict","PRC_EST",{}]]},` + okStep + `]`), "", "", ""},
		{"parallel extra key", msg(`[{"parallel":[` + okStep + `,` + okStep + `],"x":1}]`), CodeMalformedPlan, "plan[0]", "with no other keys"},
		{"object step without parallel", msg(`[{"s":"H_API"}]`), CodeMalformedPlan, "plan[0]", `must be {"parallel"`},
		{"parallel not array", msg(`[{"parallel":{}}]`), CodeMalformedPlan, "plan[0].parallel", `"parallel" must be an array of steps`},
		{"parallel of one", msg(`[{"parallel":[` + okStep + `]}]`), CodeMalformedPlan, "plan[0].parallel", "at least 2 steps, got 1"},
		{"parallel nested", msg(`[{"parallel":[` + okStep + `,{"parallel":[` + okStep + `,` + okStep + `]}]}]`), CodeMalformedPlan, "plan[0].parallel[1]", "plan step 1, parallel branch 2: parallel groups cannot be nested"},
		{"parallel branch string", msg(`[{"parallel":[` + okStep + `,"x"]}]`), CodeMalformedPlan, "plan[0].parallel[1]", "want [verb, tool, params]"},
		{"parallel branch short", msg(`[` + okStep + `,{"parallel":[` + okStep + `,["s","H_API"]]}]`), CodeMalformedPlan, "plan[1].parallel[1][2]", "plan step 2, parallel branch 2: missing parameters"},
		{"parallel branch unknown verb", msg(`[{"parallel":[` + okStep + `,["zz","H_API",{}]]}]`), CodeUnknownVerb, "plan[0].parallel[1][0]", ""},
		{"parallel branch param type", msg(`[{"parallel":[` + okStep + `,["predict","PRC_EST",{"window":"30"}]]}]`), CodeInvalidParams, "plan[0].parallel[1][2].window", `param "window" must be an integer, got the string "30"`},
		{"join first", msg(`[["join","MERGE",{}]]`), CodeMalformedPlan, "plan[0][0]", "join must directly follow a parallel group"},
		{"join after a plain step", msg(`[` + okStep + `,["join","MERGE",{}]]`), CodeMalformedPlan, "plan[1][0]", "plan step 2: join must directly follow"},
		{"join twice", msg(`[{"parallel":[` + okStep + `,` + okStep + `]},["join","M",{}],["join","M",{}]]`), CodeMalformedPlan, "plan[2][0]", ""},
		{"join inside parallel", msg(`[{"parallel":[` + okStep + `,["join","M",{}]]}]`), CodeMalformedPlan, "plan[0].parallel[1][0]", ""},
		{"join params not object", msg(`[{"parallel":[` + okStep + `,` + okStep + `]},["join","M",[]]]`), CodeInvalidParams, "plan[1][2]", ""},

		// Verbs, tools and pairs.
		{"unknown verb", msg(`[["fly","H_API",{}]]`), CodeUnknownVerb, "plan[0][0]", `plan step 1: unknown verb "fly"`},
		{"unknown verb before unknown tool", msg(`[["fly","JET",{}]]`), CodeUnknownVerb, "plan[0][0]", ""},
		{"unknown tool", msg(`[["s","JET",{}]]`), CodeUnknownTool, "plan[0][1]", `unknown tool "JET"`},
		{"unknown tool before param types", msg(`[["p","JET",{"n":"x"}]]`), CodeUnknownTool, "plan[0][1]", ""},
		{"mismatch", msg(`[` + okStep + `,["s","RANK",{}]]`), CodeVerbToolMismatch, "plan[1][1]", `plan step 2: tool "RANK" does not support verb "s"`},
		{"mismatch before param types", msg(`[["s","RANK",{"c":1}]]`), CodeVerbToolMismatch, "plan[0][1]", ""},
		{"unknown verb clipped", msg(`[["` + long + `","H_API",{}]]`), CodeUnknownVerb, "plan[0][0]", `xxx"...`},
		{"define outside SPAWN_AGENT", msg(`[["define","T",{}]]`), CodeUnknownVerb, "plan[0][0]", `"define" is only allowed in a SPAWN_AGENT message`},
		{"instantiate outside SPAWN_AGENT", msg(`[["instantiate","A",{"verb":"s","tool":"H_API"}]]`), CodeUnknownVerb, "plan[0][0]", ""},
		{"first fault wins", msg(`[["s","JET",{}],["fly","H_API",{}]]`), CodeUnknownTool, "plan[0][1]", ""},

		// Parameter types.
		{"param integer as string", msg(`[` + okStep + `,["r","RANK",{}],["p","PRES",{"n":"5"}]]`), CodeInvalidParams, "plan[2][2].n", `plan step 3: param "n" must be an integer, got the string "5"`},
		{"param integer fraction", msg(`[["p","PRES",{"n":5.5}]]`), CodeInvalidParams, "plan[0][2].n", "got a number"},
		{"param integer 5.0 and 1e2", msg(`[["p","PRES",{"n":5.0}],["p","PRES",{"n":1e2}]]`), "", "", ""},
		{"param number as string", msg(`[["s","H_API",{"p_max":"150"}]]`), CodeInvalidParams, "plan[0][2].p_max", "must be a number"},
		{"param string as number", msg(`[["s","H_API",{"c":1}]]`), CodeInvalidParams, "plan[0][2].c", "must be a string, got a number"},
		{"param array as string", msg(`[["r","RANK",{"c":"p"}]]`), CodeInvalidParams, "plan[0][2].c", "must be an array"},
		{"param boolean", msg(`[["flag","OPTS",{"on":"true"}]]`), CodeInvalidParams, "plan[0][2].on", "must be a boolean"},
		{"param object", msg(`[["flag","OPTS",{"on":true,"opts":[]}]]`), CodeInvalidParams, "plan[0][2].opts", "must be an object"},
		{"param null is not a string", msg(`[["s","H_API",{"c":null}]]`), CodeInvalidParams, "plan[0][2].c", "got null"},
		{"param any and untyped", msg(`[["flag","OPTS",{"x":[1],"on":false,"opts":{}}],["search","H_API",{"c":5}]]`), "", "", ""},
		{"undeclared params allowed", msg(`[["s","H_API",{"loc":"Paris","bdg":150}]]`), "", "", ""},

		// SPAWN_AGENT.
		{"spawn define after instantiate", spawnMsg(`[["instantiate","A",{"verb":"check","tool":"T"}],["define","T",{}]]`), "", "", ""},
		{"spawn with library tool", spawnMsg(`[["instantiate","A",{"verb":"predict","tool":"PRC_EST"}]]`), "", "", ""},
		{"spawn define in parallel", spawnMsg(`[{"parallel":[["define","T",{}],` + okStep + `]}]`), CodeMalformedPlan, "plan[0].parallel[0][0]", "a define step cannot run in a parallel group"},
		{"spawn define existing tool", spawnMsg(`[["define","H_API",{}]]`), CodeMalformedPlan, "plan[0][1]", `define names tool "H_API", which already exists`},
		{"spawn define twice", spawnMsg(`[["define","T",{}],["define","T",{}]]`), CodeMalformedPlan, "plan[1][1]", `tool "T" is already defined in plan step 1`},
		{"spawn define description", spawnMsg(`[["define","T",{"description":1}]]`), CodeInvalidParams, "plan[0][2].description", ""},
		{"spawn define inputs type", spawnMsg(`[["define","T",{"inputs":["a","b:date"]}]]`), CodeInvalidParams, "plan[0][2].inputs[1]", `input "b:date" is not`},
		{"spawn define inputs duplicate", spawnMsg(`[["define","T",{"inputs":["a","a:string"]}]]`), CodeInvalidParams, "plan[0][2].inputs[1]", ""},
		{"spawn define inputs not array", spawnMsg(`[["define","T",{"inputs":"a"}]]`), CodeInvalidParams, "plan[0][2].inputs", "must be an array of strings"},
		{"spawn define outputs", spawnMsg(`[["define","T",{"outputs":["ok",3]}]]`), CodeInvalidParams, "plan[0][2].outputs[1]", ""},
		{"spawn instantiate no verb", spawnMsg(`[["instantiate","A",{"tool":"H_API"}]]`), CodeInvalidParams, "plan[0][2].verb", `instantiate needs "verb", a non-empty string, got nothing`},
		{"spawn instantiate tool number", spawnMsg(`[["instantiate","A",{"verb":"s","tool":1}]]`), CodeInvalidParams, "plan[0][2].tool", ""},
		{"spawn instantiate reserved verb", spawnMsg(`[["define","T",{}],["instantiate","A",{"verb":"define","tool":"T"}]]`), CodeInvalidParams, "plan[1][2].verb", "reserved verb"},
		{"spawn instantiate unknown tool", spawnMsg(`[["instantiate","A",{"verb":"s","tool":"JET"}]]`), CodeUnknownTool, "plan[0][2].tool", "neither in the library nor defined"},
		{"spawn instantiate new verb on library tool", spawnMsg(`[["instantiate","A",{"verb":"check","tool":"H_API"}]]`), CodeVerbToolMismatch, "plan[0][2].verb", ""},
		{"spawn instantiate mismatch", spawnMsg(`[["instantiate","A",{"verb":"p","tool":"H_API"}]]`), CodeVerbToolMismatch, "plan[0][2].verb", ""},
		{"spawn ordinary steps checked", spawnMsg(`[["instantiate","A",{"verb":"s","tool":"H_API"}],["s","RANK",{}]]`), CodeVerbToolMismatch, "plan[1][1]", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkResult(t, tc, lib.Validate([]byte(tc.msg)))
		})
	}
}

func manyKeys(n int) string {
	var b strings.Builder
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k` + itoa(i) + `":1`)
	}
	return b.String()
}

func itoa(i int) string { return jsonNumber(i) }

func jsonNumber(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

// TestValidateJoinTools: once a tool supports join, join steps must name one.
func TestValidateJoinTools(t *testing.T) {
	lib := joinLibrary(t)
	par := `{"parallel":[` + okStep + `,` + okStep + `]}`
	cases := []resultCase{
		{"join tool", msg(`[` + par + `,["join","MERGE",{"how":"concat"}]]`), "", "", ""},
		{"unknown join tool", msg(`[` + par + `,["join","ANYTHING",{}]]`), CodeUnknownTool, "plan[1][1]", `unknown tool "ANYTHING"`},
		{"join mismatch", msg(`[` + par + `,["join","CONCAT",{}]]`), CodeVerbToolMismatch, "plan[1][1]", `does not support verb "join"`},
		{"join param types from a join verb", msg(`[` + par + `,["join","MERGE",{"how":1}]]`), CodeInvalidParams, "plan[1][2].how", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkResult(t, tc, lib.Validate([]byte(tc.msg)))
		})
	}
}

func TestValidateAnswer(t *testing.T) {
	lib := seedLibrary(t)
	cases := []resultCase{
		{"ERR object", `{"status":"ERR","code":"UNKNOWN_TOOL"}`, "", "", ""},
		{"ERR object with ids, details, path", `{"status":"ERR","code":"X","details":"d","path":"plan[0]","msg_id":"m1","reply_to":"m0"}`, "", "", ""},
		{"ERR without code", `{"status":"ERR","details":"d"}`, CodeInvalidField, "code", `needs "code", a non-empty string, got nothing`},
		{"ERR empty code", `{"status":"ERR","code":""}`, CodeInvalidField, "code", ""},
		{"ERR code number", `{"status":"ERR","code":3}`, CodeInvalidField, "code", "got a number"},
		{"ERR details number", `{"status":"ERR","code":"X","details":1}`, CodeInvalidField, "details", ""},
		{"ERR path number", `{"status":"ERR","code":"X","path":1}`, CodeInvalidField, "path", ""},
		{"ERR bad msg_id", `{"status":"ERR","code":"X","msg_id":"a b"}`, CodeInvalidField, "msg_id", ""},
		{"ERR unexpected key", `{"status":"ERR","code":"X","plan":[]}`, CodeInvalidField, "plan", `unexpected key "plan"`},
		{"ERR unexpected key clipped", `{"status":"ERR","code":"X","` + strings.Repeat("k", 100) + `":1}`, CodeInvalidField, strings.Repeat("k", 64), `"...`},
		{"status VALID", `{"status":"VALID"}`, CodeInvalidField, "status", `got the string "VALID"`},
		{"status err lower case", `{"status":"err","code":"X"}`, CodeInvalidField, "status", ""},
		{"status before message fields", `{"status":"done","g":"X","plan":[]}`, CodeInvalidField, "status", ""},
		{"message", msg(`[` + okStep + `]`), "", "", ""},
		{"message fault", msg(`[["s","RANK",{}]]`), CodeVerbToolMismatch, "plan[0][1]", ""},
		{"DONE reply, empty plan", msg(`[]`, `"reply_to":"m1"`, `"state":"DONE"`, `"result":{"n":1}`), "", "", ""},
		{"FAILED reply, empty plan", msg(`[]`, `"reply_to":"m1"`, `"state":"FAILED"`), "", "", ""},
		{"reply without state", msg(`[]`, `"reply_to":"m1"`), CodeReqClarify, "plan", ""},
		{"PENDING reply", msg(`[]`, `"reply_to":"m1"`, `"state":"PENDING"`), CodeReqClarify, "plan", ""},
		{"DONE without reply_to", msg(`[]`, `"state":"DONE"`), CodeReqClarify, "plan", ""},
		{"DONE reply still needs plan", `{"g":"X","reply_to":"m1","state":"DONE"}`, CodeMissingField, "plan", ""},
		{"DONE reply bad reply_to", msg(`[]`, `"reply_to":"a b"`, `"state":"DONE"`), CodeInvalidField, "reply_to", ""},
		{"subtask keeps message rules", msg(`[]`, `"reply_to":"m1"`, `"state":"DONE"`, `"subtask":`+msg(`[]`, `"reply_to":"m1"`, `"state":"DONE"`)), CodeReqClarify, "subtask.plan", ""},
		{"not JSON", `sure! here is the message`, CodeMalformedMessage, "", ""},
		{"code fence", "```json\n{}\n```", CodeMalformedMessage, "", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			checkResult(t, tc, lib.ValidateAnswer([]byte(tc.msg)))
		})
	}
}

// TestSeedExamples: compact SACP's own example messages are valid, its ERR
// object is a valid answer but not a message.
// Both with "s", "r" and "p" as verbs of their own (seedLibrary) and as
// aliases (aliasLibrary, config/registry.yaml's way).
func TestSeedExamples(t *testing.T) {
	lib := seedLibrary(t)
	for _, name := range append(testdataFiles(t, "format_examples"), filepath.Join("testdata", "bench_20_steps.json")) {
		raw, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for libName, l := range map[string]*Library{"seed": lib, "alias": aliasLibrary(t)} {
			if r := l.Validate(raw); !r.Valid() {
				t.Errorf("%s, %s library: Validate = %+v, want VALID", name, libName, r)
			}
			if r := l.ValidateAnswer(raw); !r.Valid() {
				t.Errorf("%s, %s library: ValidateAnswer = %+v, want VALID", name, libName, r)
			}
		}
	}
	for _, name := range testdataFiles(t, "answers") {
		raw, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		if r := lib.ValidateAnswer(raw); !r.Valid() {
			t.Errorf("%s: ValidateAnswer = %+v, want VALID", name, r)
		}
	}
	errObj := readTestdata(t, "answers/section8_err.json")
	if r := lib.Validate(errObj); r.Code != CodeInvalidField || r.Path != "status" {
		t.Errorf("Validate(the protocol's example ERR object) = %+v, want INVALID_FIELD at status", r)
	}
	if !IsErrObject(errObj) {
		t.Error("IsErrObject(the protocol's example ERR object) = false")
	}
}

// TestValidateNilLibrary: a nil library knows nothing but still validates.
func TestValidateNilLibrary(t *testing.T) {
	var lib *Library
	checkResult(t, resultCase{code: CodeUnknownVerb, path: "plan[0][0]"}, lib.Validate([]byte(msg(`[`+okStep+`]`))))
	checkResult(t, resultCase{code: CodeReqClarify, path: "plan"}, lib.Validate([]byte(msg(`[]`))))
	par := `{"parallel":[["a","b",{}],["c","d",{}]]}`
	checkResult(t, resultCase{code: CodeUnknownVerb, path: "plan[0].parallel[0][0]"}, lib.Validate([]byte(msg(`[`+par+`]`))))
}

func TestResultJSON(t *testing.T) {
	for _, tc := range []struct {
		r    Result
		want string
	}{
		{Result{Status: StatusValid}, `{"status":"VALID"}`},
		{Result{Status: StatusErr, Code: CodeMalformedPlan, Details: "d", Path: "plan[1][2]"}, `{"status":"ERR","code":"MALFORMED_PLAN","details":"d","path":"plan[1][2]"}`},
		{Result{Status: StatusErr, Code: CodeMalformedMessage, Details: "d"}, `{"status":"ERR","code":"MALFORMED_MESSAGE","details":"d"}`},
	} {
		b, err := json.Marshal(tc.r)
		if err != nil || string(b) != tc.want {
			t.Errorf("Marshal(%+v) = %s, %v; want %s", tc.r, b, err, tc.want)
		}
	}
}

// TestDetailsNeverEchoMuch: whatever the input, Details and Path repeat at
// most maxEcho bytes of any one input value.
func TestDetailsNeverEchoMuch(t *testing.T) {
	lib := seedLibrary(t)
	big := strings.Repeat("é", 500) // 2 bytes per rune: clipping must respect rune boundaries
	for _, m := range []string{
		`{"g":"` + big + `","plan":[]}`,
		msg(`[`+okStep+`]`, `"msg_id":"`+big+`"`),
		msg(`[`+okStep+`]`, `"state":"`+big+`"`),
		msg(`[["` + big + `","H_API",{}]]`),
		msg(`[["s","` + big + `",{}]]`),
		msg(`[["s","H_API",{"c":"a","c":"` + big + `"}]]`),
		msg(`[["p","PRES",{"n":"` + big + `"}]]`),
		`{"` + big + `":1,"` + big + `":1}`,
		spawnMsg(`[["instantiate","A",{"verb":"s","tool":"` + big + `"}]]`),
		spawnMsg(`[["define","T",{"inputs":["` + big + `:x"]}]]`),
	} {
		r := lib.ValidateAnswer([]byte(m))
		if r.Valid() {
			t.Fatalf("%.80s: VALID", m)
		}
		if strings.Contains(r.Details, strings.Repeat("é", 33)) || strings.Contains(r.Path, strings.Repeat("é", 33)) {
			t.Errorf("%.80s: echoes more than %d bytes: %+v", m, maxEcho, r)
		}
		if strings.Contains(r.Details, "é") && !strings.Contains(r.Details, strings.Repeat("é", 32)+`"...`) {
			t.Errorf("%.80s: details do not show the clipped value: %q", m, r.Details)
		}
	}
}

func TestOutFormat(t *testing.T) {
	for _, tc := range []struct{ msg, want string }{
		{msg(`[]`, `"out_fmt":"human"`), "human"},
		{msg(`[]`, `"out_fmt":"summary"`), "summary"},
		{msg(`[]`, `"out_fmt":"raw"`), "raw"},
		{msg(`[]`), "raw"},
		{msg(`[]`, `"out_fmt":"HUMAN"`), "raw"},
		{msg(`[]`, `"out_fmt":1`), "raw"},
		{`{"out_fmt":"human","out_fmt":"raw"}`, "raw"},
		{`{"ctx":{"out_fmt":"human"}}`, "raw"},
		{`not json`, "raw"},
		{`["out_fmt","human"]`, "raw"},
	} {
		if got := OutFormat([]byte(tc.msg)); got != tc.want {
			t.Errorf("OutFormat(%s) = %q, want %q", tc.msg, got, tc.want)
		}
	}
}

func TestIsErrObject(t *testing.T) {
	for _, tc := range []struct {
		msg  string
		want bool
	}{
		{`{"status":"ERR","code":"X","details":"y"}`, true},
		{` {"reply_to":"m1","status":"ERR","code":"X"} `, true},
		{`{"status":"ERR"}`, false},
		{`{"status":"ERR","code":"X","extra":1}`, false},
		{`{"status":"ERR","code":"X","code":"Y"}`, false},
		{`{"status":"VALID"}`, false},
		{msg(`[` + okStep + `]`), false},
		{`[{"status":"ERR","code":"X"}]`, false},
		{``, false},
	} {
		if got := IsErrObject([]byte(tc.msg)); got != tc.want {
			t.Errorf("IsErrObject(%s) = %v, want %v", tc.msg, got, tc.want)
		}
	}
}

func TestIsIntegral(t *testing.T) {
	for _, tc := range []struct {
		lit  string
		want bool
	}{
		{"0", true}, {"-0", true}, {"5", true}, {"-12", true}, {"5.0", true}, {"5.000", true},
		{"5.5", false}, {"0.1", false}, {"1e2", true}, {"1E+2", true}, {"1.5e1", true},
		{"1.55e1", false}, {"150e-1", true}, {"15e-1", false}, {"100e-2", true}, {"100e-3", false},
		{"0.0e-5", true}, {"1e-400", false}, {"1e400", true}, {"1e-99999999999", false}, {"1e99999999999", true},
		{"12.34e2", true}, {"12.345e2", false},
	} {
		if got := isIntegral(tc.lit); got != tc.want {
			t.Errorf("isIntegral(%s) = %v, want %v", tc.lit, got, tc.want)
		}
	}
}

func TestParseStrings(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`"plain"`, "plain"},
		{`"a\"b\\c\/d\b\f\n\r\t"`, "a\"b\\c/d\b\f\n\r\t"},
		{`"\u00e9\u00E9é"`, "ééé"},
		{`"\ud83d\ude00"`, "😀"},
		{`"\u0000"`, "\x00"},
		{`"x\u2028y"`, "x\u2028y"},
	} {
		v, err := parse([]byte(tc.in))
		if err != nil || v.kind != kindString || v.str != tc.want {
			t.Errorf("parse(%s) = %q, %v; want %q", tc.in, v.str, err, tc.want)
		}
		var std string
		if err := json.Unmarshal([]byte(tc.in), &std); err != nil || std != tc.want {
			t.Errorf("encoding/json reads %s as %q, %v", tc.in, std, err)
		}
	}
}

func TestMalformedDetails(t *testing.T) {
	lib := seedLibrary(t)
	for _, tc := range []struct{ in, want string }{
		{`hello`, "message is not valid JSON: unexpected character 'h' at byte 0"},
		{"\xc3\xa9", "message is not valid JSON: unexpected byte 0xc3 at byte 0"},
		{`{"g":1,"g":2}`, `message is refused: duplicate key "g" at byte 7`},
		{`{"a":"\ud800x"}`, "message is refused: unpaired surrogate escape in a string at byte 6"},
		{`{"a":"\ud800\u12"}`, "message is not valid JSON: invalid \\u escape in a string at byte 12"},
		{"{\"a\":\"\xff\"}", "message is refused: invalid UTF-8 in a string at byte 6"},
		{`{"a":`, "message is not valid JSON: unexpected end of input at byte 5"},
	} {
		if r := lib.Validate([]byte(tc.in)); r.Code != CodeMalformedMessage || r.Details != tc.want || r.Path != "" {
			t.Errorf("Validate(%q) = %+v, want details %q", tc.in, r, tc.want)
		}
	}
}

// TestConcurrentUse: a Library is shared by all requests (run with -race).
func TestConcurrentUse(t *testing.T) {
	lib := seedLibrary(t)
	raw := readTestdata(t, "bench_20_steps.json")
	spawn := readTestdata(t, "format_examples/appendixD_spawn.json")
	done := make(chan struct{})
	for range 4 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 50 {
				if r := lib.Validate(raw); !r.Valid() {
					t.Errorf("Validate = %+v", r)
				}
				if sp, _ := lib.ParseSpawn(spawn); sp == nil {
					t.Error("ParseSpawn failed")
				} else if _, err := lib.Extend(sp.NewVerbs, sp.NewTools); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	for range 4 {
		<-done
	}
}

// A pair cut short by the end of the input is a truncated document, not a
// bad escape nor a refused surrogate: it is reported where the input ends.
func TestTruncatedSurrogatePair(t *testing.T) {
	r := seedLibrary(t).Validate([]byte(`{"a":"\ud800\u1`))
	if r.Details != "message is not valid JSON: unexpected end of input at byte 15" {
		t.Errorf("got %+v", r)
	}
}
