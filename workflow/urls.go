package workflow

import (
	"maps"
	"net/url"
	"slices"
	"strings"
)

// Signed URLs between agents: a signed URL (S3, GCS, CloudFront, Azure SAS)
// is a capability to read a document, and a node's answer hands it to every
// later agent of the run. Templates forward data at any depth, message,
// thought and next_step_hint, and an agent reads a URL wherever it stands
// in prose, so every one of those strings is searched, not only the values
// that are a URL and nothing else.

// signatureParams mark a URL as signed.
var signatureParams = []string{"x-amz-signature", "x-goog-signature", "signature", "sig"}

// maxSignedURLs bounds the signed URLs one answer may carry: each costs a
// policy decision, and no honest step needs more.
const maxSignedURLs = 32

// maxDecodes bounds how many layers of percent-encoding are undone to find
// a URL written encoded (a redirect parameter, an encoded link), and
// maxNesting how deep URLs inside URLs are looked for: bounds that keep the
// search linear in the answer's size.
const (
	maxDecodes = 3
	maxNesting = 3
)

// signedURLs returns the distinct signed URLs in the strings of a that a
// later node may be given, in a stable order.
func signedURLs(a Answer) []*url.URL {
	seen := map[string]bool{}
	var out []*url.URL
	add := func(s string) {
		for _, u := range urlsIn(s) {
			// One URL written plain and encoded is one decision.
			if key := percentDecode(u.String()); signed(u) && !seen[key] {
				seen[key] = true
				out = append(out, u)
			}
		}
	}
	add(a.Message)
	add(a.Thought)
	add(a.NextStepHint)
	add(a.Status)
	walkStrings(a.Data, add)
	return out
}

// walkStrings calls fn with every string in v, map keys included (a
// template that forwards an object forwards its keys too).
func walkStrings(v any, fn func(string)) {
	switch x := v.(type) {
	case map[string]any:
		for _, k := range slices.Sorted(maps.Keys(x)) {
			fn(k)
			walkStrings(x[k], fn)
		}
	case []any:
		for _, e := range x {
			walkStrings(e, fn)
		}
	case string:
		fn(x)
	}
}

// signed reports whether u carries a signature parameter. The query is
// split here rather than by url.Query, which skips a pair it cannot read
// (one with a ';' or a bad escape) where a storage service might not.
func signed(u *url.URL) bool {
	for _, pair := range strings.FieldsFunc(u.RawQuery, func(r rune) bool { return r == '&' || r == ';' }) {
		name, _, _ := strings.Cut(pair, "=")
		if slices.Contains(signatureParams, strings.ToLower(percentDecode(name))) {
			return true
		}
	}
	return false
}

// urlsIn returns the URLs written in s with a host: absolute ones of any
// scheme and scheme-relative ones ("//host/path"), alone or inside prose,
// also where they are percent-encoded inside another text. A backslash
// counts as a slash, as browsers read "https:\\host" (and as a JSON-escaped
// "https:\/\/host" reads once unescaped).
func urlsIn(s string) []*url.URL {
	var out []*url.URL
	for range maxDecodes + 1 {
		out = append(out, scanURLs(s, 0)...)
		d := percentDecode(s)
		if d == s {
			break
		}
		s = d
	}
	return out
}

// scanURLs finds the URLs of one layer of text: at each pair of slashes, a
// URL runs back over its scheme (if a colon precedes the slashes) and on to
// the first character that cannot be in one; trailing punctuation of the
// sentence is left out. What follows a URL's host is searched again, down
// to maxNesting: a URL may carry another in its path or query.
func scanURLs(s string, depth int) []*url.URL {
	var out []*url.URL
	for i := 0; i+1 < len(s); i++ {
		if !isSlash(s[i]) || !isSlash(s[i+1]) {
			continue
		}
		scheme := ""
		if i > 0 && s[i-1] == ':' {
			j := i - 1
			for j > 0 && isSchemeChar(s[j-1]) {
				j--
			}
			for j < i-1 && !isLetter(s[j]) {
				j++ // a scheme starts with a letter
			}
			scheme = s[j : i-1]
		} else if i > 0 && isPathChar(s[i-1]) {
			// "a//b" inside a word or a path is not a scheme-relative URL;
			// one stands after a space, a quote, a bracket or an '='.
			continue
		}
		rest := i
		for rest < len(s) && isSlash(s[rest]) {
			rest++
		}
		end := rest
		for end < len(s) && !endsURL(s[end]) {
			end++
		}
		tail := strings.TrimRight(s[rest:end], ".,;:!?)]}'")
		i = end
		if tail == "" {
			continue
		}
		raw := "//" + strings.ReplaceAll(tail, `\`, "/")
		if scheme != "" {
			raw = scheme + ":" + raw
		}
		u, err := url.Parse(raw)
		if err != nil {
			u = roughURL(scheme, tail)
		}
		if u.Host == "" {
			continue
		}
		if depth < maxNesting {
			// After the host and the slashes that open the path: a path
			// written with "//" in it is not a second URL.
			if k := strings.IndexAny(tail, `/\?#`); k >= 0 {
				for k < len(tail) && isSlash(tail[k]) {
					k++
				}
				out = append(out, scanURLs(tail[k:], depth+1)...)
			}
		}
		u.Scheme, u.Host = strings.ToLower(u.Scheme), strings.ToLower(u.Host)
		out = append(out, u)
	}
	return out
}

// roughURL splits a URL that url.Parse refuses (a bad escape, a bad port)
// the way a lenient client would still send it, so that it is checked
// rather than skipped: the host is what follows the last '@' before the
// path.
func roughURL(scheme, tail string) *url.URL {
	tail = strings.ReplaceAll(tail, `\`, "/")
	authority, rest := tail, ""
	if k := strings.IndexAny(tail, "/?#"); k >= 0 {
		authority, rest = tail[:k], tail[k:]
	}
	if k := strings.LastIndex(authority, "@"); k >= 0 {
		authority = authority[k+1:]
	}
	u := &url.URL{Scheme: scheme, Host: authority}
	rest, _, _ = strings.Cut(rest, "#")
	u.Path, u.RawQuery, _ = strings.Cut(rest, "?")
	return u
}

func isSlash(c byte) bool { return c == '/' || c == '\\' }

func isLetter(c byte) bool { return c|0x20 >= 'a' && c|0x20 <= 'z' }

func isPathChar(c byte) bool {
	return isLetter(c) || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' || c == '%' || isSlash(c)
}

func isSchemeChar(c byte) bool {
	return isLetter(c) || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'
}

// endsURL reports whether c cannot be part of a URL in text: space and
// control characters, quotes and angle brackets.
func endsURL(c byte) bool {
	return c <= ' ' || c == 0x7f || c == '"' || c == '\'' || c == '<' || c == '>' || c == '`'
}

// percentDecode undoes percent-encoding where it is well formed and leaves
// the rest as written (url.QueryUnescape gives up on the first bad escape,
// which would hide what follows it).
func percentDecode(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b.WriteByte(unhex(s[i+1])<<4 | unhex(s[i+2]))
			i += 2
			continue
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func isHex(c byte) bool {
	return c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'f'
}

func unhex(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return (c | 0x20) - 'a' + 10
}
