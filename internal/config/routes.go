package config

import (
	"fmt"
	"path"
	"strconv"
	"strings"

	"github.com/sacpgw/gateway/internal/confkit"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/upstream"
	"gopkg.in/yaml.v3"
)

// unroutedModels reports each entry of an agent's models allow-list that
// no upstream can ever serve. Such an entry is a mistake (a typo, or an
// upstream removed), and before this check it showed only at run time, as
// a 404 model_not_found on the agent's first call of that model.
//
// The rule is conservative: an entry is reported only when no model name
// can match both it and one of the upstreams' models globs, the same
// path.Match globs the router and the allow-list check use. A literal entry
// is matched against every glob; for a glob entry, globOverlap decides
// exactly for '*', '?' and literals and assumes an overlap wherever two
// character classes ([a-z]) meet, so a glob is never refused wrongly.
func (l *loader) unroutedModels(n *yaml.Node, agents map[string]*roster.Agent, ups []upstream.Config) {
	var globs, literals []string
	for _, u := range ups {
		for _, g := range u.Models {
			if _, err := path.Match(g, ""); err != nil || g == "" {
				// Reported with the upstream; without every glob the
				// answer would be a guess.
				return
			}
			globs = append(globs, g)
			if !isGlob(g) {
				literals = append(literals, g)
			}
		}
	}
	if len(globs) == 0 {
		return // "at least one upstream is required" says it already
	}
	for _, id := range sortedKeys(agents) {
		for i, m := range agents[id].Models {
			if _, err := path.Match(m, ""); err != nil || m == "" {
				continue // reported as a bad glob
			}
			if routable(m, globs) {
				continue
			}
			line := lineOf(n, "agents", id, "models", strconv.Itoa(i))
			if isGlob(m) {
				l.add(AgentsFile, line, "agent %q: models: no model matching %q is served by any upstream in %s (their models: %s)",
					id, m, GatewayFile, strings.Join(globs, ", "))
				continue
			}
			l.add(AgentsFile, line, "agent %q: models: %q is served by no upstream in %s (their models: %s)%s",
				id, m, GatewayFile, strings.Join(globs, ", "), confkit.DidYouMean(m, literals))
		}
	}
}

// routable reports whether some model name matches both the allow-list
// entry and one of the upstream globs.
func routable(entry string, globs []string) bool {
	for _, g := range globs {
		if globOverlap(entry, g) {
			return true
		}
	}
	return false
}

// isGlob reports whether s has path.Match's special characters.
func isGlob(s string) bool { return strings.ContainsAny(s, `*?[\`) }

// globToken is one element of a path.Match pattern.
type globToken struct {
	kind byte   // '*' any run, '?' any one character, '[' a class, 'c' a literal
	lit  rune   // the literal, for 'c'
	raw  string // the class as written ("[a-z]"), for '['
}

// tokenize splits a valid path.Match pattern; runs of '*' are one.
func tokenize(p string) []globToken {
	var out []globToken
	rs := []rune(p)
	for i := 0; i < len(rs); i++ {
		switch c := rs[i]; c {
		case '*':
			if len(out) == 0 || out[len(out)-1].kind != '*' {
				out = append(out, globToken{kind: '*'})
			}
		case '?':
			out = append(out, globToken{kind: '?'})
		case '\\':
			i++
			out = append(out, globToken{kind: 'c', lit: rs[i]})
		case '[':
			j := i + 1
			if j < len(rs) && rs[j] == '^' {
				j++
			}
			// The first character of a class may be ']' only when escaped;
			// path.Match has validated the pattern, so a ']' ends it.
			for ; rs[j] != ']'; j++ {
				if rs[j] == '\\' {
					j++
				}
			}
			out = append(out, globToken{kind: '[', raw: string(rs[i : j+1])})
			i = j
		default:
			out = append(out, globToken{kind: 'c', lit: c})
		}
	}
	return out
}

// globOverlap reports whether some string matches both path.Match
// patterns a and b, both valid. It walks the two patterns together (the
// product of their automata): a '*' may match nothing or take the next
// character the other pattern demands; path.Match's '*' and '?' never
// match '/'. Where two classes, or a class and '?', meet, it answers true
// without checking that they share a character: a false "yes" only lets a
// useless entry through, a false "no" would refuse a valid config.
func globOverlap(a, b string) bool {
	p, q := tokenize(a), tokenize(b)
	// memo[i][j]: 0 unknown, 1 overlap, 2 none, for p[i:] and q[j:].
	memo := make([][]byte, len(p)+1)
	for i := range memo {
		memo[i] = make([]byte, len(q)+1)
	}
	var walk func(i, j int) bool
	walk = func(i, j int) bool {
		if memo[i][j] != 0 {
			return memo[i][j] == 1
		}
		pi, qj := i < len(p), j < len(q)
		ok := !pi && !qj
		if !ok && pi && p[i].kind == '*' {
			// p's star matches nothing more, or takes the character q[j]
			// demands.
			ok = walk(i+1, j) || qj && q[j].kind != '*' && starTakes(q[j]) && walk(i, j+1)
		}
		if !ok && qj && q[j].kind == '*' {
			ok = walk(i, j+1) || pi && p[i].kind != '*' && starTakes(p[i]) && walk(i+1, j)
		}
		if !ok && pi && qj && p[i].kind != '*' && q[j].kind != '*' {
			ok = meet(p[i], q[j]) && walk(i+1, j+1)
		}
		memo[i][j] = 2
		if ok {
			memo[i][j] = 1
		}
		return ok
	}
	return walk(0, 0)
}

// starTakes reports whether a '*' can match a character t matches: any
// but '/'.
func starTakes(t globToken) bool { return t.kind != 'c' || t.lit != '/' }

// meet reports whether two one-character tokens can match one character
// (assumed for two classes or a class and '?').
func meet(a, b globToken) bool {
	if b.kind == 'c' {
		a, b = b, a
	}
	if a.kind != 'c' {
		return true
	}
	switch b.kind {
	case 'c':
		return a.lit == b.lit
	case '?':
		return a.lit != '/'
	case '[':
		ok, err := path.Match(b.raw, string(a.lit))
		return ok && err == nil
	}
	panic(fmt.Sprintf("glob token kind %q", b.kind))
}
