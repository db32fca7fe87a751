// Package door is the frame every front door of the gateway stands in:
// who the caller is (bearer tokens compared by hash in constant time, mTLS
// client certificates by SPIFFE ID, the sidecar's agent, agents spawned at
// run time, in-process callers), the request-rate gate (one request of the
// agent's rate_limit), the journal of an exchange's audit entries through
// the one recorder that applies audit.fail_mode, and the contract a door
// keeps with the HTTP shell: the routes it serves, each with the access it
// needs, and its two-phase preparation from a new configuration.
//
// The doors (the OpenAI API and its dialects, approvals, the relay and
// registry, workflows, MCP, the review and ops pages) import this package
// and none of each other; the shell (server) mounts their routes through a
// Frame without importing any of them.
package door

import (
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync/atomic"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/team"
	"github.com/sacpgw/gateway/limit"
)

// Access is what a route needs of the frame before its handler runs.
type Access int

const (
	// Public routes need nothing (the front page's redirect, health).
	Public Access = iota
	// Agent routes run behind the identify stage: an agent's identity,
	// a refusal audited as auth.failure.
	Agent
	// Metered routes are Agent routes that also spend one request of the
	// agent's rate_limit (a refusal audited as ratelimit.reject).
	Metered
	// People routes are for the admin and reviewers: the handler
	// authenticates their tokens or sessions itself; no agent identity.
	People
	// Chained routes are a door's own chains that run the identify stage
	// and the rate gate themselves, inside the journal of the exchange
	// (the OpenAI API: a refused model must not spend the rate, and a
	// refusal before the call is one llm.request entry).
	Chained
)

// AnyMethod is a Route's Method for a route that answers every method.
const AnyMethod = "*"

// Route is one endpoint a door serves.
type Route struct {
	// Method is an HTTP method, or AnyMethod.
	Method string
	// Path is in echo's syntax (":name" parameters, a trailing "*"); a
	// handler reads a parameter with r.PathValue(name).
	Path    string
	Handler http.Handler
	Access  Access
	// Challenge, for an Agent or Metered route, is the WWW-Authenticate
	// value of its 401 (RFC 6750, RFC 9728: where a client learns how to
	// get a token); "" or nil: none.
	Challenge func(r *http.Request) string
}

// Pattern is the route as a net/http ServeMux pattern ("GET /review/{id}").
func (r Route) Pattern() string {
	parts := strings.Split(r.Path, "/")
	for i, p := range parts {
		if name, ok := strings.CutPrefix(p, ":"); ok {
			parts[i] = "{" + name + "}"
		}
	}
	p := strings.Join(parts, "/")
	if strings.HasSuffix(p, "/") {
		// Exact, as in echo: "GET /" would be every GET path to a ServeMux.
		p += "{$}"
	}
	return r.Method + " " + p
}

// Door is a front door: the routes it serves, and its preparation for a
// new configuration, all or nothing. Prepare builds and checks everything
// cfg needs and returns apply, which swaps it in and cannot fail; a door
// with nothing to reload returns a no-op. Requests in flight finish under
// the configuration they began with.
type Door interface {
	Routes() []Route
	Prepare(cfg *config.Config) (apply func(), err error)
}

// Configure gives a door being built its first configuration: Prepare,
// then apply at once, so that its constructor returns it ready to serve.
func Configure(d Door, cfg *config.Config) error {
	apply, err := d.Prepare(cfg)
	if err != nil {
		return err
	}
	apply()
	return nil
}

// Gate is the frame of one configuration: the identify stage over its
// agents and the request-rate gate.
type Gate struct {
	Ident *Identifier
	Rate  *RateGate
}

// GateDeps are what a Gate needs besides the configuration; they outlive
// reloads.
type GateDeps struct {
	// Sidecar, when set, is the agent that token-less requests act as.
	Sidecar string
	// Spawned finds the agents registered at run time; nil: only the
	// configured agents authenticate.
	Spawned SpawnedAgents
	// Keys finds the keys issued through the admin API; nil: none.
	Keys RuntimeKeys
	// Requests holds the agents' rate_limit.
	Requests limit.Limiter
	// Audit is the one recorder; nil writes nothing.
	Audit *Recorder
	Log   *slog.Logger
	// Teams finds the teams created at run time (the admin API's store);
	// nil: only teams.yaml's. The file's teams come from the configuration.
	Teams team.Source
	// Clients finds the access tokens of people's MCP clients; nil: none.
	Clients ClientTokens
}

// NewGate builds the frame of cfg.
func NewGate(cfg *config.Config, d GateDeps) (*Gate, error) {
	if d.Requests == nil || d.Log == nil {
		return nil, errors.New("door: Requests and Log are required")
	}
	ident, err := NewIdentifier(cfg.Agents, d.Sidecar)
	if err != nil {
		return nil, err
	}
	ident.Spawned, ident.Keys, ident.Log, ident.Audit = d.Spawned, d.Keys, d.Log, d.Audit
	ident.Teams = team.Combined{File: cfg.Teams, Runtime: d.Teams}
	ident.Clients = d.Clients
	return &Gate{Ident: ident, Rate: &RateGate{Requests: d.Requests, Audit: d.Audit}}, nil
}

// serve runs h behind the identify stage and, when metered, the rate gate;
// a refusal is answered in OpenAI's shape.
func (g *Gate) serve(w http.ResponseWriter, r *http.Request, rt Route) {
	h := rt.Handler
	if rt.Access == Metered {
		next := h
		h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if err := g.Rate.Serve(w, r, next); err != nil {
				httpx.Fail(w, r, err)
			}
		})
	}
	if err := g.Ident.Serve(w, r, h); err != nil {
		if rt.Challenge != nil && apierror.From(err).Status == http.StatusUnauthorized {
			if c := rt.Challenge(r); c != "" {
				w.Header().Set("WWW-Authenticate", c)
			}
		}
		httpx.Fail(w, r, err)
	}
}

// Frame is the current Gate, swapped when the configuration is reloaded:
// the shell mounts every door's routes through it.
type Frame struct {
	deps GateDeps
	cur  atomic.Pointer[Gate]
}

// NewFrame builds the frame of cfg.
func NewFrame(cfg *config.Config, d GateDeps) (*Frame, error) {
	g, err := NewGate(cfg, d)
	if err != nil {
		return nil, err
	}
	f := &Frame{deps: d}
	f.cur.Store(g)
	return f, nil
}

// Prepare builds the Gate of cfg; apply makes it the current one.
func (f *Frame) Prepare(cfg *config.Config) (apply func(), err error) {
	g, err := NewGate(cfg, f.deps)
	if err != nil {
		return nil, err
	}
	return func() { f.cur.Store(g) }, nil
}

// Handler is rt's handler behind what its access needs: the current
// gate's identify stage (Agent), and its rate gate (Metered).
func (f *Frame) Handler(rt Route) http.Handler {
	switch rt.Access {
	case Agent, Metered:
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			f.cur.Load().serve(w, r, rt)
		})
	}
	return rt.Handler
}
