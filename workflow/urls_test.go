package workflow

import (
	"slices"
	"strings"
	"testing"
)

const sig = "X-Amz-Signature=c2VjcmV0"

func hostsOf(a Answer) []string {
	var out []string
	for _, u := range signedURLs(a) {
		out = append(out, u.Scheme+"://"+u.Host)
	}
	return out
}

// Every string a template can forward is searched, and a signed URL is
// found inside prose as surely as alone: message, thought, next_step_hint,
// data at any depth (keys too), scheme-relative, percent-encoded inside
// another URL, JSON-escaped slashes, a ';'-separated query.
func TestSignedURLsSeeEveryForwardedString(t *testing.T) {
	evil := "https://evil.example.net/a.pdf?" + sig
	cases := []struct {
		name string
		a    Answer
		want []string
	}{
		{"a whole data value", Answer{Data: map[string]any{"url": evil}}, []string{"https://evil.example.net"}},
		{"inside a sentence in message", Answer{Message: "Done, see " + evil + ". Thanks!"}, []string{"https://evil.example.net"}},
		{"in thought", Answer{Thought: "I will pass (" + evil + ") on"}, []string{"https://evil.example.net"}},
		{"in next_step_hint", Answer{NextStepHint: "fetch <" + evil + ">"}, []string{"https://evil.example.net"}},
		{"nested data in prose", Answer{Data: map[string]any{"a": []any{map[string]any{"b": []any{"x", "the file: " + evil}}}}}, []string{"https://evil.example.net"}},
		{"a data key", Answer{Data: map[string]any{evil: true}}, []string{"https://evil.example.net"}},
		{"scheme-relative", Answer{Message: "get //evil.example.net/a.pdf?" + sig}, []string{"://evil.example.net"}},
		{"scheme-relative alone in data", Answer{Data: map[string]any{"u": "//evil.example.net/a?sig=x"}}, []string{"://evil.example.net"}},
		{"upper-case scheme and host", Answer{Message: "HTTPS://EVIL.example.net/a?" + sig}, []string{"https://evil.example.net"}},
		{"backslashes", Answer{Message: `https:\\evil.example.net\a?` + sig}, []string{"https://evil.example.net"}},
		{"JSON-escaped slashes", Answer{Message: `{"u": "https:\/\/evil.example.net\/a?` + sig + `"}`}, []string{"https://evil.example.net"}},
		{"percent-encoded in a redirect", Answer{Message: "https://ok.example.org/r?to=https%3A%2F%2Fevil.example.net%2Fa%3FX-Amz-Signature%3Dx"}, []string{"https://evil.example.net"}},
		{"a ';' query", Answer{Message: "https://evil.example.net/a?x=1;Signature=abc"}, []string{"https://evil.example.net"}},
		{"an encoded parameter name", Answer{Message: "https://evil.example.net/a?X-Amz-%53ignature=abc"}, []string{"https://evil.example.net"}},
		{"two in one string, once each", Answer{Message: evil + " and " + evil + " and https://b.example.com/x?sig=1"}, []string{"https://evil.example.net", "https://b.example.com"}},
		{"an unsigned URL is ordinary data", Answer{Message: "see https://www.example.org/about?q=1 // and a comment"}, nil},
		{"no URL", Answer{Message: "a/b//c and http:// alone"}, nil},
		{"a URL url.Parse refuses (bad escape)", Answer{Message: "see https://evil.example.net/a%zz?" + sig}, []string{"https://evil.example.net"}},
		{"a URL url.Parse refuses (bad port)", Answer{Message: "see https://user@evil.example.net:x/a?" + sig}, []string{"https://evil.example.net:x"}},
		{"a path with a double slash is one URL", Answer{Message: "https://b.example.com//a/b?sig=1 https://c.example.com/x//y?sig=1"}, []string{"https://b.example.com", "https://c.example.com"}},
		{"scheme-relative in a redirect parameter", Answer{Message: "https://ok.example.org/r?to=//evil.example.net/a%3Fsig%3D1"}, []string{"://evil.example.net"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := hostsOf(c.a); !slices.Equal(got, c.want) {
				t.Errorf("signed URLs %v, want %v", got, c.want)
			}
		})
	}
}

// FuzzURLsIn: the extraction never panics, every URL it returns has a
// host, and a signed URL set apart by spaces is found whatever text
// surrounds it.
func FuzzURLsIn(f *testing.F) {
	for _, s := range []string{"", "https://a.example/x?sig=1", "//", `https:\/\/x`, "%2F%2Fa.b%3Fsig%3D1", "a://b://c", "%%%", "http://[::1]:80/?sig=1", "x:////y"} {
		f.Add(s, s)
	}
	f.Fuzz(func(t *testing.T, prefix, suffix string) {
		for _, u := range urlsIn(prefix + suffix) {
			if u.Host == "" {
				t.Fatalf("a URL without a host: %q", u)
			}
		}
		planted := prefix + " https://planted.example/d?X-Amz-Signature=1 " + suffix
		found := false
		for _, h := range hostsOf(Answer{Message: planted}) {
			found = found || strings.HasSuffix(h, "://planted.example")
		}
		if !found {
			t.Fatalf("the planted URL was not found in %q", planted)
		}
	})
}
