package config

import (
	"slices"
	"strings"
	"testing"
)

const okPeople = "people:\n  oidc:\n    issuer: https://login.example.org\n    client_id: gateway\n    client_secret: ${OIDC_SECRET}\n" +
	"    groups_claim: roles\n    roles:\n      admins: [gw-admins]\n      team_reviewers:\n        data: [ds-reviewers]\n"

// people.oidc loads with its defaults, its secret from the environment,
// and the secret never shown by config check --explain.
func TestPeopleOIDCLoads(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, okGateway+okPeople, okAgents, okProtocol)
	cfg, settings, err := Explain(dir, Options{LookupEnv: func(k string) (string, bool) { return "s3cret-value", k == "OIDC_SECRET" }})
	if err != nil {
		t.Fatal(err)
	}
	o := cfg.Gateway.People.OIDC
	if o == nil || o.ClientSecret != "s3cret-value" || o.GroupsClaim != "roles" || !slices.Equal(o.Scopes, []string{"openid", "email", "profile"}) ||
		!slices.Equal(o.Roles.TeamReviewers["data"], []string{"ds-reviewers"}) || !cfg.Gateway.People.TokensSignIn() {
		t.Fatalf("people = %+v %+v", cfg.Gateway.People, o)
	}
	for _, s := range settings {
		if strings.Contains(s.Value, "s3cret-value") {
			t.Fatalf("explain shows the client secret: %s = %s", s.Key, s.Value)
		}
	}
}

func TestPeopleProblems(t *testing.T) {
	cases := []struct{ note, gw, want string }{
		{"http issuer", strings.Replace(okPeople, "https://login", "http://login", 1), `gateway.yaml:7: people.oidc.issuer "http://login.example.org": want an https URL`},
		{"no client", strings.Replace(okPeople, "    client_id: gateway\n", "", 1), "gateway.yaml:6: people.oidc.client_id: required"},
		{"empty secret", okPeople, "gateway.yaml:9: people.oidc.client_secret: required"},
		{"no roles", strings.SplitAfter(okPeople, "groups_claim: roles\n")[0], "people.oidc.roles: map at least one group"},
		{"team without groups", okPeople + "      team_owners:\n        data: []\n", `people.oidc.roles.team_owners: team "data" needs a name and at least one group`},
		{"unknown key", okPeople + "    group_claim: x\n", `unknown key "group_claim" in people.oidc`},
		{"nobody could sign in", "people:\n  token_sign_in: false\n", "gateway.yaml:6: people.token_sign_in is false and people.oidc is not set"},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			_, err := loadFiles(t, okGateway+tc.gw, okAgents, okProtocol, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("problems:\n%v\nwant one containing %q", err, tc.want)
			}
		})
	}
}
