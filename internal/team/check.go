package team

import (
	"fmt"
	"maps"
	"slices"

	"github.com/sacpgw/gateway/internal/confkit"
)

// File is config/teams.yaml.
type File struct {
	Teams map[string]*Team `yaml:"teams"`
}

// CheckName reports why name is not a team name (nil when it is): 1-64 of
// a-z, 0-9, '_' and '-', starting with a letter or digit. Team names go
// into Redis keys, metrics, audit entries and page URLs, so they are
// plain and of one case.
func CheckName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("team name %q: want 1-64 of a-z, 0-9, '_' and '-'", clip(name))
	}
	for i, c := range name {
		ok := c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || (i > 0 && (c == '_' || c == '-'))
		if !ok {
			return fmt.Errorf("team name %q: want 1-64 of a-z, 0-9, '_' and '-', starting with a letter or digit", clip(name))
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

// Check fills in the teams' names and reports what is wrong with the file
// through r, whose keys are below teams. An empty entry is a team with no
// limits of its own (its agents are grouped, reviewed and counted
// together); a bad name is reported and the entry dropped.
func Check(r confkit.Reporter, teams map[string]*Team) {
	for _, name := range Names(teams) {
		t := teams[name]
		if err := CheckName(name); err != nil {
			r.Add(r.Line(name), "teams: %v", err)
			delete(teams, name)
			continue
		}
		if t == nil {
			t = &Team{}
			teams[name] = t
		}
		t.Name = name
		t.Runtime = false
	}
}

// CheckMember reports, at line, an agent whose team is not one of teams,
// with the closest name.
func CheckMember(r confkit.Reporter, line int, agent, team string, teams map[string]*Team) {
	if team == "" {
		return
	}
	if _, ok := teams[team]; ok {
		return
	}
	known := Names(teams)
	if len(known) == 0 {
		r.Add(line, "agent %q: team %q: no team is defined (add it to teams.yaml)", agent, team)
		return
	}
	r.Add(line, "agent %q: team %q is not a team of teams.yaml%s", agent, team, confkit.DidYouMean(team, known))
}

// Names are the teams' names in order.
func Names(teams map[string]*Team) []string { return slices.Sorted(maps.Keys(teams)) }
