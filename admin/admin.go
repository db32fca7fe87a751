// Package admin is the admin API and console of the organisation: agents
// created at run time (beside agents.yaml's), the keys agents authenticate
// with (several per agent, optional expiry, shown once, stored as SHA-256,
// revoked at once on every replica) and teams. They live in the state
// backend (Redis, or the memory backend's file in state.dir) and survive
// restarts; agents.yaml stays the source of truth for its own agents: a
// run-time agent may not take a name the file defines.
//
// People reach it through door.PeopleAuth: the admin token or a signed-in
// admin does everything, a team owner only within the teams they own
// (another team's agent is 404, as if it did not exist), an agent's key is
// 403. A change by a page session's cookie needs its CSRF token and the
// page's origin. Every change is an admin.* audit entry naming the person.
package admin

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/internal/team"
)

// Deps are what the API needs; they outlive reloads.
type Deps struct {
	Store  *Store
	Keys   *Keys
	People door.PeopleAuth
	Audit  *door.Recorder
	Log    *slog.Logger
}

// API is the admin door.
type API struct {
	d   Deps
	now func() time.Time
	// cfg is the configuration in force: agents.yaml's agents.
	cfg atomic.Pointer[config.Config]
}

// New builds the door on cfg.
func New(cfg *config.Config, d Deps) (*API, error) {
	if d.Store == nil || d.Keys == nil || d.People == nil || d.Log == nil {
		return nil, errors.New("admin: Store, Keys, People and Log are required")
	}
	a := &API{d: d, now: time.Now}
	a.cfg.Store(cfg)
	return a, nil
}

// teams finds every team an agent's team: field may name: teams.yaml's
// (of the configuration in force) and the run-time ones.
func (a *API) teams() team.Source {
	return team.Combined{File: a.cfg.Load().Teams, Runtime: a.d.Keys}
}

// Prepare implements door.Door: the new agents.yaml's names.
func (a *API) Prepare(cfg *config.Config) (func(), error) {
	return func() { a.cfg.Store(cfg) }, nil
}

// Routes implements door.Door.
func (a *API) Routes() []door.Route {
	people := func(method, path string, h handler) door.Route {
		return door.Route{Method: method, Path: path, Handler: h, Access: door.People}
	}
	rs := []door.Route{
		people(http.MethodGet, "/admin/agents", a.listAgents),
		people(http.MethodPost, "/admin/agents", a.createAgent),
		people(http.MethodGet, "/admin/agents/:name", a.getAgent),
		people(http.MethodPatch, "/admin/agents/:name", a.patchAgent),
		people(http.MethodDelete, "/admin/agents/:name", a.deleteAgent),
		people(http.MethodGet, "/admin/agents/:name/keys", a.listKeys),
		people(http.MethodPost, "/admin/agents/:name/keys", a.issueKey),
		people(http.MethodDelete, "/admin/agents/:name/keys/:id", a.revokeKey),
		people(http.MethodGet, "/admin/teams", a.listTeams),
		people(http.MethodPost, "/admin/teams", a.createTeam),
		people(http.MethodGet, "/admin/teams/:team", a.getTeam),
		people(http.MethodPatch, "/admin/teams/:team", a.patchTeam),
		people(http.MethodDelete, "/admin/teams/:team", a.deleteTeam),
		// The API's description is public, as any API's reference is.
		{Method: http.MethodGet, Path: "/openapi.json", Handler: http.HandlerFunc(serveOpenAPI), Access: door.Public},
	}
	for _, c := range a.consoleRoutes() {
		rs = append(rs, people(c.method, c.path, c.h))
	}
	return rs
}

// handler adapts a handler that returns an error, written in OpenAI's
// shape in this one place.
type handler func(w http.ResponseWriter, r *http.Request) error

func (h handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := h(w, r); err != nil {
		httpx.Fail(w, r, err)
	}
}

// CSRFHeader carries a page session's CSRF token on a JSON call made with
// its cookie; a console form sends it as the field "csrf".
const CSRFHeader = "X-CSRF-Token"

// person is who calls, allowed to manage something: an admin, or an owner
// of at least one team. A change (mutate) by a page session's cookie must
// come from the gateway's own page, with the session's CSRF token.
func (a *API) person(r *http.Request, mutate bool) (door.Person, error) {
	p, err := a.d.People.SignedIn(r)
	if err != nil {
		return door.Person{}, a.agentKey(r, err)
	}
	if mutate && p.CSRF != "" {
		got := r.Header.Get(CSRFHeader)
		if got == "" {
			got = r.PostFormValue("csrf")
		}
		if !httpx.SameOrigin(r) || subtle.ConstantTimeCompare([]byte(got), []byte(p.CSRF)) != 1 {
			return door.Person{}, &apierror.Error{Status: http.StatusForbidden, Type: apierror.TypePermission, Code: "csrf_failed",
				Message: "A change made with a page session needs the page's CSRF token and origin."}
		}
	}
	if !p.Admin && len(p.TeamOwner) == 0 {
		return door.Person{}, apierror.Forbidden("The admin API needs an admin, or the owner of a team.")
	}
	return p, nil
}

// pathTarget is the person calling and what the path's key names, as find
// looks it up for them (an agent they may see, a team they own).
func pathTarget[T any](a *API, r *http.Request, mutate bool, key string, find func(*http.Request, door.Person, string) (T, error)) (door.Person, T, error) {
	p, err := a.person(r, mutate)
	if err != nil {
		var none T
		return p, none, err
	}
	v, err := find(r, p, r.PathValue(key))
	return p, v, err
}

// agentKey turns a refused bearer token that is a key this API issued
// into 403: an agent's credential is never a person's, and saying so is
// more use to the caller than "unknown token" (the people's side knows
// only agents.yaml's tokens).
func (a *API) agentKey(r *http.Request, err error) error {
	e, ok := errors.AsType[*apierror.Error](err)
	scheme, tok, found := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || e.Status != http.StatusUnauthorized || !found || !strings.EqualFold(scheme, "Bearer") {
		return err
	}
	if _, _, isKey, kerr := a.d.Keys.AgentByKey(r.Context(), sha256.Sum256([]byte(strings.TrimSpace(tok)))); kerr == nil && isKey {
		return apierror.Forbidden("An agent's key cannot be used on the admin API: use the admin token, or sign in as a person.")
	}
	return err
}

// adminOnly refuses what only an admin may do.
func adminOnly(p door.Person, what string) error {
	if !p.Admin {
		return apierror.Forbidden("Only an admin may " + what + ".")
	}
	return nil
}

// notFound is the 404 of an agent, key or team that does not exist or
// that the person may not see: the two are one answer, so a team owner
// learns nothing of other teams.
func notFound(what, name string) error {
	return &apierror.Error{Status: http.StatusNotFound, Type: apierror.TypeInvalidRequest, Code: "not_found", Message: what + " " + quote(name) + " not found."}
}

func conflict(code, msg string) error {
	return &apierror.Error{Status: http.StatusConflict, Type: apierror.TypeInvalidRequest, Code: code, Message: msg}
}

func quote(s string) string { return "\"" + clip(s) + "\"" }

// stateErr maps a store failure: a backend that is down is 503.
func stateErr(err error) error {
	if _, ok := errors.AsType[*apierror.Error](err); ok {
		return err
	}
	return apierror.StateUnavailable(err)
}

// stored maps a store's failure: what is not there is 404, a backend
// that is down 503.
func stored(err error, what, name string) error {
	if errors.Is(err, ErrNotFound) {
		return notFound(what, name)
	}
	return stateErr(err)
}

// created maps a store's failure to create what (Agent, Team) name: a
// name taken is 409, a backend that is down 503.
func created(err error, what, name string) error {
	if errors.Is(err, ErrExists) {
		return conflict(strings.ToLower(what)+"_exists", what+" "+quote(name)+" exists.")
	}
	if err != nil {
		return stateErr(err)
	}
	return nil
}

// fileAgents is agents.yaml's agents in force.
func (a *API) fileAgents() map[string]*roster.Agent {
	if cfg := a.cfg.Load(); cfg != nil {
		return cfg.Agents
	}
	return nil
}

// record writes an admin.* entry naming the person who made the change
// (never a key), and returns the recorder's verdict: in fail_mode closed
// an entry that is not durable is a 503.
func (a *API) record(r *http.Request, p door.Person, kind, agent string, facts func(o *audit.Object)) error {
	o := &audit.Object{}
	o.Str("by", p.Name)
	o.Str("via", p.Via)
	if p.Subject != "" {
		o.Str("subject", p.Subject)
	}
	if p.Email != "" {
		o.Str("email", p.Email)
	}
	if facts != nil {
		facts(o)
	}
	rec := audit.Record{Kind: kind, AgentID: agent, Object: o}
	if ex := scope.Lookup(r.Context()); ex != nil {
		rec.RequestID = ex.RequestID
	}
	return a.d.Audit.Durable(context.WithoutCancel(r.Context()), rec)
}
