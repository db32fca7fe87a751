package config

import (
	"strconv"

	"github.com/sacpgw/gateway/internal/names"
)

// verbAliases checks the verbs' aliases in registry.yaml and returns them,
// each mapped to its verb's name. An alias is another name of a verb in
// plans (compact SACP's "s" for search); it follows the rule of verb names
// and must not be a verb's name or another alias, or a plan step would name
// two verbs at once. Every clash is reported at the alias's line.
//
// Aliases belong to messages only: supported_verbs, of tools here and of
// agents in agents.yaml, names verbs by their names, so that there is one
// spelling to compare a plan's verbs with once the compact library has
// resolved them (compact.Library.Resolve, PlanVerbs). The names reserved for
// plans' structure (join, define, instantiate) are left to the compact
// library's check, as for verb names.
func (l *loader) verbAliases(r *Registry, verbs map[string]bool, at func(p ...string) int) map[string]string {
	const f = RegistryFile
	aliases := map[string]string{}
	first := map[string]int{} // the line of each alias's first definition
	for i, v := range r.Verbs {
		for j, a := range v.Aliases {
			line := at("verbs", strconv.Itoa(i), "aliases", strconv.Itoa(j))
			switch {
			case !names.Symbol(a):
				l.add(f, line, "registry: verb %q: alias %q: want 1-64 letters, digits, '_', '-', '.' or ':'", v.Name, a)
				continue
			case verbs[a]:
				l.add(f, line, "registry: verb %q: alias %q is the name of a verb", v.Name, a)
				continue
			case aliases[a] != "":
				l.add(f, line, "registry: verb %q: alias %q is already an alias of verb %q (line %d)", v.Name, a, aliases[a], first[a])
				continue
			}
			aliases[a], first[a] = v.Name, line
		}
	}
	return aliases
}
