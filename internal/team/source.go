package team

import (
	"context"
	"fmt"
)

// Static is a Source over a fixed set of teams: teams.yaml's, as the
// loader read it. A nil Static knows no team.
type Static map[string]*Team

// Team implements Source.
func (s Static) Team(_ context.Context, name string) (*Team, bool, error) {
	t, ok := s[name]
	return t, ok && t != nil, nil
}

// Combined finds a team in the file first, then among the runtime ones: a
// runtime team may not take a name the file defines (the admin API refuses
// it), so the file's definition is the one that holds.
type Combined struct {
	File    Static
	Runtime Source // nil: the file's teams only
}

// Team implements Source.
func (c Combined) Team(ctx context.Context, name string) (*Team, bool, error) {
	if t, ok := c.File[name]; ok && t != nil {
		return t, true, nil
	}
	if c.Runtime == nil {
		return nil, false, nil
	}
	t, ok, err := c.Runtime.Team(ctx, name)
	if err != nil {
		return nil, false, fmt.Errorf("team %s: %w", name, err)
	}
	return t, ok && t != nil, nil
}
