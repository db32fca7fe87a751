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
	for _, dir := range []string{"messages", "answers"} {
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
	} {
		f.Add([]byte(s))
	}
}

var surrogateEscape = regexp.MustCompile(`(?i)\\ud[89a-f]`)

// strictlyRejectable reports whether a document that encoding/json accepts
// may be refused by the package's stricter parser: a duplicate key, nesting
// past maxDepth, invalid UTF-8, or (approximately) a surrogate escape.
func strictlyRejectable(raw []byte) bool {
	if !utf8.Valid(raw) || surrogateEscape.Match(raw) {
		return true
	}
	dup, deep := scanStd(raw)
	return dup || deep
}

// scanStd walks raw with encoding/json's tokenizer, the reference reader,
// and reports duplicate keys (as encoding/json decodes them) and depth.
func scanStd(raw []byte) (dup, deep bool) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	type frame struct {
		obj    bool
		keys   map[string]bool
		wanted bool // next string token in an object is a key
	}
	var stack []frame
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) || err != nil {
			return dup, deep
		}
		top := len(stack) - 1
		isKey := top >= 0 && stack[top].obj && stack[top].wanted
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				if top >= 0 && stack[top].obj {
					stack[top].wanted = true
				}
				stack = append(stack, frame{obj: v == '{', keys: map[string]bool{}, wanted: true})
				if len(stack) > maxDepth {
					deep = true
				}
			default:
				stack = stack[:top]
			}
			continue
		case string:
			if isKey {
				if stack[top].keys[v] {
					dup = true
				}
				if f, ok := messageFields[strings.ToLower(v)]; ok && f != v {
					dup = true // a case variant of a message field
				}
				stack[top].keys[v] = true
				stack[top].wanted = false
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
		if dup, deep := scanStd(raw); dup || deep {
			t.Fatalf("VALID despite a duplicate key or nesting past %d: %q", maxDepth, raw)
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
	_, plan := top["plan"]
	return g && plan
}

func FuzzValidate(f *testing.F) {
	addSeeds(f)
	lib := seedLibrary(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
		r := lib.Validate(raw)
		if again := lib.Validate(raw); again != r {
			t.Fatalf("not deterministic: %+v then %+v", r, again)
		}
		checkCommon(t, raw, r)
		if r.Valid() {
			if !hasGAndPlan(raw) {
				t.Fatalf("VALID without g and plan: %q", raw)
			}
			if !lib.ValidateAnswer(raw).Valid() {
				t.Fatalf("a valid message is not a valid answer: %q", raw)
			}
		}
	})
}

func FuzzValidateAnswer(f *testing.F) {
	addSeeds(f)
	lib := seedLibrary(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
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
	})
}

func FuzzParseSpawn(f *testing.F) {
	addSeeds(f)
	lib := seedLibrary(f)
	f.Fuzz(func(t *testing.T, raw []byte) {
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
		// What ParseSpawn accepts can always be registered.
		ext, err := lib.Extend(sp.NewVerbs, sp.NewTools)
		if err != nil {
			t.Fatalf("Extend(spawn) = %v for %q", err, raw)
		}
		if tl, ok := ext.Tool(sp.Tool); !ok || !ext.tool(sp.Tool).supports(sp.Verb) {
			t.Fatalf("after Extend, tool %q (%v) does not support %q", sp.Tool, tl, sp.Verb)
		}
	})
}

// TestScanStd checks the fuzz oracle itself.
func TestScanStd(t *testing.T) {
	for _, tc := range []struct {
		in        string
		dup, deep bool
	}{
		{`{"a":1,"a":2}`, true, false},
		{`{"a":1,"\u0061":2}`, true, false},
		{`{"a":{"a":1},"b":[{"a":1},{"a":1}]}`, false, false},
		{`{"a":"b","b":"a"}`, false, false},
		{`{"x":[{"k":1,"k":1}]}`, true, false},
		{nested(64), false, false},
		{nested(65), false, true},
	} {
		dup, deep := scanStd([]byte(tc.in))
		if dup != tc.dup || deep != tc.deep {
			t.Errorf("scanStd(%.60s) = %v, %v; want %v, %v", tc.in, dup, deep, tc.dup, tc.deep)
		}
	}
}
