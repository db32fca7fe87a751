// Package people is how the gateway knows the people who use its pages:
// gateway.yaml's people section (OpenID Connect sign-in, whether the
// admin's and reviewers' tokens still sign in to the pages) and the
// relying party that signs a person in with the organisation's provider
// (authorization code with PKCE, state and nonce) and maps the groups the
// provider names to the gateway's roles. It is below the doors: the
// review pages (package approval) keep the sessions.
package people

import (
	"fmt"
	"net"
	"net/url"
	"slices"
	"sort"

	"github.com/sacpgw/gateway/internal/confkit"
)

// Settings is gateway.yaml's people.
type Settings struct {
	// TokenSignIn lets a person sign in to the pages with the admin's or a
	// reviewer's token (automation, the shipped demo). Default true; false
	// leaves the organisation's provider the only way in to the pages.
	TokenSignIn *bool `yaml:"token_sign_in"`
	// OIDC signs people in with the organisation's OpenID Connect
	// provider. Nil: no such sign-in.
	OIDC *OIDC `yaml:"oidc"`
}

// TokensSignIn reports whether the pages take a token sign-in.
func (s *Settings) TokensSignIn() bool { return s.TokenSignIn == nil || *s.TokenSignIn }

// OIDC is people.oidc: the provider, the gateway's registration with it,
// and which of the provider's groups hold which role here.
type OIDC struct {
	// Issuer is the provider's issuer URL; its discovery document is at
	// <issuer>/.well-known/openid-configuration.
	Issuer string `yaml:"issuer"`
	// ClientID and ClientSecret are the gateway's registration (a
	// confidential web client; write the secret as ${VAR}).
	ClientID     string `yaml:"client_id"`
	ClientSecret string `yaml:"client_secret"`
	// RedirectURL is the callback registered with the provider. Default:
	// approval.base_url (else the address the browser used) +
	// /review/oidc/callback.
	RedirectURL string `yaml:"redirect_url"`
	// Scopes asked for. Default openid, email, profile; "openid" is always
	// asked for.
	Scopes []string `yaml:"scopes"`
	// GroupsClaim is the ID token claim that lists the person's groups.
	// Default "groups".
	GroupsClaim string `yaml:"groups_claim"`
	// Roles map groups to roles; a person in none of them is refused.
	Roles Roles `yaml:"roles"`
}

// Roles names, per role, the provider's groups that hold it.
type Roles struct {
	// Admins may do everything; Reviewers see and decide every team's
	// escalations.
	Admins    []string `yaml:"admins"`
	Reviewers []string `yaml:"reviewers"`
	// TeamOwners and TeamReviewers map a team's name to its groups: its
	// owners manage its agents and keys, its reviewers decide its agents'
	// escalations (owners do too).
	TeamOwners    map[string][]string `yaml:"team_owners"`
	TeamReviewers map[string][]string `yaml:"team_reviewers"`
}

// CallbackPath is where the provider sends the browser back.
const CallbackPath = "/review/oidc/callback"

// Check fills in the defaults and reports what is wrong through r.
func (s *Settings) Check(r confkit.Reporter) {
	o := s.OIDC
	if o == nil {
		if !s.TokensSignIn() {
			r.Add(r.Line("token_sign_in"), "people.token_sign_in is false and people.oidc is not set: nobody could sign in to the pages")
		}
		return
	}
	o.check(confkit.Sub(r, "oidc"))
}

func (o *OIDC) check(r confkit.Reporter) {
	if !issuerOK(o.Issuer) {
		r.Add(r.Line("issuer"), "people.oidc.issuer %q: want an https URL (http only on a loopback address, for tests)", o.Issuer)
	}
	if o.ClientID == "" {
		r.Add(r.Line("client_id"), "people.oidc.client_id: required (the gateway's client at the provider)")
	}
	if o.ClientSecret == "" {
		r.Add(r.Line("client_secret"), "people.oidc.client_secret: required; write it as ${VAR}")
	}
	if o.RedirectURL != "" && !confkit.HTTPURL(o.RedirectURL) {
		r.Add(r.Line("redirect_url"), "people.oidc.redirect_url %q: want an absolute http(s) URL ending in %s", o.RedirectURL, CallbackPath)
	}
	if len(o.Scopes) == 0 {
		o.Scopes = []string{"openid", "email", "profile"}
	}
	if !slices.Contains(o.Scopes, "openid") {
		o.Scopes = append([]string{"openid"}, o.Scopes...)
	}
	if o.GroupsClaim == "" {
		o.GroupsClaim = "groups"
	}
	ro := o.Roles
	if len(ro.Admins)+len(ro.Reviewers)+len(ro.TeamOwners)+len(ro.TeamReviewers) == 0 {
		r.Add(r.Line("roles"), "people.oidc.roles: map at least one group to a role (admins, reviewers, team_owners, team_reviewers); nobody could sign in")
	}
	for _, key := range []string{"team_owners", "team_reviewers"} {
		m := ro.TeamOwners
		if key == "team_reviewers" {
			m = ro.TeamReviewers
		}
		for team, groups := range m {
			if team == "" || len(groups) == 0 {
				r.Add(r.Line("roles", key), "people.oidc.roles.%s: team %q needs a name and at least one group", key, team)
			}
		}
	}
}

// issuerOK accepts an https URL, or http on a loopback address: the
// discovery document and the keys that sign ID tokens must not travel in
// clear between hosts.
func issuerOK(s string) bool {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	if u.Scheme == "https" {
		return true
	}
	ip := net.ParseIP(u.Hostname())
	return u.Scheme == "http" && (u.Hostname() == "localhost" || (ip != nil && ip.IsLoopback()))
}

// Roles a person holds, from their groups.
type Held struct {
	Admin, Reviewer         bool
	TeamOwner, TeamReviewer []string
}

// Any reports whether h holds any role.
func (h Held) Any() bool {
	return h.Admin || h.Reviewer || len(h.TeamOwner) > 0 || len(h.TeamReviewer) > 0
}

// RolesFor maps groups (the groups claim) to the roles they hold.
func (o *OIDC) RolesFor(groups []string) Held {
	in := func(gs []string) bool {
		return slices.ContainsFunc(gs, func(g string) bool { return slices.Contains(groups, g) })
	}
	teams := func(m map[string][]string) []string {
		var out []string
		for team, gs := range m {
			if in(gs) {
				out = append(out, team)
			}
		}
		sort.Strings(out)
		return out
	}
	return Held{Admin: in(o.Roles.Admins), Reviewer: in(o.Roles.Reviewers),
		TeamOwner: teams(o.Roles.TeamOwners), TeamReviewer: teams(o.Roles.TeamReviewers)}
}

// Role is how h appears in history and audit entries: its widest role.
func (h Held) Role() string {
	switch {
	case h.Admin:
		return "admin"
	case h.Reviewer:
		return "reviewer"
	case len(h.TeamOwner) > 0:
		return "team_owner"
	}
	return "team_reviewer"
}

// String is h for logs.
func (h Held) String() string {
	return fmt.Sprintf("%s (owner of %v, reviewer of %v)", h.Role(), h.TeamOwner, h.TeamReviewer)
}
