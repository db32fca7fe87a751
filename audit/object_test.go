package audit

import (
	"context"
	"math"
	"strings"
	"testing"
)

// An Object writes the bytes the map path writes for the same members:
// the two ways of building a summary must hash alike.
func TestObjectMatchesMap(t *testing.T) {
	type add func(o *Object, m map[string]any)
	str := func(k, v string) add {
		return func(o *Object, m map[string]any) { o.Str(k, v); m[k] = v }
	}
	num := func(k string, v int64) add {
		return func(o *Object, m map[string]any) { o.Int(k, v); m[k] = v }
	}
	flt := func(k string, v float64) add {
		return func(o *Object, m map[string]any) { o.Num(k, v); m[k] = v }
	}
	tests := []struct {
		note string
		adds []add
	}{
		{"empty", nil},
		{"strings", []add{str("model", "gpt-4o"), str("a", "line\nbreak \"quoted\" \\ </script> \u2028 é 😀"), str("ctl", "\x01\x1f\x7f")}},
		{"invalid utf-8", []add{str("bad", "a\xffb\xc3"), str("k", "\xed\xa0\x80")}},
		{"integers", []add{num("zero", 0), num("neg", -42), num("big", 1<<53), num("bigger", 1<<53+1), num("huge", math.MaxInt64), num("min", math.MinInt64)}},
		{"floats", []add{flt("tenth", 0.1), flt("e21", 1e21), flt("small", 5e-7), flt("negzero", math.Copysign(0, -1)), flt("ms", 12.345)}},
		{"bools and arrays", []add{
			func(o *Object, m map[string]any) { o.Bool("t", true); m["t"] = true },
			func(o *Object, m map[string]any) { o.Bool("f", false); m["f"] = false },
			func(o *Object, m map[string]any) {
				o.Strs("list", []string{"b", "a", "\xff"})
				m["list"] = []string{"b", "a", "\xff"}
			},
			func(o *Object, m map[string]any) { o.Strs("none", nil); m["none"] = []string(nil) },
			func(o *Object, m map[string]any) { o.Strs("empty", []string{}); m["empty"] = []string{} },
		}},
		{"nested objects", []add{
			func(o *Object, m map[string]any) {
				o.Begin("checks")
				o.Begin("redaction")
				o.Str("verdict", "applied")
				o.Int("count", 3)
				o.End()
				o.Begin("auth")
				o.Str("verdict", "pass")
				o.End()
				o.Begin("empty")
				o.End()
				o.End()
				o.Str("after", "x")
				m["checks"] = map[string]any{"redaction": map[string]any{"verdict": "applied", "count": 3},
					"auth": map[string]any{"verdict": "pass"}, "empty": map[string]any{}}
				m["after"] = "x"
			},
		}},
		{"name order is UTF-16's", []add{str("\U0001F600", "astral"), str("\uFB01", "bmp"), str("b", "1"), str("B", "2"), str("", "empty")}},
		{"a repeated name keeps the last", []add{str("k", "first"), num("k", 2)}},
	}
	for _, tc := range tests {
		t.Run(tc.note, func(t *testing.T) {
			o, m := &Object{}, map[string]any{}
			for _, a := range tc.adds {
				a(o, m)
			}
			got, err := o.Bytes()
			if err != nil {
				t.Fatal(err)
			}
			want, err := canonicalSummary(m)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != string(want) {
				t.Errorf("object %s\n   map %s", got, want)
			}
		})
	}
}

// Unbalanced Begin and End are refused, never written half-open.
func TestObjectNesting(t *testing.T) {
	o := &Object{}
	o.Begin("a")
	if _, err := o.Bytes(); err == nil {
		t.Error("an object left open was encoded")
	}
	o = &Object{}
	o.End()
	if _, err := o.Bytes(); err == nil {
		t.Error("End without Begin was encoded")
	}
}

// A number JSON cannot hold refuses the entry, as the map path does.
func TestObjectRefusesNaN(t *testing.T) {
	o := &Object{}
	o.Num("x", math.NaN())
	if _, err := o.Bytes(); err == nil {
		t.Fatal("NaN encoded")
	}
	if _, err := prepare([]byte(`"c"`), Record{Kind: KindLLMRequest, Object: o}); err == nil {
		t.Fatal("an entry with NaN was prepared")
	}
}

// Any writes what the map path wrote for the same value, whatever its
// type: the sites that built maps keep their entries' bytes.
func TestObjectAnyMatchesMap(t *testing.T) {
	type point struct {
		X int    `json:"x"`
		Y string `json:"y,omitempty"`
	}
	values := map[string]any{
		"str": "a\xffb", "int": 42, "big": int64(1<<53 + 1), "uint": uint64(math.MaxUint64), "flt": 0.1,
		"nil": nil, "bool": true, "strs": []string{"b", "a"}, "anys": []any{1, "x", map[string]any{"z": 1, "a": []int{1}}},
		"map": map[string]any{"b": 1, "a": map[string]int{"k": 1 << 60}}, "struct": point{X: 1}, "ints": []int{3, 1},
		"ptr": &point{X: 2, Y: "é"}, "durs": map[string][]string{"k": nil},
	}
	o := &Object{}
	for k, v := range values {
		o.Any(k, v)
	}
	got, err := o.Bytes()
	if err != nil {
		t.Fatal(err)
	}
	want, err := canonicalSummary(values)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("object %s\n   map %s", got, want)
	}
	if o.Any("bad", math.Inf(1)); o.err == nil {
		t.Error("an infinity was taken")
	}
}

// The read-back helpers see the last member of a name, nested ones too.
func TestObjectReadBack(t *testing.T) {
	o := &Object{}
	o.Str("remote", "10.0.0.1")
	o.Str("remote", "other")
	o.Int("n", 3)
	o.Begin("checks")
	o.Str("remote", "inner")
	o.End()
	if got := o.Text("remote"); got != "other" {
		t.Errorf("Text = %q", got)
	}
	if got := o.Text("n"); got != "" {
		t.Errorf("Text of a number = %q", got)
	}
	if raw, ok := o.Raw("checks"); !ok || string(raw) != `{"remote":"inner"}` {
		t.Errorf("Raw(checks) = %s, %v", raw, ok)
	}
	c := &Object{}
	raw, _ := o.Raw("checks")
	c.RawMember("c", raw)
	if b, _ := c.Bytes(); string(b) != `{"c":{"remote":"inner"}}` {
		t.Errorf("RawMember: %s", b)
	}
	var nilObj *Object
	if nilObj.Text("x") != "" {
		t.Error("nil object has members")
	}
}

// Members is the map literal's short form, to the byte; a malformed list
// of pairs refuses the entry rather than writing part of it.
func TestMembers(t *testing.T) {
	got, err := Members("b", 1, "a", []string{"x"}, "c", map[string]any{"n": nil}).Bytes()
	want, _ := canonicalSummary(map[string]any{"b": 1, "a": []string{"x"}, "c": map[string]any{"n": nil}})
	if err != nil || string(got) != string(want) {
		t.Errorf("Members = %s, %v; want %s", got, err, want)
	}
	for _, kv := range [][]any{{"a"}, {1, "x"}} {
		if _, err := Members(kv...).Bytes(); err == nil {
			t.Errorf("Members(%v) was encoded", kv)
		}
	}
}

// A summary the log has written is spent: its storage serves the next
// summary, so writing it again is refused (an error, never an entry with
// an empty or foreign summary), and the next summary built in that
// storage holds its own members only.
func TestObjectSpentOnceWritten(t *testing.T) {
	dir := t.TempDir()
	l := openLog(t, Config{Dir: dir, CheckpointEvery: -1, CommitDelay: -1})
	first := &Object{}
	first.Str("secret_route", "/v1/first")
	first.Int("status", 500)
	r := Record{Kind: KindLLMResponse, AgentID: "a", Object: first}
	if _, err := l.Append(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append(context.Background(), r); err == nil || !strings.Contains(err.Error(), "already written") {
		t.Fatalf("a spent summary written again: %v, want it refused", err)
	}
	second := &Object{}
	second.Str("model", "m")
	e, err := l.Append(context.Background(), Record{Kind: KindLLMResponse, AgentID: "a", Object: second})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(e.Summary); got != `{"model":"m"}` {
		t.Fatalf("summary %s, want only its own member", got)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if rep := mustVerify(t, dir); rep.Entries != 2 {
		t.Errorf("%d entries on disk, want 2", rep.Entries)
	}
}

// Encoding an entry allocates its summary's bytes and little else: the
// Object's members and values live in reused storage, the body in a
// reused buffer. (Before pooling: 8 allocations, 3 KB for this summary.)
func TestEntryEncodingAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("sync.Pool drops items at random under the race detector")
	}
	chain := appendCanonicalString(nil, "gw")
	allocs := testing.AllocsPerRun(200, func() {
		s := &Object{}
		s.Str("model", "bench-model")
		s.Int("status", 200)
		s.Begin("checks")
		for _, c := range []string{"auth", "models", "limits", "policy", "redaction", "budget"} {
			s.Begin(c)
			s.Str("verdict", "pass")
			s.End()
		}
		s.End()
		var p prepared
		if err := p.fill(chain, Record{Kind: KindLLMResponse, AgentID: "bench", RequestID: "req-1", Object: s}); err != nil {
			t.Fatal(err)
		}
		p.release()
	})
	// The Object itself and its canonical bytes (kept as Entry.Summary),
	// and one for a pool emptied by a collection.
	if allocs > 3 {
		t.Errorf("%.0f allocations to encode an entry, want at most 3", allocs)
	}
}
