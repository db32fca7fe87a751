package usage

import (
	"strings"
	"testing"
)

// A usage report is believed only when it makes sense: each way an
// upstream can lie about (or garble) its counts is refused, and says why
// without quoting the numbers.
func TestRead(t *testing.T) {
	tests := []struct {
		name, in string
		want     Report
		reason   string
	}{
		{"chat", `{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}`, Report{Prompt: 10, Completion: 5, Total: 15}, ""},
		{"no total: computed", `{"prompt_tokens":10,"completion_tokens":5}`, Report{Prompt: 10, Completion: 5, Total: 15}, ""},
		{"embeddings", `{"prompt_tokens":8,"total_tokens":8}`, Report{Prompt: 8, Total: 8}, ""},
		{"cached", `{"prompt_tokens":100,"completion_tokens":1,"total_tokens":101,"prompt_tokens_details":{"cached_tokens":64,"audio_tokens":0}}`,
			Report{Prompt: 100, Completion: 1, Total: 101, Cached: 64, HasCached: true}, ""},
		{"details null", `{"prompt_tokens":1,"completion_tokens":1,"prompt_tokens_details":null}`, Report{Prompt: 1, Completion: 1, Total: 2}, ""},
		{"unjudged members", `{"prompt_tokens":1,"completion_tokens":0,"completion_tokens_details":{"reasoning_tokens":-4},"x":"y"}`, Report{Prompt: 1, Total: 1}, ""},
		{"zero", `{"prompt_tokens":0,"completion_tokens":0,"total_tokens":0}`, Report{}, ""},
		{"largest", `{"prompt_tokens":9007199254740991}`, Report{Prompt: MaxCount, Total: MaxCount}, ""},

		{"negative prompt", `{"prompt_tokens":-100000,"completion_tokens":5,"total_tokens":-99995}`, Report{}, "prompt_tokens is negative"},
		{"negative completion", `{"prompt_tokens":10,"completion_tokens":-5}`, Report{}, "completion_tokens is negative"},
		{"negative zero", `{"prompt_tokens":-0}`, Report{}, "prompt_tokens is negative"},
		{"fraction", `{"prompt_tokens":10.5,"completion_tokens":5}`, Report{}, "prompt_tokens is not an integer"},
		{"exponent", `{"prompt_tokens":1e3,"completion_tokens":5}`, Report{}, "prompt_tokens is not an integer"},
		{"integral fraction", `{"prompt_tokens":10,"completion_tokens":5.0}`, Report{}, "completion_tokens is not an integer"},
		{"string", `{"prompt_tokens":"10"}`, Report{}, "prompt_tokens is not an integer"},
		{"null count", `{"prompt_tokens":null}`, Report{}, "prompt_tokens is not an integer"},
		{"too large", `{"prompt_tokens":9007199254740992}`, Report{}, "prompt_tokens is too large"},
		{"beyond int64", `{"prompt_tokens":99999999999999999999999}`, Report{}, "prompt_tokens is too large"},
		{"total too small", `{"prompt_tokens":10,"completion_tokens":5,"total_tokens":1}`, Report{}, "total_tokens is not prompt_tokens + completion_tokens"},
		{"total too large", `{"prompt_tokens":10,"completion_tokens":5,"total_tokens":16}`, Report{}, "total_tokens is not prompt_tokens + completion_tokens"},
		{"embeddings total", `{"prompt_tokens":8,"total_tokens":9}`, Report{}, "total_tokens is not prompt_tokens + completion_tokens"},
		{"cached over prompt", `{"prompt_tokens":10,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":11}}`, Report{}, "cached_tokens is more than prompt_tokens"},
		{"cached negative", `{"prompt_tokens":10,"prompt_tokens_details":{"cached_tokens":-1}}`, Report{}, "cached_tokens is negative"},
		{"cached fraction", `{"prompt_tokens":10,"prompt_tokens_details":{"cached_tokens":0.5}}`, Report{}, "cached_tokens is not an integer"},
		{"details not an object", `{"prompt_tokens":10,"prompt_tokens_details":3}`, Report{}, "prompt_tokens_details is not an object"},
		{"no prompt", `{"completion_tokens":5}`, Report{}, "prompt_tokens is missing"},
		{"empty", `{}`, Report{}, "prompt_tokens is missing"},
		{"not an object", `[1]`, Report{}, "usage is not an object"},
		{"duplicate", `{"prompt_tokens":10,"prompt_tokens":-10}`, Report{}, "usage is not valid JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Read([]byte(tc.in))
			if Reason(err) != tc.reason || (err == nil) != (tc.reason == "") {
				t.Fatalf("Read(%s) error %v; want reason %q", tc.in, err, tc.reason)
			}
			if got != tc.want {
				t.Fatalf("Read(%s) = %+v; want %+v", tc.in, got, tc.want)
			}
			if err != nil && strings.ContainsAny(err.Error(), "0123456789") {
				t.Fatalf("the reason quotes a number: %v", err)
			}
		})
	}
}

// FuzzRead: whatever an upstream sends, a believed report is sane (no
// negative count, the total the sum, the cached within the prompt), and
// an unreadable one has a reason.
func FuzzRead(f *testing.F) {
	for _, s := range []string{`{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}`, `{"prompt_tokens":-1}`,
		`{"prompt_tokens":1,"prompt_tokens_details":{"cached_tokens":2}}`, `{"prompt_tokens":1e3}`, `{}`, `null`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		r, err := Read(in)
		if err != nil {
			if Reason(err) == "" {
				t.Fatalf("error without a reason: %v", err)
			}
			if r != (Report{}) {
				t.Fatalf("an unreadable report has counts: %+v", r)
			}
			return
		}
		if r.Prompt < 0 || r.Completion < 0 || r.Cached < 0 || r.Cached > r.Prompt || r.Total != r.Prompt+r.Completion ||
			r.Prompt > MaxCount || r.Completion > MaxCount {
			t.Fatalf("Read(%q) believed %+v", in, r)
		}
	})
}
