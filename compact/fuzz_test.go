package compact

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"
)

// addSeeds adds every fixture and a few hand-written edge cases.
func addSeeds(f *testing.F) {
	for _, dir := range []string{"format_examples", "answers"} {
		names, _ := filepath.Glob(filepath.Join("testdata", dir, "*.json"))
		for _, n := range names {
			b, err := os.ReadFile(n)
			if err != nil {
				f.Fatal(err)
			}
			f.Add(b)
		}
	}
	for _, s := range []string{
		``, `{}`, `[]`, `null`, `{"g":"X","plan":[]}`,
		msg(`[` + okStep + `]`),
		msg(`[{"parallel":[`+okStep+`,`+okStep+`]},["join","M",{}]]`, `"subtask":`+msg(`[["p","PRES",{"n":1e2}]]`)),
		spawnMsg(`[["define","T",{"inputs":["a:string"],"outputs":["o"]}],["instantiate","A",{"verb":"v","tool":"T"}]]`),
		`{"g":"X","\u0067":"Y"}`, `{"a":"\ud800"}`, "{\"a\":\"\xff\"}", `{"status":"ERR","code":"C"}`,
		msg(`[]`, `"reply_to":"m","state":"DONE"`),
		// Both spellings of the goal, aliases (of aliasLibrary), and a
		// spawn by alias.
		`{"goal":"X","plan":[["s","H_API",{"c":"a"}]]}`, `{"g":"X","goal":"X","plan":[]}`, `{"goal":"X","GOAL":"Y","plan":[]}`,
		msg(`[["p","PRES",{"n":1}],{"parallel":[["s","H_API",{}],["r","RANK",{}]]},["j","MERGE",{}]]`, `"subtask":{"goal":"Y","plan":[["show","PRES",{}]]}`),
		spawnMsg(`[["define","T",{}],["instantiate","A",{"verb":"s","tool":"T"}]]`),
		`{"goal":"SPAWN_AGENT","plan":[["instantiate","A",{"verb":"p","tool":"PRES"}]]}`,
	} {
		f.Add([]byte(s))
	}
}

var surrogateEscape = regexp.MustCompile(`(?i)\\ud[89a-f]`)

// strictlyRejectable reports whether a document that encoding/json accepts
// may be refused by the package's stricter parser: a duplicate key, nesting
// past maxDepth, invalid UTF-8, (approximately) a surrogate escape, or a
// message field given twice under different keys.
func strictlyRejectable(raw []byte) bool {
	if !utf8.Valid(raw) || surrogateEscape.Match(raw) {
		return true
	}
	dup, deep, clash := scanStd(raw)
	return dup || deep || clash
}

// scanStd walks raw with encoding/json's tokenizer, the reference reader,
// and reports duplicate keys (as encoding/json decodes them), depth, and
// clashes: a message object (the top level or a subtask, recursively) with a
// key that differs from a field only by case, or with both spellings of a
// field ("g" and "goal"). Objects that are not messages (ctx, params) may
// hold such keys: they are data.
func scanStd(raw []byte) (dup, deep, clash bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	type frame struct {
		obj    bool
		msg    bool // a message object
		keys   map[string]bool
		fields map[string]bool // msg: the fields seen, each by its short name
		last   string          // the last key read
		wanted bool            // next string token in an object is a key
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) || err != nil {
			return dup, deep, clash
		}
		top := len(stack) - 1
		isKey := top >= 0 && stack[top].obj && stack[top].wanted
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				isMsg := v == '{' && (top < 0 || (stack[top].msg && stack[top].last == "subtask"))
				if top >= 0 && stack[top].obj {
					stack[top].wanted = true
				}
				stack = append(stack, frame{obj: v == '{', msg: isMsg, keys: map[string]bool{}, fields: map[string]bool{}, wanted: true})
				if len(stack) > maxDepth {
					deep = true
				}
			default:
				stack = stack[:top]
			}
			continue
		case string:
			if isKey {
				f := &stack[top]
				if f.keys[v] {
					dup = true
				}
				if f.msg {
					if lf, ok := messageFields[strings.ToLower(v)]; ok && lf != v {
						clash = true // a case variant of a message field
					}
					if short := shortName(v); f.fields[short] && !f.keys[v] {
						clash = true // the other spelling of a field
					}
					f.fields[shortName(v)] = true
				}
				f.keys[v] = true
				f.last = v
				f.wanted = false
				continue
			}
		}
		if top >= 0 && stack[top].obj {
			stack[top].wanted = true
		}
	}
}

// checkCommon asserts the properties every Result must have for raw.
func checkCommon(t *testing.T, raw []byte, r Result) {
	t.Helper()
	switch r.Status {
	case StatusValid:
		if r.Code != "" || r.Details != "" || r.Path != "" {
			t.Fatalf("VALID with extra fields: %+v", r)
		}
		if !json.Valid(raw) {
			t.Fatalf("VALID but not JSON per encoding/json: %q", raw)
		}
		if dup, deep, clash := scanStd(raw); dup || deep || clash {
			t.Fatalf("VALID despite a duplicate key, nesting past %d or a field given twice: %q", maxDepth, raw)
		}
	case StatusErr:
		if r.Code == "" || r.Details == "" {
			t.Fatalf("ERR without code or details: %+v", r)
		}
		if !utf8.ValidString(r.Details) || !utf8.ValidString(r.Path) {
			t.Fatalf("ERR with invalid UTF-8: %+v", r)
		}
	default:
		t.Fatalf("status %q", r.Status)
	}
	if !json.Valid(raw) && r.Code != CodeMalformedMessage {
		t.Fatalf("not JSON per encoding/json but %+v: %q", r, raw)
	}
	if json.Valid(raw) && r.Code == CodeMalformedMessage && !strictlyRejectable(raw) {
		// Only a JSON document that is not an object is left.
		var top any
		_ = json.Unmarshal(raw, &top)
		if _, isObj := top.(map[string]any); isObj {
			t.Fatalf("JSON object refused as malformed: %+v: %q", r, raw)
		}
	}
}

func hasGAndPlan(raw []byte) bool {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(raw, &top); err != nil {
		return false
	}
	_, g := top["g"]
	_, goal := top["goal"]
	_, plan := top["plan"]
	return (g || goal) && plan
}

// fuzzLibraries are the libraries the fuzz targets check each input
// against: verbs "s", "r", "p" of their own, and aliases.
func fuzzLibraries(f *testing.F) []*Library { return []*Library{seedLibrary(f), aliasLibrary(f)} }

func FuzzValidate(f *testing.F) {
	addSeeds(f)
	libs := fuzzLibraries(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, lib := range libs {
			r := lib.Validate(raw)
			if again := lib.Validate(raw); again != r {
				t.Fatalf("not deterministic: %+v then %+v", r, again)
			}
			checkCommon(t, raw, r)
			verbs, pr := lib.PlanVerbs(raw)
			if pr != r || (len(verbs) > 0) != r.Valid() {
				t.Fatalf("PlanVerbs = %q, %+v; Validate = %+v", verbs, pr, r)
			}
			if !r.Valid() {
				continue
			}
			if !hasGAndPlan(raw) {
				t.Fatalf("VALID without g and plan: %q", raw)
			}
			if !lib.ValidateAnswer(raw).Valid() {
				t.Fatalf("a valid message is not a valid answer: %q", raw)
			}
			// What callers compare with supported_verbs is a verb's name.
			for _, v := range verbs {
				if _, ok := lib.Resolve(v); !ok && v != verbJoin && v != verbDefine && v != verbInstantiate {
					t.Fatalf("PlanVerbs gives %q, not a verb's name: %q", v, raw)
				}
				if name, _ := lib.Resolve(v); name != "" && name != v {
					t.Fatalf("PlanVerbs gives the alias %q of %q: %q", v, name, raw)
				}
			}
		}
	})
}

func FuzzValidateAnswer(f *testing.F) {
	addSeeds(f)
	libs := fuzzLibraries(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, lib := range libs {
			fuzzAnswer(t, lib, raw)
		}
	})
}

func fuzzAnswer(t *testing.T, lib *Library, raw []byte) {
	t.Helper()
	r := lib.ValidateAnswer(raw)
	if again := lib.ValidateAnswer(raw); again != r {
		t.Fatalf("not deterministic: %+v then %+v", r, again)
	}
	checkCommon(t, raw, r)
	isErr := IsErrObject(raw)
	if isErr && !r.Valid() {
		t.Fatalf("IsErrObject but ValidateAnswer = %+v: %q", r, raw)
	}
	if r.Valid() && !isErr && !hasGAndPlan(raw) {
		t.Fatalf("VALID answer is neither an ERR object nor has g and plan: %q", raw)
	}
	switch OutFormat(raw) {
	case "human", "raw", "summary":
	default:
		t.Fatalf("OutFormat = %q", OutFormat(raw))
	}
}

func FuzzParseSpawn(f *testing.F) {
	addSeeds(f)
	libs := fuzzLibraries(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		for _, lib := range libs {
			fuzzSpawn(t, lib, raw)
		}
	})
}

func fuzzSpawn(t *testing.T, lib *Library, raw []byte) {
	t.Helper()
	sp, r := lib.ParseSpawn(raw)
	sp2, r2 := lib.ParseSpawn(raw)
	if r != r2 || (sp == nil) != (sp2 == nil) {
		t.Fatalf("not deterministic: %+v then %+v", r, r2)
	}
	checkCommon(t, raw, r)
	if sp == nil {
		if r.Valid() {
			t.Fatal("no spawn but VALID")
		}
		return
	}
	if !r.Valid() {
		t.Fatalf("spawn with %+v", r)
	}
	if !lib.Validate(raw).Valid() {
		t.Fatalf("spawn from a message Validate refuses: %q", raw)
	}
	if sp.AgentName == "" || sp.Verb == "" || sp.Tool == "" {
		t.Fatalf("incomplete spawn %+v", sp)
	}
	if name, ok := lib.Resolve(sp.Verb); ok && name != sp.Verb {
		t.Fatalf("spawn verb %q is an alias of %q", sp.Verb, name)
	}
	// What ParseSpawn accepts can always be registered.
	ext, err := lib.Extend(sp.NewVerbs, sp.NewTools)
	if err != nil {
		t.Fatalf("Extend(spawn) = %v for %q", err, raw)
	}
	if tl, ok := ext.Tool(sp.Tool); !ok || !ext.tool(sp.Tool).supports(sp.Verb) {
		t.Fatalf("after Extend, tool %q (%v) does not support %q", sp.Tool, tl, sp.Verb)
	}
}

// TestScanStd checks the fuzz oracle itself.
func TestScanStd(t *testing.T) {
	for _, tc := range []struct {
		in               string
		dup, deep, clash bool
	}{
		{`{"a":1,"a":2}`, true, false, false},
		{`{"a":1,"\u0061":2}`, true, false, false},
		{`{"a":{"a":1},"b":[{"a":1},{"a":1}]}`, false, false, false},
		{`{"a":"b","b":"a"}`, false, false, false},
		{`{"x":[{"k":1,"k":1}]}`, true, false, false},
		{nested(64), false, false, false},
		{nested(65), false, true, false},
		{`{"G":1}`, false, false, true},
		{`{"g":1,"goal":2}`, false, false, true},
		{`{"goal":1,"g":2}`, false, false, true},
		{`{"g":1,"g":2}`, true, false, false},
		{`{"subtask":{"Plan":1}}`, false, false, true},
		{`{"subtask":{"subtask":{"goal":1,"g":1}}}`, false, false, true},
		{`{"ctx":{"G":1,"g":1,"goal":1},"plan":[{"Plan":1}]}`, false, false, false},
		{`{"x":{"subtask":{"G":1}}}`, false, false, false},
		{`{"subtask":[{"G":1}]}`, false, false, false},
	} {
		dup, deep, clash := scanStd([]byte(tc.in))
		if dup != tc.dup || deep != tc.deep || clash != tc.clash {
			t.Errorf("scanStd(%.60s) = %v, %v, %v; want %v, %v, %v", tc.in, dup, deep, clash, tc.dup, tc.deep, tc.clash)
		}
	}
}
