// Package team is a team of agents: the limits and budgets its agents
// share on top of each agent's own, and the people who own and review
// it. Teams come from config/teams.yaml and from the admin API; the
// limits stage, the policy input and the review pages read them through
// one Source, so a team created at run time is enforced like a file's.
package team

import (
	"context"

	"github.com/sacpgw/gateway/internal/confkit"
)

// Team is one team.
type Team struct {
	// Name is the key of the entry in teams.yaml, or the name given to
	// the admin API: 1-64 of a-z, 0-9, '_' and '-'.
	Name        string `yaml:"-"`
	Description string `yaml:"description"`
	// RateLimit bounds the requests of all the team's agents together.
	// Zero: no team bound.
	RateLimit confkit.Rate `yaml:"rate_limit"`
	// TokenLimit bounds their prompt+completion tokens together.
	TokenLimit confkit.Rate `yaml:"token_limit"`
	// Budget bounds their spend on models together ("500USD/month").
	Budget confkit.Money `yaml:"budget"`
	// Runtime is set on a team created through the admin API (never read
	// from teams.yaml).
	Runtime bool `yaml:"-"`
}

// Source finds teams by name: the file's and the runtime ones.
type Source interface {
	Team(ctx context.Context, name string) (*Team, bool, error)
}
