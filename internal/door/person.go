package door

import (
	"net/http"
	"slices"
)

// Person is someone signed in to the gateway's pages or calling its
// people's APIs (approvals, the admin API): never an agent. A person acts
// only in the roles they hold here; the doors read them, they never take
// them from a request.
type Person struct {
	// Name is how the person appears in history and audit entries: the
	// reviewer's configured name, "admin", or the e-mail (else subject) a
	// sign-in with the organisation's provider gave.
	Name string
	// Subject and Email are the identity provider's, when the person signed
	// in through it; empty for a token sign-in.
	Subject string
	Email   string
	// Groups are the provider's groups claim of a provider sign-in (the
	// policy that decides which agents a person's MCP client may act as
	// reads them).
	Groups []string
	// Admin may do everything; Reviewer may see and decide every team's
	// escalations.
	Admin    bool
	Reviewer bool
	// TeamOwner are the teams whose agents, keys and budgets the person
	// manages; TeamReviewer the teams whose escalations they decide.
	TeamOwner    []string
	TeamReviewer []string
	// Via is how the person signed in: "token" or "oidc".
	Via string
	// CSRF is the session's form token when the person came with a page
	// session's cookie (empty for a bearer token): a door that changes
	// anything for a cookie must check it, and same origin, first.
	CSRF string
}

// OwnsTeam reports whether p may manage team's agents, keys and budgets.
func (p Person) OwnsTeam(team string) bool {
	return p.Admin || (team != "" && slices.Contains(p.TeamOwner, team))
}

// ReviewsTeam reports whether p may see and decide the escalations of an
// agent of team ("" for an agent in no team: admins and reviewers only).
func (p Person) ReviewsTeam(team string) bool {
	if p.Admin || p.Reviewer {
		return true
	}
	return team != "" && (slices.Contains(p.TeamReviewer, team) || slices.Contains(p.TeamOwner, team))
}

// PeopleAuth tells who the person behind a request is: a session cookie of the
// pages, or a person's bearer token. It never accepts an agent's
// credential: that is an error a door answers 403.
type PeopleAuth interface {
	// SignedIn returns the person, or an error in the caller's error shape
	// (apierror): 401 when nobody is signed in, 403 for an agent's token.
	SignedIn(r *http.Request) (Person, error)
}
