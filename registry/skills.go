package registry

import (
	"slices"
	"strings"
)

// Skill is one skill of an A2A agent's Agent Card: what POST
// /registry/query matches beside the agent's configured fields.
type Skill struct {
	ID          string   `json:"id"`
	Name        string   `json:"name"`
	Description string   `json:"description,omitempty"`
	Tags        []string `json:"tags,omitempty"`
}

// SetSkills lists skills as the configured agent's (nil: none), from the
// next query on. The A2A door calls it with each card it reads; a
// configuration reload keeps them for the agents it keeps.
func (r *Registry) SetSkills(agent string, skills []Skill) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.skills == nil {
		r.skills = map[string][]Skill{}
	}
	if len(skills) == 0 {
		delete(r.skills, agent)
	} else {
		r.skills[agent] = slices.Clone(skills)
	}
	r.static, r.cached = withSkills(r.base, r.skills), nil
}

// withSkills is base with each agent's skills added, and their tags
// among its tags; base itself is not changed.
func withSkills(base []Entry, skills map[string][]Skill) []Entry {
	if len(skills) == 0 {
		return base
	}
	out := slices.Clone(base)
	for i, e := range out {
		s := skills[e.AgentName]
		if len(s) == 0 {
			continue
		}
		e.Skills = s
		e.Tags = slices.Clone(e.Tags)
		for _, sk := range s {
			for _, t := range sk.Tags {
				if !slices.Contains(e.Tags, t) {
					e.Tags = append(e.Tags, t)
				}
			}
		}
		out[i] = e
	}
	return out
}

// skillsText is the skills in an agent's profile text.
func skillsText(skills []Skill) string {
	parts := make([]string, 0, len(skills))
	for _, s := range skills {
		p := s.ID
		if s.Name != "" && s.Name != s.ID {
			p += " (" + s.Name + ")"
		}
		if d := strings.TrimSpace(s.Description); d != "" {
			p += ": " + d
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, "; ")
}
