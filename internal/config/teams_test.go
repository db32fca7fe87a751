package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// loadTeams loads okGateway and okProtocol with agents and, unless empty,
// teams.yaml.
func loadTeams(t *testing.T, agents, teams string) (*Config, error) {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{GatewayFile: okGateway, AgentsFile: agents, ProtocolFile: okProtocol}
	if teams != "" {
		files[TeamsFile] = teams
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return Load(dir, Options{LookupEnv: noEnv})
}

const teamAgents = okAgents + "    team: data-science\n"

// TestTeamsFile: teams.yaml gives each team its shared limits, and a
// team with no agents is fine.
func TestTeamsFile(t *testing.T) {
	cfg, err := loadTeams(t, teamAgents, "teams:\n  data-science:\n    description: models for the analysts\n    rate_limit: 100/minute\n    token_limit: 50000/hour\n    budget: 20USD/day\n  idle: {}\n")
	if err != nil {
		t.Fatal(err)
	}
	ds := cfg.Teams["data-science"]
	if ds == nil || ds.Name != "data-science" || ds.RateLimit != (Rate{N: 100, Period: time.Minute}) ||
		ds.TokenLimit.N != 50000 || ds.Budget.MicroUSD != 20_000_000 || ds.Runtime {
		t.Errorf("data-science = %+v", ds)
	}
	if idle := cfg.Teams["idle"]; idle == nil || idle.Name != "idle" || !idle.RateLimit.IsZero() {
		t.Errorf("idle = %+v, want a team without limits", idle)
	}
}

// TestTeamsProblems: every mistake is reported at its file and line, an
// agent's unknown team with the closest name.
func TestTeamsProblems(t *testing.T) {
	cases := []struct{ name, agents, teams, want string }{
		{"agent names an unknown team", okAgents + "    team: data-sciense\n", "teams:\n  data-science: {}\n",
			`agents.yaml:4: agent "a1": team "data-sciense" is not a team of teams.yaml (did you mean "data-science"?)`},
		{"agent names a team without teams.yaml", teamAgents, "",
			`agents.yaml:4: agent "a1": team "data-science": no team is defined (add it to teams.yaml)`},
		{"unknown key", teamAgents, "teams:\n  data-science:\n    budjet: 5USD/day\n", `teams.yaml:3: `},
		{"bad unit", teamAgents, "teams:\n  data-science:\n    rate_limit: 5/fortnight\n", `teams.yaml:3: `},
		{"bad name", okAgents, "teams:\n  Data Science: {}\n", `teams.yaml:2: teams: team name "Data Science"`},
		{"unknown top-level key", okAgents, "team:\n  a: {}\n", `teams.yaml:1: `},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := loadTeams(t, c.agents, c.teams)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}

// TestExplainTeams: config explain says where a team's limit was set.
func TestExplainTeams(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, okGateway, teamAgents, okProtocol)
	if err := os.WriteFile(filepath.Join(dir, TeamsFile), []byte("teams:\n  data-science:\n    rate_limit: 100/minute\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, settings, err := Explain(dir, Options{LookupEnv: noEnv})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range settings {
		if strings.Contains(s.Key, "data-science") && strings.HasSuffix(s.Key, "rate_limit") {
			if want := filepath.Join(dir, TeamsFile) + ":3"; s.Source != want || s.Value != "100/minute" {
				t.Errorf("%+v, want 100/minute from %s", s, want)
			}
			return
		}
	}
	t.Errorf("no team rate_limit in %+v", settings)
}
