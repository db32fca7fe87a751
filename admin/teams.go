package admin

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/team"
)

// TeamView is a team as the API shows it: its fields, and its members
// (the agents, the file's and the run-time ones, that name it).
type TeamView struct {
	Name    string          `json:"name"`
	Runtime bool            `json:"runtime"`
	Spec    json.RawMessage `json:"spec"`
	Members []string        `json:"members"`
	Created time.Time       `json:"created_at,omitzero"`
	Updated time.Time       `json:"updated_at,omitzero"`
	By      string          `json:"updated_by,omitempty"`
}

// members are the agents of team, by name.
func (a *API) members(r *http.Request, team string) ([]string, error) {
	out := []string{}
	for id, f := range a.fileAgents() {
		if f.Team == team {
			out = append(out, id)
		}
	}
	stored, err := a.d.Store.Agents(r.Context())
	if err != nil {
		return nil, stateErr(err)
	}
	for _, s := range stored {
		if specTeam(s.Spec) == team {
			out = append(out, s.Name)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func (a *API) teamView(r *http.Request, t Team) (TeamView, error) {
	m, err := a.members(r, t.Name)
	if err != nil {
		return TeamView{}, err
	}
	return TeamView{Name: t.Name, Runtime: true, Spec: t.Spec, Members: m, Created: t.Created, Updated: t.Updated, By: t.By}, nil
}

// fileTeamView is teams.yaml's team t as the API shows it: not run-time,
// its spec the file's fields in their units.
func (a *API) fileTeamView(r *http.Request, t *team.Team) (TeamView, error) {
	m, err := a.members(r, t.Name)
	if err != nil {
		return TeamView{}, err
	}
	spec := map[string]string{}
	if t.Description != "" {
		spec["description"] = t.Description
	}
	if !t.RateLimit.IsZero() {
		spec["rate_limit"] = t.RateLimit.String()
	}
	if !t.TokenLimit.IsZero() {
		spec["token_limit"] = t.TokenLimit.String()
	}
	if !t.Budget.IsZero() {
		spec["budget"] = t.Budget.String()
	}
	raw, _ := json.Marshal(spec)
	return TeamView{Name: t.Name, Spec: raw, Members: m}, nil
}

// inFile refuses a change to a team teams.yaml defines: the file is the
// source of truth for it.
func (a *API) inFile(name string) error {
	if _, ok := a.cfg.Load().Teams[name]; ok {
		return conflict("team_in_file", "Team "+quote(name)+" is defined in teams.yaml: change it there.")
	}
	return nil
}

// team finds name if p owns it; else 404.
func (a *API) team(r *http.Request, p door.Person, name string) (Team, error) {
	if !p.OwnsTeam(name) {
		return Team{}, notFound("Team", name)
	}
	if err := a.inFile(name); err != nil {
		return Team{}, err
	}
	t, err := a.d.Store.StoredTeam(r.Context(), name)
	if err != nil {
		return Team{}, stored(err, "Team", name)
	}
	return t, nil
}

// teamTarget is the person and the team the path names, which they own.
func (a *API) teamTarget(r *http.Request, mutate bool) (door.Person, Team, error) {
	return pathTarget(a, r, mutate, "team", a.team)
}

func (a *API) listTeams(w http.ResponseWriter, r *http.Request) error {
	p, err := a.person(r, false)
	if err != nil {
		return err
	}
	all, err := a.d.Store.Teams(r.Context())
	if err != nil {
		return stateErr(err)
	}
	out := []TeamView{}
	for _, name := range slices.Sorted(maps.Keys(a.cfg.Load().Teams)) {
		if !p.OwnsTeam(name) {
			continue
		}
		v, err := a.fileTeamView(r, a.cfg.Load().Teams[name])
		if err != nil {
			return err
		}
		out = append(out, v)
	}
	for _, t := range all {
		if !p.OwnsTeam(t.Name) {
			continue
		}
		v, err := a.teamView(r, t)
		if err != nil {
			return err
		}
		out = append(out, v)
	}
	httpx.WriteJSON(w, r, http.StatusOK, map[string]any{"teams": out})
	return nil
}

func (a *API) getTeam(w http.ResponseWriter, r *http.Request) error {
	p, err := a.person(r, false)
	if err != nil {
		return err
	}
	if ft, ok := a.cfg.Load().Teams[r.PathValue("team")]; ok && p.OwnsTeam(ft.Name) {
		v, err := a.fileTeamView(r, ft)
		if err != nil {
			return err
		}
		httpx.WriteJSON(w, r, http.StatusOK, v)
		return nil
	}
	_, t, err := a.teamTarget(r, false)
	if err != nil {
		return err
	}
	return a.writeTeam(w, r, http.StatusOK, t)
}

func (a *API) createTeam(w http.ResponseWriter, r *http.Request) error {
	p, err := a.person(r, true)
	if err != nil {
		return err
	}
	if err := adminOnly(p, "create teams"); err != nil {
		return err
	}
	b, err := readJSON(r, teamFields, nil)
	if err != nil {
		return err
	}
	if b.Name == nil {
		return apierror.BadRequest("name", "name is required.")
	}
	name := *b.Name
	if _, err := teamOf(name, b.Fields); err != nil {
		return err
	}
	if err := a.inFile(name); err != nil {
		return err
	}
	t := Team{a.entry(name, b.Fields, p)}
	if err := created(a.d.Store.CreateTeam(r.Context(), t), "Team", name); err != nil {
		return err
	}
	if err := a.record(r, p, "admin.team.create", "", teamFact(name, b.Fields)); err != nil {
		return err
	}
	return a.writeTeam(w, r, http.StatusCreated, t)
}

func (a *API) writeTeam(w http.ResponseWriter, r *http.Request, status int, t Team) error {
	v, err := a.teamView(r, t)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, r, status, v)
	return nil
}

func (a *API) patchTeam(w http.ResponseWriter, r *http.Request) error {
	p, cur, err := a.teamTarget(r, true)
	if err != nil {
		return err
	}
	b, err := readJSON(r, teamFields, nil)
	if err != nil {
		return err
	}
	if b.Name != nil && *b.Name != cur.Name {
		return apierror.BadRequest("name", "A team cannot be renamed.")
	}
	fields, err := merge(cur.Spec, b.Fields)
	if err != nil {
		return err
	}
	if _, err := teamOf(cur.Name, fields); err != nil {
		return err
	}
	spec, _ := json.Marshal(fields)
	t, err := a.d.Store.UpdateTeam(r.Context(), cur.Name, func(t *Team) error {
		t.Spec, t.Updated, t.By = spec, a.now().UTC(), p.Name
		return nil
	})
	if err != nil {
		return stored(err, "Team", cur.Name)
	}
	if err := a.record(r, p, "admin.team.update", "", teamFact(cur.Name, b.Fields)); err != nil {
		return err
	}
	return a.writeTeam(w, r, http.StatusOK, t)
}

func (a *API) deleteTeam(w http.ResponseWriter, r *http.Request) error {
	p, t, err := a.teamTarget(r, true)
	if err != nil {
		return err
	}
	if err := adminOnly(p, "delete teams"); err != nil {
		return err
	}
	m, err := a.members(r, t.Name)
	if err != nil {
		return err
	}
	if len(m) > 0 {
		// Its agents would be left naming a team that is gone, whose
		// limits no longer bind them.
		return conflict("team_not_empty", "Team "+quote(t.Name)+" still has agents; move or delete them first.")
	}
	if err := a.d.Store.DeleteTeam(r.Context(), t.Name); err != nil {
		return stored(err, "Team", t.Name)
	}
	if err := a.record(r, p, "admin.team.delete", "", teamFact(t.Name, nil)); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

func teamFact(name string, fields map[string]json.RawMessage) func(o *audit.Object) {
	return func(o *audit.Object) {
		o.Str("team", name)
		fieldsFact(fields)(o)
	}
}
