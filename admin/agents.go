package admin

import (
	"encoding/json"
	"errors"
	"net/http"
	"slices"
	"time"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/roster"
)

// agentRef is an agent the person may see: agents.yaml's (file) or one
// created here (stored).
type agentRef struct {
	name   string
	team   string
	file   *roster.Agent
	stored *Agent
}

// AgentView is an agent as the API shows it: the entry's fields of a
// run-time agent, and what the file's agents show of theirs (never a
// token hash).
type AgentView struct {
	Name     string          `json:"name"`
	Runtime  bool            `json:"runtime"`
	Disabled bool            `json:"disabled"`
	Team     string          `json:"team,omitempty"`
	Type     string          `json:"type,omitempty"`
	Spec     json.RawMessage `json:"spec,omitempty"`
	Created  *time.Time      `json:"created_at,omitempty"`
	Updated  *time.Time      `json:"updated_at,omitempty"`
	By       string          `json:"updated_by,omitempty"`
}

func (ref agentRef) view() AgentView {
	if ref.file != nil {
		return AgentView{Name: ref.name, Team: ref.team, Type: ref.file.Type}
	}
	s := ref.stored
	v := AgentView{Name: s.Name, Runtime: true, Disabled: s.Disabled, Team: ref.team, Spec: s.Spec, Created: &s.Created, Updated: &s.Updated, By: s.By}
	var head struct {
		Type string `json:"type"`
	}
	_ = json.Unmarshal(s.Spec, &head)
	v.Type = head.Type
	return v
}

// specTeam is the team: field of a stored entry.
func specTeam(spec json.RawMessage) string {
	var head struct {
		Team string `json:"team"`
	}
	_ = json.Unmarshal(spec, &head)
	return head.Team
}

// agents lists every agent p may see: the file's, then the run-time ones.
func (a *API) agents(r *http.Request, p door.Person) ([]agentRef, error) {
	var out []agentRef
	file := a.fileAgents()
	for _, id := range roster.IDs(file) {
		if f := file[id]; p.OwnsTeam(f.Team) {
			out = append(out, agentRef{name: id, team: f.Team, file: f})
		}
	}
	stored, err := a.d.Store.Agents(r.Context())
	if err != nil {
		return nil, stateErr(err)
	}
	for i := range stored {
		s := &stored[i]
		if t := specTeam(s.Spec); p.OwnsTeam(t) && file[s.Name] == nil {
			out = append(out, agentRef{name: s.Name, team: t, stored: s})
		}
	}
	return out, nil
}

// agent finds name among what p may see; another team's agent is 404.
func (a *API) agent(r *http.Request, p door.Person, name string) (agentRef, error) {
	if f := a.fileAgents()[name]; f != nil {
		if !p.OwnsTeam(f.Team) {
			return agentRef{}, notFound("Agent", name)
		}
		return agentRef{name: name, team: f.Team, file: f}, nil
	}
	s, err := a.d.Store.Agent(r.Context(), name)
	switch {
	case errors.Is(err, ErrNotFound):
		return agentRef{}, notFound("Agent", name)
	case err != nil:
		return agentRef{}, stateErr(err)
	}
	t := specTeam(s.Spec)
	if !p.OwnsTeam(t) {
		return agentRef{}, notFound("Agent", name)
	}
	return agentRef{name: name, team: t, stored: &s}, nil
}

// target is the person and the agent the path names, which they may see.
func (a *API) target(r *http.Request, mutate bool) (door.Person, agentRef, error) {
	return pathTarget(a, r, mutate, "name", a.agent)
}

// runtimeTarget is target for a change (verb) of a run-time agent: an
// agent of the file is refused, it changes in agents.yaml only.
func (a *API) runtimeTarget(r *http.Request, verb string) (door.Person, agentRef, error) {
	p, ref, err := a.target(r, true)
	if err == nil && ref.file != nil {
		err = conflict("agent_in_file", "Agent "+quote(ref.name)+" is defined in agents.yaml: "+verb+" it there.")
	}
	return p, ref, err
}

func (a *API) listAgents(w http.ResponseWriter, r *http.Request) error {
	p, err := a.person(r, false)
	if err != nil {
		return err
	}
	out, err := a.agentViews(r, p)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, r, http.StatusOK, map[string]any{"agents": out})
	return nil
}

// agentViews are the agents p may see, as the API and the console show
// them.
func (a *API) agentViews(r *http.Request, p door.Person) ([]AgentView, error) {
	refs, err := a.agents(r, p)
	if err != nil {
		return nil, err
	}
	views := make([]AgentView, 0, len(refs))
	for _, ref := range refs {
		views = append(views, ref.view())
	}
	return views, nil
}

func (a *API) getAgent(w http.ResponseWriter, r *http.Request) error {
	_, ref, err := a.target(r, false)
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, r, http.StatusOK, ref.view())
	return nil
}

// readJSON reads a request body of the API: at most maxBody bytes, a
// JSON object of the entry's known fields (agentFields or teamFields).
func readJSON(r *http.Request, known []string, refuse func(string) string) (body, error) {
	raw, err := httpx.ReadLimited(r, maxBody)
	if err != nil {
		return body{}, err
	}
	return readBody(raw, known, refuse)
}

// agentBody reads an agent's body: the entry's fields and, on a PATCH,
// "disabled".
func agentBody(r *http.Request, patch bool) (body, *bool, error) {
	known := agentFields
	if patch {
		known = append(slices.Clip(agentFields), "disabled")
	}
	b, err := readJSON(r, known, refuseFileOnly)
	if err != nil {
		return body{}, nil, err
	}
	raw, ok := b.Fields["disabled"]
	if !ok {
		return b, nil, nil
	}
	delete(b.Fields, "disabled")
	var d bool
	if err := json.Unmarshal(raw, &d); err != nil {
		return body{}, nil, apierror.BadRequest("disabled", "disabled must be true or false.")
	}
	return b, &d, nil
}

// checked validates an entry's fields as agents.yaml's: the team the
// person may put it in and that exists, then the entry itself.
func (a *API) checked(r *http.Request, p door.Person, name string, fields map[string]json.RawMessage) (*roster.Agent, error) {
	var others map[string]*roster.Agent
	if _, ok := fields["messages"]; ok {
		// Recipients must exist: the file's agents and the run-time ones.
		others = map[string]*roster.Agent{}
		for id, f := range a.fileAgents() {
			others[id] = f
		}
		stored, err := a.d.Store.Agents(r.Context())
		if err != nil {
			return nil, stateErr(err)
		}
		for _, s := range stored {
			others[s.Name] = &roster.Agent{ID: s.Name}
		}
	}
	ag, err := agentOf(name, fields, others)
	if err != nil {
		return nil, err
	}
	if !p.OwnsTeam(ag.Team) {
		return nil, apierror.Forbidden("You may put agents only in a team you own.")
	}
	if ag.Team != "" {
		_, ok, err := a.teams().Team(r.Context(), ag.Team)
		switch {
		case err != nil:
			return nil, stateErr(err)
		case !ok:
			return nil, apierror.BadRequest("team", "Unknown team %s: create it first (POST /admin/teams).", quote(ag.Team))
		}
	}
	return ag, nil
}

func (a *API) createAgent(w http.ResponseWriter, r *http.Request) error {
	p, err := a.person(r, true)
	if err != nil {
		return err
	}
	b, _, err := agentBody(r, false)
	if err != nil {
		return err
	}
	if b.Name == nil {
		return apierror.BadRequest("name", "name is required.")
	}
	name := *b.Name
	if err := checkAgentName(name); err != nil {
		return err
	}
	if a.fileAgents()[name] != nil {
		return conflict("agent_exists", "Agent "+quote(name)+" is defined in agents.yaml: change it there, or pick another name.")
	}
	if _, err := a.checked(r, p, name, b.Fields); err != nil {
		return err
	}
	s := Agent{Entry: a.entry(name, b.Fields, p)}
	if err := created(a.d.Store.CreateAgent(r.Context(), s), "Agent", name); err != nil {
		return err
	}
	if err := a.record(r, p, "admin.agent.create", name, fieldsFact(b.Fields)); err != nil {
		return err
	}
	httpx.WriteJSON(w, r, http.StatusCreated, agentRef{name: name, team: specTeam(s.Spec), stored: &s}.view())
	return nil
}

func (a *API) patchAgent(w http.ResponseWriter, r *http.Request) error {
	p, ref, err := a.runtimeTarget(r, "change")
	if err != nil {
		return err
	}
	b, disabled, err := agentBody(r, true)
	if err != nil {
		return err
	}
	if b.Name != nil && *b.Name != ref.name {
		return apierror.BadRequest("name", "An agent cannot be renamed: create the new one and delete this one.")
	}
	fields, err := merge(ref.stored.Spec, b.Fields)
	if err != nil {
		return err
	}
	if _, err := a.checked(r, p, ref.name, fields); err != nil {
		return err
	}
	spec, _ := json.Marshal(fields)
	s, err := a.d.Store.UpdateAgent(r.Context(), ref.name, func(cur *Agent) error {
		cur.Spec, cur.Updated, cur.By = spec, a.now().UTC(), p.Name
		if disabled != nil {
			cur.Disabled = *disabled
		}
		return nil
	})
	if err != nil {
		return stored(err, "Agent", ref.name)
	}
	kind := "admin.agent.update"
	if disabled != nil && len(b.Fields) == 0 {
		kind = map[bool]string{true: "admin.agent.disable", false: "admin.agent.enable"}[*disabled]
	}
	if err := a.record(r, p, kind, ref.name, fieldsFact(b.Fields)); err != nil {
		return err
	}
	httpx.WriteJSON(w, r, http.StatusOK, agentRef{name: s.Name, team: specTeam(s.Spec), stored: &s}.view())
	return nil
}

func (a *API) deleteAgent(w http.ResponseWriter, r *http.Request) error {
	p, ref, err := a.runtimeTarget(r, "remove")
	if err != nil {
		return err
	}
	if err := a.d.Store.DeleteAgent(r.Context(), ref.name); err != nil {
		return stored(err, "Agent", ref.name)
	}
	if err := a.record(r, p, "admin.agent.delete", ref.name, nil); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
