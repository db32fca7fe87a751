package workflow

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/policy"
)

// maxStartBody bounds the body of a run's start.
const maxStartBody = 1 << 20

// maxWait bounds ?wait= on a start.
const maxWait = 5 * time.Minute

// API is the HTTP front of the engine; every route is behind the agent's
// authentication. An agent sees and cancels only the runs it started.
type API struct {
	Engine *Engine
}

type endpoint func(w http.ResponseWriter, r *http.Request) error

func (e endpoint) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := e(w, r); err != nil {
		httpx.Fail(w, r, err)
	}
}

// Start is POST /workflows/{name}/runs {input} → 201 {run_id, status}, or
// with ?wait=30s the run as it is when it ends, waits for a person, or the
// wait is over.
func (a *API) Start() http.Handler { return endpoint(a.start) }

func (a *API) start(w http.ResponseWriter, r *http.Request) error {
	agent := scope.Get(r.Context()).Agent
	var wait time.Duration
	if q := r.URL.Query().Get("wait"); q != "" {
		d, err := time.ParseDuration(q)
		if err != nil || d < 0 || d > maxWait {
			return apierror.BadRequest("wait", "wait must be a duration between 0s and %s, such as 30s.", maxWait)
		}
		wait = d
	}
	raw, err := httpx.ReadLimited(r, maxStartBody)
	if err != nil {
		return err
	}
	// Read once, strictly: a repeated or unknown name, or invalid UTF-8, is
	// refused rather than read one way here and another by a template.
	var body struct {
		Input map[string]any `json:"input"`
	}
	if err := jsonv2.Unmarshal(raw, &body, jsonv2.RejectUnknownMembers(true)); err != nil {
		return apierror.BadRequest("input", "The body must be {\"input\": {...}}: %s.", describeJSON(err))
	}
	run, err := a.Engine.Start(r.Context(), policy.AgentInput(agent), agent.ID, r.PathValue("name"), body.Input)
	var se *StartError
	var le *LimitError
	switch {
	case errors.As(err, &le):
		secs := int(math.Ceil(le.RetryAfter.Seconds()))
		return apierror.RateLimited(le.Reason, http.Header{"Retry-After": {strconv.Itoa(max(1, secs))}})
	case errors.Is(err, limit.ErrUnavailable):
		return &apierror.Error{Status: http.StatusServiceUnavailable, Type: apierror.TypeServer, Code: "state_unavailable",
			Message: "The gateway's shared state is unavailable; retry shortly.", Header: http.Header{"Retry-After": {"1"}}, Err: err}
	case errors.As(err, &se) && se.NotFound:
		return &apierror.Error{Status: http.StatusNotFound, Type: apierror.TypeInvalidRequest, Code: "workflow_not_found", Message: se.Reason}
	case errors.As(err, &se):
		return &apierror.Error{Status: http.StatusForbidden, Type: apierror.TypePermission, Code: "policy_denied", Message: se.Reason}
	case err != nil:
		return err
	}
	if wait > 0 {
		ctx, cancel := context.WithTimeout(r.Context(), wait)
		defer cancel()
		if done, err := a.Engine.Wait(ctx, run.ID); err == nil && done != nil {
			httpx.WriteJSON(w, r, http.StatusCreated, done.shown())
			return nil
		}
	}
	httpx.WriteJSON(w, r, http.StatusCreated, map[string]any{"run_id": run.ID, "status": run.Status})
	return nil
}

// Get is GET /workflows/{name}/runs/{id}.
func (a *API) Get() http.Handler { return a.own(a.get) }

func (a *API) get(w http.ResponseWriter, r *http.Request, run *Run) error {
	httpx.WriteJSON(w, r, http.StatusOK, run.shown())
	return nil
}

// Cancel is POST /workflows/{name}/runs/{id}/cancel.
func (a *API) Cancel() http.Handler { return a.own(a.cancel) }

func (a *API) cancel(w http.ResponseWriter, r *http.Request, run *Run) error {
	done, err := a.Engine.Cancel(r.Context(), run.ID, "agent "+run.Caller)
	if errors.Is(err, ErrEnded) {
		return &apierror.Error{Status: http.StatusConflict, Type: apierror.TypeInvalidRequest, Code: "run_ended",
			Message: fmt.Sprintf("Run %s has ended (%s): there is nothing to cancel.", run.ID, run.Status)}
	}
	if err != nil {
		return err
	}
	httpx.WriteJSON(w, r, http.StatusOK, done.shown())
	return nil
}

// Graph is GET /workflows/{name}/runs/{id}/graph.svg: the workflow with the
// path the run took and its current node.
func (a *API) Graph() http.Handler { return a.own(a.graph) }

func (a *API) graph(w http.ResponseWriter, r *http.Request, run *Run) error {
	wf := a.Engine.Definitions().Get(run.Workflow)
	if wf == nil {
		return notFound("workflow_not_found", fmt.Sprintf("Workflow %s is no longer defined.", run.Workflow))
	}
	current := run.Current
	if run.Status.Final() {
		current = ""
	}
	svg := wf.SVG(run.Path, current)
	h := w.Header()
	h.Set("Content-Type", "image/svg+xml")
	h.Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(svg)
	return nil
}

// Blob is GET /blobs/{sha256}: a binary value moved out of a run's answer,
// for the agents of that run only (to any other, it does not exist).
func (a *API) Blob() http.Handler { return endpoint(a.blob) }

func (a *API) blob(w http.ResponseWriter, r *http.Request) error {
	agent := scope.Get(r.Context()).Agent
	sha := r.PathValue("sha256")
	missing := notFound("blob_not_found", fmt.Sprintf("There is no blob %q that you may read.", sha))
	if !validSHA(sha) {
		return missing
	}
	b, err := a.Engine.blobs.Get(r.Context(), sha)
	if errors.Is(err, ErrNotFound) || (err == nil && !slices.Contains(b.Agents, agent.ID)) {
		return missing
	}
	if err != nil {
		return fmt.Errorf("blob: %w", err)
	}
	h := w.Header()
	h.Set("Content-Type", b.MediaType)
	h.Set("Content-Length", strconv.Itoa(len(b.Data)))
	// Bytes a model produced: never rendered by a browser as a page.
	h.Set("Content-Disposition", "attachment")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Content-Security-Policy", "default-src 'none'; sandbox")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(b.Data)
	return nil
}

// List is GET /workflows: the workflows and who may start them.
func (a *API) List() http.Handler { return endpoint(a.list) }

type summary struct {
	Name        string   `json:"name"`
	Description string   `json:"description"`
	Callers     []string `json:"callers"`
	Start       string   `json:"start"`
}

func (a *API) list(w http.ResponseWriter, r *http.Request) error {
	defs := a.Engine.Definitions()
	out := []summary{}
	for _, name := range defs.Names() {
		wf := defs.Get(name)
		out = append(out, summary{Name: wf.Name, Description: wf.Description, Callers: nonNil(wf.Callers), Start: wf.Start})
	}
	httpx.WriteJSON(w, r, http.StatusOK, map[string]any{"object": "list", "data": out})
	return nil
}

// Describe is GET /workflows/{name}: the definition and its Mermaid graph.
func (a *API) Describe() http.Handler { return endpoint(a.describe) }

type nodeView struct {
	// Agent is the agent's id, or a pickView for a registry-driven node.
	Agent   any      `json:"agent"`
	Model   string   `json:"model,omitempty"`
	Input   string   `json:"input"`
	Owns    []string `json:"owns"`
	Timeout string   `json:"timeout,omitempty"`
}

// pickView is a registry-driven node's agent as workflows.yaml wrote it.
type pickView struct {
	Verb          string   `json:"verb,omitempty"`
	Inputs        []string `json:"inputs,omitempty"`
	OutputType    string   `json:"output_type,omitempty"`
	Text          string   `json:"text,omitempty"`
	SpawnEndpoint string   `json:"spawn_endpoint,omitempty"`
}

type edgeView struct {
	From string `json:"from"`
	To   string `json:"to"`
	When string `json:"when,omitempty"`
}

func (a *API) describe(w http.ResponseWriter, r *http.Request) error {
	wf := a.Engine.Definitions().Get(r.PathValue("name"))
	if wf == nil {
		return notFound("workflow_not_found", fmt.Sprintf("There is no workflow %q.", r.PathValue("name")))
	}
	nodes := map[string]nodeView{}
	for name, n := range wf.Nodes {
		v := nodeView{Agent: n.Agent, Model: n.Model, Input: n.Input.String(), Owns: nonNil(n.Owns)}
		if p := n.Pick; p != nil {
			v.Agent = pickView{Verb: p.Verb, Inputs: p.Inputs, OutputType: p.OutputType, Text: p.Text, SpawnEndpoint: p.SpawnEndpoint}
		}
		if n.Timeout > 0 {
			v.Timeout = n.Timeout.String()
		}
		nodes[name] = v
	}
	edges := []edgeView{}
	for _, e := range wf.Edges {
		v := edgeView{From: e.From, To: e.To}
		if e.When != nil {
			v.When = e.When.String()
		}
		edges = append(edges, v)
	}
	httpx.WriteJSON(w, r, http.StatusOK, map[string]any{
		"name": wf.Name, "description": wf.Description, "callers": nonNil(wf.Callers), "start": wf.Start,
		"max_steps": wf.MaxSteps, "max_negotiation_rounds": wf.MaxNegotiationRounds, "max_spawns": wf.MaxSpawns,
		"nodes": nodes, "edges": edges, "mermaid": wf.Mermaid(),
	})
	return nil
}

// own is an endpoint about one run: fn runs with the run of the path when
// the calling agent started it.
func (a *API) own(fn func(w http.ResponseWriter, r *http.Request, run *Run) error) endpoint {
	return func(w http.ResponseWriter, r *http.Request) error {
		run, err := a.ownRun(r)
		if err != nil {
			return err
		}
		return fn(w, r, run)
	}
}

// ownRun returns the run of the path if the calling agent started it; any
// other run is "not found", so run ids tell nothing to other agents.
func (a *API) ownRun(r *http.Request) (*Run, error) {
	agent := scope.Get(r.Context()).Agent
	run, err := a.Engine.Get(r.Context(), r.PathValue("name"), r.PathValue("id"))
	if errors.Is(err, ErrNotFound) || (err == nil && run.Caller != agent.ID) {
		return nil, notFound("run_not_found", fmt.Sprintf("There is no run %q of workflow %q that you started.", r.PathValue("id"), r.PathValue("name")))
	}
	if err != nil {
		return nil, fmt.Errorf("workflow run: %w", err)
	}
	return run, nil
}

func notFound(code, msg string) *apierror.Error {
	return &apierror.Error{Status: http.StatusNotFound, Type: apierror.TypeInvalidRequest, Code: code, Message: msg}
}

// describeJSON is a JSON error without the Go type names json v2 adds.
func describeJSON(err error) string {
	var se *jsonv2.SemanticError
	if errors.As(err, &se) && se.Err != nil {
		return fmt.Sprintf("%v at %s", se.Err, pointerOrRoot(string(se.JSONPointer)))
	}
	return err.Error()
}

func pointerOrRoot(p string) string {
	if p == "" {
		return "the top level"
	}
	return p
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// Routes are the workflow API's endpoints, for agents: starting a run
// spends one request of the caller's rate_limit.
func (a *API) Routes() []door.Route {
	return []door.Route{
		{Method: http.MethodPost, Path: "/workflows/:name/runs", Handler: a.Start(), Access: door.Metered},
		{Method: http.MethodGet, Path: "/workflows/:name/runs/:id", Handler: a.Get(), Access: door.Agent},
		{Method: http.MethodPost, Path: "/workflows/:name/runs/:id/cancel", Handler: a.Cancel(), Access: door.Agent},
		{Method: http.MethodGet, Path: "/workflows/:name/runs/:id/graph.svg", Handler: a.Graph(), Access: door.Agent},
		{Method: http.MethodGet, Path: "/workflows", Handler: a.List(), Access: door.Agent},
		{Method: http.MethodGet, Path: "/workflows/:name", Handler: a.Describe(), Access: door.Agent},
		{Method: http.MethodGet, Path: "/blobs/:sha256", Handler: a.Blob(), Access: door.Agent},
	}
}

// Prepare implements door.Door: the engine takes the new definitions.
func (a *API) Prepare(cfg *config.Config) (apply func(), err error) { return a.Engine.Prepare(cfg) }

var _ door.Door = (*API)(nil)
