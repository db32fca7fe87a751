// Package names is the one rule for the names agents go by: configured
// agent ids and the names of agents spawned at run time. They appear in
// logs, audit entries, metrics labels, Redis keys and the review page, so
// they are short, plain and never markup.
package names

import (
	"fmt"
	"regexp"
	"strings"
)

// Pattern is what an agent name looks like: a letter or digit, then up to
// 62 letters, digits, '_', '.' or '-'. Letters of either case: the
// protocol's own examples name spawned agents VISA_AGENT and configured ones
// vendor_onboarding_agent.
const Pattern = `^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`

var pattern = regexp.MustCompile(Pattern)

// reserved are the names the gateway itself uses as a sender.
var reserved = []string{"gateway", "human"}

// Check reports why s is not a valid agent name (nil when it is).
func Check(s string) error {
	if !pattern.MatchString(s) {
		return fmt.Errorf("%q is not a valid agent name (%s)", clip(s), Pattern)
	}
	for _, r := range reserved {
		if strings.EqualFold(s, r) {
			return fmt.Errorf("%q is reserved for the gateway", s)
		}
	}
	return nil
}

func clip(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// Symbol reports whether s is a name as compact SACP plans and envelopes
// carry them (a registry verb or tool, a message action): 1-64 letters,
// digits, '_', '-', '.' or ':'.
func Symbol(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, c := range s {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.' || c == ':') {
			return false
		}
	}
	return true
}
