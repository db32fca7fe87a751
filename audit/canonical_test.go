package audit

import (
	"encoding/json"
	"math"
	"testing"

	"github.com/gowebpki/jcs"
)

// viaJCS is the summary's RFC 8785 form by the general route: integers
// beyond ±(2^53-1) as their decimal strings (the writer's rule), then
// encoding/json, then jcs.Transform.
func viaJCS(t testing.TB, s map[string]any) string {
	raw, err := json.Marshal(bigIntsAsStrings(s))
	if err != nil {
		t.Fatal(err)
	}
	out, err := jcs.Transform(raw)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func TestCanonicalSummaryMatchesJCS(t *testing.T) {
	cases := []map[string]any{
		{},
		{"model": "gpt-4o", "stream": false, "status": 200, "latency_ms": 3.726, "tokens": map[string]any{"prompt": 7, "completion": 5, "total": 12}},
		{"checks": map[string]any{"auth": map[string]any{"verdict": "pass"}, "limits": map[string]any{"tokens_reserved": 1 << 40}}},
		{"errors": []string{"/status: must be one of …", "<html> & \"quotes\""}, "list": []any{1, "a", nil, true, 1e21, 1e-7, math.Copysign(0, -1), 0.1}},
		{"redactions": map[string]int{"email": 2, "credit_card": 1}},
		{"é": 1, "z": 2, "a": 3, "\u00e9\u0301": 4, "\U0001F600": 5, "\uff61": 6},
		{"control": "\x00\x1f\u2028\t\n", "big": int64(1) << 60, "neg": -42},
		{"edges": []any{1<<53 - 1, -(1<<53 - 1), 1 << 53, int64(-1 << 53), int64(math.MinInt64), uint64(math.MaxUint64), uint(7)}},
		{"nested": map[string]any{"deeper": []any{map[string]any{"k": []string{}}}}},
		{"invalid \xff name": map[string]any{"big": int64(1)<<60 + 1}, "counts": map[string]int{"n": 1<<60 + 1}}, // the general path
	}
	for i, s := range cases {
		got, err := canonicalSummary(s)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if want := viaJCS(t, s); string(got) != want {
			t.Errorf("case %d:\n got %s\nwant %s", i, got, want)
		}
	}
	if _, err := canonicalSummary(map[string]any{"x": math.NaN()}); err == nil {
		t.Error("NaN accepted")
	}
	// The general path (an invalid name here) does not round either.
	if got, err := canonicalSummary(map[string]any{"\xff": []any{int64(1)<<60 + 1}}); err != nil || string(got) != "{\"\uFFFD\":[\"1152921504606846977\"]}" {
		t.Errorf("general path, big integer: %s %v", got, err)
	}
	type custom struct{ A int }
	if got, err := canonicalSummary(map[string]any{"c": custom{A: 1}}); err != nil || string(got) != `{"c":{"A":1}}` {
		t.Errorf("general path: %s %v", got, err)
	}
}

func FuzzCanonicalSummary(f *testing.F) {
	f.Add("model", "gpt", 1.5, int64(3), true)
	f.Add("\u00e9", "\x00<>&", 1e300, int64(-1)<<62, false)
	f.Fuzz(func(t *testing.T, k, v string, x float64, n int64, b bool) {
		s := map[string]any{k: v, k + "x": x, "n": n, "b": b, "list": []any{v, x, map[string]any{v: k}}}
		got, err := canonicalSummary(s)
		raw, merr := json.Marshal(bigIntsAsStrings(s))
		if merr != nil {
			if err == nil {
				t.Fatalf("encoded what encoding/json refuses: %v", merr)
			}
			return
		}
		want, jerr := jcs.Transform(raw)
		if (err == nil) != (jerr == nil) || string(got) != string(want) {
			t.Fatalf("fast %s (%v) != jcs %s (%v)", got, err, want, jerr)
		}
	})
}
