package sacp

import (
	"encoding/json"
	"strings"
	"testing"
)

const sacpObj = `{"thought":"t","status":"success","data":{"a":1},"message":"m"}`

func TestSanitize(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		want   string
		wantOK bool
	}{
		{name: "bare object", in: sacpObj, want: sacpObj, wantOK: true},
		{name: "surrounding whitespace trimmed", in: "\n\t " + sacpObj + " \n", want: sacpObj, wantOK: true},
		{name: "fenced json", in: "Here you go:\n```json\n" + sacpObj + "\n```\nAnything else?", want: sacpObj, wantOK: true},
		{name: "fenced JSON upper case", in: "```JSON\n" + sacpObj + "\n```", want: sacpObj, wantOK: true},
		{name: "fenced without language", in: "```\n" + sacpObj + "\n```", want: sacpObj, wantOK: true},
		{name: "fence without newline", in: "```json" + sacpObj + "```", want: sacpObj, wantOK: true},
		{name: "unclosed fence (cut off by max_tokens)", in: "```json\n" + sacpObj + "\n", want: sacpObj, wantOK: true},
		{name: "prose around json", in: "Sure! " + sacpObj + " Hope this helps :}", want: sacpObj, wantOK: true},
		{
			name:   "braces inside strings",
			in:     `Result: {"thought":"use {x} and }}","status":"success","data":{"s":"{"},"message":"{ok"} bye}`,
			want:   `{"thought":"use {x} and }}","status":"success","data":{"s":"{"},"message":"{ok"}`,
			wantOK: true,
		},
		{
			name:   "escaped quotes and backslashes",
			in:     `x {"thought":"he said \"}\" and \\","status":"success","data":{"p":"C:\\dir\\"},"message":"\\\"}"} y`,
			want:   `{"thought":"he said \"}\" and \\","status":"success","data":{"p":"C:\\dir\\"},"message":"\\\"}"}`,
			wantOK: true,
		},
		{
			name:   "nested objects stay whole",
			in:     `{"thought":"t","status":"success","data":{"a":{"b":[{"c":{}}]}},"message":"m"}`,
			want:   `{"thought":"t","status":"success","data":{"a":{"b":[{"c":{}}]}},"message":"m"}`,
			wantOK: true,
		},
		{name: "first object is not SACP", in: `Format: {"key":"value"} Answer: ` + sacpObj, want: sacpObj, wantOK: true},
		{name: "first object does not parse", in: `{not json} ` + sacpObj, want: sacpObj, wantOK: true},
		{name: "no SACP object: first that parses", in: `{bad} {"a":1} {"b":2}`, want: `{"a":1}`, wantOK: true},
		{
			name:   "partial SACP beats plain json",
			in:     `{"a":1} {"thought":"x","status":"success"}`,
			want:   `{"thought":"x","status":"success"}`,
			wantOK: true,
		},
		{
			name:   "fenced answer beats a SACP example in prose",
			in:     `The format is {"thought":"...","status":"success","data":{},"message":"..."}, so:` + "\n```json\n" + sacpObj + "\n```",
			want:   sacpObj,
			wantOK: true,
		},
		{name: "utf-8 bom", in: "\uFEFF" + sacpObj, want: sacpObj, wantOK: true},
		{name: "stray open brace in prose", in: "I think :-{ the answer is " + sacpObj, want: sacpObj, wantOK: true},
		{name: "stray brace and quote on an earlier line", in: "Hmm {the 5\" screen\n" + sacpObj, want: sacpObj, wantOK: true},
		{name: "object inside an array", in: `[` + sacpObj + `]`, want: sacpObj, wantOK: true},
		{name: "nesting deeper than maxDepth is skipped", in: strings.Repeat("{", maxDepth+100) + sacpObj, want: sacpObj, wantOK: true},
		// The candidate cap is what keeps "{}{}{}…" linear; an answer after
		// more than maxCandidates objects is not looked for.
		{name: "candidates beyond the cap are not tried", in: strings.Repeat("{}", maxCandidates) + sacpObj, want: "{}", wantOK: true},
		{name: "nothing found", in: "I could not do it.", wantOK: false},
		{name: "empty", in: "", wantOK: false},
		{name: "only a bom", in: "\uFEFF", wantOK: false},
		{name: "unterminated object", in: `{"thought":"t"`, wantOK: false},
		{name: "unterminated string", in: `{"thought":"t}`, wantOK: false},
		{name: "balanced but not json", in: `{thought: t}`, wantOK: false},
		{name: "raw newline inside a string is not json", in: "{\"a\":\"x\ny\"}", wantOK: false},
		{name: "array only", in: `[1,2,3]`, wantOK: false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := Sanitize(tt.in)
			if ok != tt.wantOK || got != tt.want {
				t.Errorf("Sanitize(%q) = %q, %v; want %q, %v", tt.in, got, ok, tt.want, tt.wantOK)
			}
		})
	}
}

func TestScanKeepsOutermostSpans(t *testing.T) {
	tests := []struct {
		in   string
		want []string
	}{
		{in: `a {b {c} d} e {f} g`, want: []string{`{b {c} d}`, `{f}`}},
		{in: `{ {x} {y}`, want: []string{`{x}`, `{y}`}},          // the first brace never closes
		{in: `{ {x} {y} }`, want: []string{`{ {x} {y} }`}},       // now it does and absorbs both
		{in: `}} {"}":"{"} }`, want: []string{`{"}":"{"}`}},      // stray closers are ignored
		{in: `{"a":"b\\"} c`, want: []string{`{"a":"b\\"}`}},     // even backslash run: quote closes
		{in: `{"a":"b\"} c"}`, want: []string{`{"a":"b\"} c"}`}}, // odd run: quote is escaped
	}
	for _, tt := range tests {
		x := extractor{s: tt.in}
		x.scan()
		var got []string
		for _, c := range x.cands {
			got = append(got, tt.in[c.start:c.end])
		}
		if strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("scan(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func FuzzSanitize(f *testing.F) {
	for _, s := range []string{
		sacpObj,
		"```json\n" + sacpObj + "\n```",
		"prose {\"a\":1} more } {",
		`{"a":"\"}\\"}`,
		"\uFEFF{}",
		"{{{{{{",
		`{"a` + "\n" + `{"b":2}`,
		"```\n```json{}```",
		strings.Repeat("{}", 20),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		got, ok := Sanitize(in)
		if !ok {
			if got != "" {
				t.Fatalf("not ok but returned %q", got)
			}
			return
		}
		if !strings.Contains(strings.TrimPrefix(in, bom), got) {
			t.Fatalf("%q is not a substring of the input", got)
		}
		var obj map[string]json.RawMessage
		if err := json.Unmarshal([]byte(got), &obj); err != nil || obj == nil {
			t.Fatalf("%q does not parse as an object: %v", got, err)
		}
	})
}

// adversarial are hostile inputs of about n bytes for the sanitizer.
var adversarial = []struct {
	name string
	gen  func(n int) string
}{
	{"open-braces", func(n int) string { return strings.Repeat("{", n) }},
	{"unterminated-string", func(n int) string { return `{"thought":"` + strings.Repeat(`x{\"}`, n/5) }},
	{"brace-quote", func(n int) string { return strings.Repeat(`{"`, n/2) }},
	{"empty-objects", func(n int) string { return strings.Repeat("{}", n/2) }},
	{"invalid-objects", func(n int) string { return strings.Repeat(`{"a":1 x}`, n/9) }},
	{"deep-invalid", func(n int) string {
		k := n / 6
		return strings.Repeat(`{"a":`, k) + "x" + strings.Repeat("}", k)
	}},
	{"backslashes", func(n int) string { return `{"a":"` + strings.Repeat(`\\\"`, n/3) }},
	{"fences", func(n int) string { return strings.Repeat("```json{", n/8) }},
	{"newline-strings", func(n int) string { return strings.Repeat("{\"a\":\"\n", n/7) }},
}

// The scanner's memory must not grow with hostile input: a stack or
// candidate list proportional to the input would show up here as a growing
// number of allocations.
func TestSanitizeAdversarialAllocations(t *testing.T) {
	for _, p := range adversarial {
		small, large := p.gen(16<<10), p.gen(256<<10)
		a16 := testing.AllocsPerRun(3, func() { Sanitize(small) })
		a256 := testing.AllocsPerRun(3, func() { Sanitize(large) })
		// A little slack: the race detector's runtime allocates a few
		// extra times. Growth with the input would be thousands.
		if a256 > a16+4 || a256 > 80 {
			t.Errorf("%s: %v allocations at 16 KB, %v at 256 KB; want about the same, bounded", p.name, a16, a256)
		}
	}
}

// BenchmarkSanitizeAdversarial shows the sanitizer is linear on hostile
// input: each pattern at 16 KB and 256 KB should differ by about 16x in ns/op
// with constant allocations.
func BenchmarkSanitizeAdversarial(b *testing.B) {
	for _, p := range adversarial {
		for _, size := range []struct {
			name string
			n    int
		}{{"16KB", 16 << 10}, {"256KB", 256 << 10}} {
			in := p.gen(size.n)
			b.Run(p.name+"/"+size.name, func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(in)))
				for b.Loop() {
					Sanitize(in)
				}
			})
		}
	}
}

func TestFences(t *testing.T) {
	in := "a ```json\n{1}\n``` b ```go\n{2}\n``` c ```\n{3}\n``` d ```JSON{4}"
	f := newFences(in)
	if !f.ok {
		t.Fatal("no fence found")
	}
	for _, tt := range []struct {
		obj  string
		want bool
	}{{"{1}", true}, {"{2}", false}, {"{3}", true}, {"{4}", true}} {
		i := strings.Index(in, tt.obj)
		if got := f.contain(span{i, i + len(tt.obj)}); got != tt.want {
			t.Errorf("contain(%s) = %v, want %v", tt.obj, got, tt.want)
		}
	}
	if !newFences("no fences ``` here? no: one unclosed").ok {
		t.Error("an unclosed fence still counts")
	}
	if newFences("```python\nx\n```").ok {
		t.Error("a python fence is not a json fence")
	}
}
