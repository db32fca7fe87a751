package confkit

import (
	"testing"
)

func TestEditDistance(t *testing.T) {
	cases := []struct {
		a, b string
		want int
	}{
		{"", "", 0},
		{"listen", "listen", 0},
		{"lisen", "listen", 1},         // deletion
		{"listenn", "listen", 1},       // insertion
		{"lusten", "listen", 1},        // substitution
		{"mdoel", "model", 1},          // a swap of neighbours is one edit
		{"ca", "abc", 3},               // optimal string alignment, not full Damerau
		{"", "abc", 3},                 // all insertions
		{"détecteur", "detecteur", 1},  // runes, not bytes
		{"kitchen", "architecture", 9}, // far apart
	}
	for _, c := range cases {
		if got := editDistance(c.a, c.b); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d", c.a, c.b, got, c.want)
		}
		if got := editDistance(c.b, c.a); got != c.want {
			t.Errorf("editDistance(%q, %q) = %d, want %d (symmetric)", c.b, c.a, got, c.want)
		}
	}
}

func TestDidYouMean(t *testing.T) {
	keys := []string{"listen", "log", "rate_limit", "token_limit", "models", "tags", "type"}
	cases := []struct {
		got, want string // want "": no hint
	}{
		{"lisen", "listen"},
		{"rate-limit", "rate_limit"}, // '-' for '_'
		{"RateLimit", "rate_limit"},  // case, and one missing '_'
		{"tokn_limt", "token_limit"},
		{"modles", "models"},
		{"tag", "tags"},
		{"colour", ""},   // nothing near
		{"lg", "log"},    // one edit of three letters
		{"tg", ""},       // two edits of "tags": too much of a four-letter name
		{"rat", ""},      // as far from all
		{"listen", ""},   // known: not a typo
		{"typo", "type"}, // one edit of four letters
		{"", ""},
	}
	for _, c := range cases {
		got := DidYouMean(c.got, keys)
		want := ""
		if c.want != "" {
			want = ` (did you mean "` + c.want + `"?)`
		}
		if got != want {
			t.Errorf("DidYouMean(%q) = %q, want %q", c.got, got, want)
		}
	}
	// The nearest wins over the first listed.
	if got := DidYouMean("jwtt", []string{"jw", "jwt"}); got != ` (did you mean "jwt"?)` {
		t.Errorf("nearest: %q", got)
	}
}
