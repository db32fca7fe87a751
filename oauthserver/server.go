// Package oauthserver is the gateway's OAuth 2.1 authorization server for
// people's MCP clients (an IDE, a desktop app, the MCP Inspector), as the
// MCP authorization specification asks of a server: given only the URL
// /mcp/{server}, a client finds the protected resource metadata (RFC 9728)
// that the MCP door's 401 names, then this server's metadata (RFC 8414),
// registers itself (RFC 7591), and sends its person through the
// authorization code flow with PKCE (S256 only) for that one resource
// (RFC 8707). The person signs in with the organisation's provider, the
// same sign-in as the review pages (the approval service keeps the
// session), and consents on a page that names the client, where it sends
// the code, the server, and the agent identity to act as, among those
// data.gateway.mcp_clients.allow lets that person choose.
//
// Codes, refresh tokens and access tokens are random, opaque, and stored
// only as their SHA-256 (package mcpauth: this process, or Redis for every
// replica). A code is spent once; refresh tokens rotate, and a spent one
// presented again revokes its whole family. An access token identifies its
// agent at its resource only (the identify stage, door.ClientTokens), for
// its person (door.Behalf); it never leaves the gateway.
package oauthserver

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"sync/atomic"
	"time"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/mcpauth"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/policy"
)

// Decider is the policy that says which agents a person's client may act
// as (policy.Engine).
type Decider interface {
	MCPClient(ctx context.Context, input map[string]any) (policy.WorkflowDecision, error)
}

// Deps are what a Door needs; all are required but Audit.
type Deps struct {
	Config *config.Config
	Store  mcpauth.Store
	// People is who is signed in to the pages (the approval service).
	People  door.PeopleAuth
	Policy  Decider
	Limiter limit.Limiter
	Audit   *door.Recorder
	Log     *slog.Logger
}

// Door serves the authorization server's routes.
type Door struct {
	conf    atomic.Pointer[conf]
	store   mcpauth.Store
	people  door.PeopleAuth
	policy  Decider
	limiter limit.Limiter
	audit   *door.Recorder
	log     *slog.Logger
	now     func() time.Time
}

// conf is one configuration of the door.
type conf struct {
	// set is mcp_clients; nil: the server is off, every route 404.
	set *mcpauth.Settings
	// servers are the MCP servers' names, agents the configured agents
	// (sorted by id), the identities a person may pick from.
	servers map[string]bool
	agents  []*roster.Agent
}

// New builds the door for d.Config.
func New(d Deps) (*Door, error) {
	if d.Config == nil || d.Store == nil || d.People == nil || d.Policy == nil || d.Limiter == nil || d.Log == nil {
		return nil, errors.New("oauthserver: Config, Store, People, Policy, Limiter and Log are required")
	}
	s := &Door{store: d.Store, people: d.People, policy: d.Policy, limiter: d.Limiter, audit: d.Audit, log: d.Log, now: time.Now}
	if err := door.Configure(s, d.Config); err != nil {
		return nil, err
	}
	return s, nil
}

// Prepare implements door.Door.
func (s *Door) Prepare(cfg *config.Config) (func(), error) {
	c := &conf{set: cfg.Gateway.MCPClients, servers: map[string]bool{}}
	for _, sc := range cfg.Gateway.MCP.Servers {
		c.servers[sc.Name] = true
	}
	for _, a := range cfg.Agents {
		c.agents = append(c.agents, a)
	}
	slices.SortFunc(c.agents, func(a, b *roster.Agent) int {
		if a.ID < b.ID {
			return -1
		}
		if a.ID > b.ID {
			return 1
		}
		return 0
	})
	return func() { s.conf.Store(c) }, nil
}

// Paths of the endpoints. The consent page is under /review/, where the
// pages' session cookie is sent.
const (
	AuthorizePath = "/oauth/authorize"
	TokenPath     = "/oauth/token"
	RegisterPath  = "/oauth/register"
	ConsentPath   = "/review/mcp-clients/"
)

// Routes implements door.Door. The endpoints a client calls are public
// (unauthenticated by design, each bounded); the consent page is a
// person's.
func (s *Door) Routes() []door.Route {
	return []door.Route{
		{Method: http.MethodGet, Path: mcpauth.ServerMetadataPath, Handler: s.on(s.serverMetadata), Access: door.Public},
		{Method: http.MethodGet, Path: mcpauth.ResourceMetadataPrefix + "/mcp/:server", Handler: s.on(s.resourceMetadata), Access: door.Public},
		{Method: http.MethodPost, Path: RegisterPath, Handler: s.on(s.register), Access: door.Public},
		{Method: http.MethodGet, Path: AuthorizePath, Handler: s.on(s.authorize), Access: door.Public},
		{Method: http.MethodPost, Path: TokenPath, Handler: s.on(s.token), Access: door.Public},
		{Method: http.MethodGet, Path: ConsentPath + ":id", Handler: s.on(s.consentPage), Access: door.People},
		{Method: http.MethodPost, Path: ConsentPath + ":id", Handler: s.on(s.consent), Access: door.People},
	}
}

// on runs h with the current configuration; without mcp_clients every
// route is 404, as if the server were not there.
func (s *Door) on(h func(w http.ResponseWriter, r *http.Request, c *conf)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c := s.conf.Load()
		if c.set == nil {
			http.NotFound(w, r)
			return
		}
		h(w, r, c)
	})
}

// Scopes the server knows: "mcp" is the one a token carries (access to the
// resource as the chosen agent); offline_access is asked for by clients
// that want a refresh token (they get one when registered for the
// refresh_token grant either way).
var scopes = []string{"mcp", "offline_access"}

// serverMetadata serves RFC 8414's metadata.
func (s *Door) serverMetadata(w http.ResponseWriter, r *http.Request, c *conf) {
	base := c.set.BaseURL
	w.Header().Set("Cache-Control", "max-age=300")
	httpx.WriteJSON(w, r, http.StatusOK, map[string]any{
		"issuer":                                         base,
		"authorization_endpoint":                         base + AuthorizePath,
		"token_endpoint":                                 base + TokenPath,
		"registration_endpoint":                          base + RegisterPath,
		"response_types_supported":                       []string{"code"},
		"response_modes_supported":                       []string{"query"},
		"grant_types_supported":                          []string{"authorization_code", "refresh_token"},
		"code_challenge_methods_supported":               []string{"S256"},
		"token_endpoint_auth_methods_supported":          []string{"none"},
		"scopes_supported":                               scopes,
		"authorization_response_iss_parameter_supported": true,
	})
}

// resourceMetadata serves RFC 9728's metadata of one MCP server.
func (s *Door) resourceMetadata(w http.ResponseWriter, r *http.Request, c *conf) {
	name := r.PathValue("server")
	if !c.servers[name] {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Cache-Control", "max-age=300")
	httpx.WriteJSON(w, r, http.StatusOK, map[string]any{
		"resource":                 c.set.Resource(name),
		"authorization_servers":    []string{c.set.BaseURL},
		"bearer_methods_supported": []string{"header"},
		"scopes_supported":         []string{"mcp"},
		"resource_name":            "MCP server " + name + " through the gateway",
	})
}

var _ door.Door = (*Door)(nil)

// Audit kinds the server writes. Each names the person (subject and
// e-mail) where there is one, never a code or token.
const (
	KindRegister = "oauth.register"
	KindGrant    = "oauth.grant"
	KindToken    = "oauth.token"
	KindRefuse   = "oauth.refuse"
)
