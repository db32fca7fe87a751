package confkit

import (
	"fmt"
	"strings"
)

// DidYouMean is the hint appended to an "unknown X" problem whose known set
// is at hand: ` (did you mean "listen"?)` when one known name is close to
// what was written, else "". A typo is fixed in the file the operator is
// already looking at, instead of in a reading of the reference. The loader
// and the command line's own unknown names (an audit --kind) suggest by
// this one rule.
func DidYouMean(got string, known []string) string {
	if s, ok := closest(got, known); ok {
		return fmt.Sprintf(" (did you mean %q?)", s)
	}
	return ""
}

// closest returns the known name nearest to got, if it is near enough to be
// a typo of it rather than another word: an edit distance (insertions,
// deletions, substitutions and swaps of neighbours, letter case and '-'
// for '_' ignored) of at most 2, and at most a third of the name's length,
// so that short names do not suggest each other ("ssn" is not a typo of
// "jwt"). Ties go to the first in known, so the hint is stable.
func closest(got string, known []string) (string, bool) {
	g := fold(got)
	best, bestD := "", -1
	for _, k := range known {
		if k == got {
			// The name is known: whatever the caller is reporting, it is
			// not a typo.
			return "", false
		}
		d := editDistance(g, fold(k))
		if d > 2 || 3*d > len([]rune(k)) {
			continue
		}
		if bestD < 0 || d < bestD {
			best, bestD = k, d
		}
	}
	return best, bestD >= 0
}

// fold is a name as the comparison sees it: "Rate-Limit" is "rate_limit".
func fold(s string) string { return strings.ReplaceAll(strings.ToLower(s), "-", "_") }

// editDistance is the optimal string alignment distance of a and b: the
// Levenshtein distance with a swap of two neighbouring characters counting
// as one edit ("mdoel" is one edit from "model"), over runes.
func editDistance(a, b string) int {
	s, t := []rune(a), []rune(b)
	// Three rows of the dynamic programming table: i-2, i-1 and i.
	prev2 := make([]int, len(t)+1)
	prev := make([]int, len(t)+1)
	cur := make([]int, len(t)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(s); i++ {
		cur[0] = i
		for j := 1; j <= len(t); j++ {
			cost := 1
			if s[i-1] == t[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && s[i-1] == t[j-2] && s[i-2] == t[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(t)]
}
