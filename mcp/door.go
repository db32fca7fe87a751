// Package mcp is the gateway's front door for the Model Context Protocol:
// /mcp/{server} speaks MCP's Streamable HTTP transport to agents and to the
// MCP servers of gateway.yaml's mcp.servers, so that what an agent does
// through a tool passes the governance its prompts pass (docs/mcp.md).
//
// For every message the door knows who sends it (the identify stage ran
// before), reads it once and strictly, and refuses what it does not know.
// tools/list shows the tools the agent's mcp_tools and the policy allow;
// tools/call is decided by data.gateway.mcp.decision on the tool as the
// server itself describes it (its tools/list, read by the gateway with the
// gateway's credentials), limited, redacted both ways, and written to the
// audit trail before and after the call; an escalated call waits for a
// person, whose approval lets exactly that call through once: the bytes
// the server receives are the bytes the person was shown and the grant
// hashes. Whatever else the agent sends (notifications, its answers to
// the server's requests, reads, listings) is redacted, counted against
// its rate_limit and audited too.
//
// The package imports the plumbing (internal/httpx, internal/escalation,
// internal/scope) and the governance parts (policy, limit, redact, audit,
// config); no other front door.
package mcp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/escalation"
	"github.com/sacpgw/gateway/internal/mcpauth"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/policy"
	"github.com/sacpgw/gateway/redact"
	"github.com/sacpgw/gateway/upstream"
)

// Decider is the MCP policy (policy.Engine).
type Decider interface {
	MCP(ctx context.Context, input map[string]any) (policy.MCPDecision, error)
}

// Deps are what a Door needs. Config, Policy, Limiter and Log are
// required; the others have working zero values.
type Deps struct {
	Config  *config.Config
	Policy  Decider
	Limiter limit.Limiter
	Log     *slog.Logger
	// Audit writes mcp.call and mcp.result; nil writes nothing (config
	// check builds the door without a trail).
	Audit *door.Recorder
	// Opener opens the human reviews of escalated calls (the approval
	// service); nil: an escalated call is refused, as no person can
	// approve it.
	Opener escalation.Opener
	// Grants keeps the approvals; nil: NewMemoryGrants().
	Grants Grants
	// Sessions keeps the agents' sessions; nil: NewMemorySessions().
	Sessions Sessions
	// Client calls the MCP servers; nil: a client of the door's own that
	// follows no redirect (a redirect would carry the server's
	// credentials elsewhere).
	Client *http.Client
	// OAuthClient calls the servers' authorization servers (their oauth):
	// the outbound guard's client. Nil: one that reaches public addresses
	// only.
	OAuthClient *http.Client
	// Tokens keeps the people's sealed delegated tokens; nil:
	// NewMemoryTokens().
	Tokens TokenStore
	// People tells who is signed in to the pages (the approval service),
	// for the page where a person connects their accounts; nil: no page.
	People door.PeopleAuth
}

// Door serves /mcp/{server}. It is safe for concurrent use; Prepare swaps
// in a new configuration for the next request.
type Door struct {
	conf     atomic.Pointer[conf]
	policy   Decider
	limiter  limit.Limiter
	audit    *door.Recorder
	opener   escalation.Opener
	grants   Grants
	sessions Sessions
	log      *slog.Logger
	client   *http.Client
	metrics  *collector
	health   *health
	// catalogs are the servers' tool lists, kept across reloads for a
	// server whose URL and credentials did not change.
	catMu    sync.Mutex
	catalogs map[string]*catalog
	// stdios are the stdio servers running, by name and stdioKey, kept
	// across reloads that change none of what their processes depend on.
	stdios map[string]*stdioServer
	// held are the calls held open for a person, by escalation id.
	held holds
	// pins are the approved tool definitions.
	pins pins
	// oauth keeps the servers' OAuth credentials; people signs in the
	// people who connect their accounts (nil: no such page).
	oauth  *oauthState
	people door.PeopleAuth
}

// conf is one configuration of the door, immutable once built.
type conf struct {
	servers map[string]*server
	agents  map[string]*roster.Agent
	// agentIn is each agent's policy input, converted once.
	agentIn map[string]any
	// red redacts arguments and everything a server sends; nil: redaction
	// is off (protocol.redaction.detectors: []).
	red *redact.Redactor
	// escalationTTL is how long an approval lets its call through
	// (protocol timeouts.escalation).
	escalationTTL time.Duration
	// clients is mcp_clients (the authorization server for people's
	// clients, which the 401 names); nil: none.
	clients *mcpauth.Settings
}

// server is one configured MCP server.
type server struct {
	name, url string
	// header holds the configured headers, added to every request.
	header  http.Header
	timeout time.Duration
	limits  map[string]limit.Rule
	// hold and toolHold are how long an escalated call is held open
	// for a person (0: not held).
	hold     time.Duration
	toolHold map[string]time.Duration
	// pins are the configured tool definitions' SHA-256, by tool.
	pins    map[string]string
	catalog *catalog
	// stdio runs the server's program when it is a stdio server (url
	// then stands for it); nil for a Streamable HTTP server.
	stdio *stdioServer
	// members are a virtual server's servers, in order (url
	// then stands for them); nil for any other server.
	members []member
	// cred authorizes each request (the server's oauth); nil: none.
	cred credential
}

// member is one server of a virtual server.
type member struct {
	srv    *server
	prefix string
}

// New builds the door for d.Config.
func New(d Deps) (*Door, error) {
	if d.Config == nil || d.Policy == nil || d.Limiter == nil || d.Log == nil {
		return nil, errors.New("mcp: Config, Policy, Limiter and Log are required")
	}
	dr := &Door{policy: d.Policy, limiter: d.Limiter, audit: d.Audit, opener: d.Opener, grants: d.Grants, sessions: d.Sessions,
		log: d.Log, client: d.Client, metrics: newCollector(), health: newHealth(), catalogs: map[string]*catalog{}, stdios: map[string]*stdioServer{},
		oauth: newOAuthState(d.OAuthClient, d.Tokens), people: d.People}
	if dr.grants == nil {
		dr.grants = NewMemoryGrants()
	}
	if dr.sessions == nil {
		dr.sessions = NewMemorySessions()
	}
	if dr.client == nil {
		// The gateway's own pool (upstream.NewTransport): Go's default keeps
		// two idle connections per host, so agents calling at once would
		// dial (and the server accept) a connection for nearly every call.
		dr.client = &http.Client{Transport: upstream.NewTransport(0),
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	}
	if err := door.Configure(dr, d.Config); err != nil {
		return nil, err
	}
	return dr, nil
}

// Prepare builds the door's configuration for cfg (servers, agents' tools,
// redaction) and returns apply, which serves it from the next request on.
// Requests in flight finish under the configuration they began with; the
// sessions of a server whose URL changed end.
func (d *Door) Prepare(cfg *config.Config) (apply func(), err error) {
	c := &conf{servers: map[string]*server{}, agents: cfg.Agents, agentIn: make(map[string]any, len(cfg.Agents)),
		escalationTTL: cfg.Protocol.Timeouts.Escalation.D(), clients: cfg.Gateway.MCPClients}
	for id, a := range cfg.Agents {
		c.agentIn[id] = policy.Preconvert(policy.AgentInput(a))
	}
	if rc := cfg.Protocol.Redaction; len(rc.Detectors) > 0 {
		if c.red, err = redact.New(redact.Config{Detectors: rc.Detectors, Replacement: rc.Replacement, Block: rc.Block}); err != nil {
			return nil, fmt.Errorf("mcp: redaction: %w", err)
		}
	}
	keep := map[string]*catalog{}
	keepStdio := map[string]*stdioServer{}
	creds, err := d.oauth.next(cfg.Gateway.MCP, cfg.Gateway.Approval.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("mcp: %w", err)
	}
	d.catMu.Lock()
	defer d.catMu.Unlock()
	for _, sc := range cfg.Gateway.MCP.Servers {
		s := &server{name: sc.Name, url: sc.URL, header: http.Header{}, timeout: sc.Timeout.D(), limits: map[string]limit.Rule{}}
		if sc.Servers != nil {
			s.url = "virtual://" + sc.Name // setMembers completes it
		}
		if sc.Command != nil {
			s.url = stdioURL(sc.Name, stdioKey(sc))
			if s.stdio = d.stdios[s.url]; s.stdio == nil {
				s.stdio = newStdioServer(sc, d.log)
			}
			keepStdio[s.url] = s.stdio
		}
		for k, v := range sc.Headers {
			s.header.Set(k, v)
		}
		for tool, r := range sc.ToolLimits {
			s.limits[tool] = limit.Rule{N: r.N, Period: r.Period}
		}
		s.pins = sc.Pins
		s.cred = d.oauth.credential(creds, sc)
		s.hold, s.toolHold = sc.Hold.D(), make(map[string]time.Duration, len(sc.ToolHold))
		for tool, h := range sc.ToolHold {
			s.toolHold[tool] = h.D()
		}
		key := catalogKey(s)
		if s.catalog = d.catalogs[key]; s.catalog == nil {
			s.catalog = &catalog{}
		}
		keep[key] = s.catalog
		c.servers[s.name] = s
	}
	for _, sc := range cfg.Gateway.MCP.Servers {
		if sc.Servers != nil {
			c.servers[sc.Name].setMembers(sc.Servers, c.servers)
		}
	}
	return func() {
		d.catMu.Lock()
		d.catalogs = keep
		gone := d.stdios
		d.stdios = keepStdio
		d.catMu.Unlock()
		d.oauth.keep(creds)
		for k, st := range gone {
			if keepStdio[k] != st {
				st.close()
			}
		}
		d.conf.Store(c)
		d.health.keep(c.serverNames())
	}, nil
}

// catalogKey is what a server's tool list depends on: its name, URL and
// credentials (another credential may see other tools).
func catalogKey(s *server) string {
	k := s.name + "\x00" + s.url
	names := make([]string, 0, len(s.header))
	for n := range s.header {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		k += "\x00" + n + "\x00" + s.header.Get(n)
	}
	return k
}

func (c *conf) serverNames() []string {
	names := make([]string, 0, len(c.servers))
	for n := range c.servers {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// ServeHTTP serves /mcp/{server} (the path value "server") behind the
// identify stage: POST sends messages, GET opens the server's stream,
// DELETE ends a session.
func (d *Door) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch r.Method {
	case http.MethodPost:
		d.post(w, r)
	case http.MethodGet:
		d.listen(w, r)
	case http.MethodDelete:
		d.end(w, r)
	default:
		w.Header().Set("Allow", "GET, POST, DELETE")
		refuse(w, r, http.StatusMethodNotAllowed, codeInvalidRequest, "Use POST, GET or DELETE.")
	}
}

// Routes are /mcp/{server} (POST, GET, DELETE) behind the identify stage;
// not metered there: each message an agent sends spends its rate_limit in
// the door, a tools/call the tool's limit too.
func (d *Door) Routes() []door.Route {
	var rs []door.Route
	for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		rs = append(rs, door.Route{Method: method, Path: "/mcp/:server", Handler: d, Access: door.Agent, Challenge: d.challenge})
	}
	return append(rs, d.accountRoutes()...)
}

// Close ends the stdio servers' processes (the gateway's shutdown).
func (d *Door) Close() {
	d.catMu.Lock()
	gone := d.stdios
	d.stdios = map[string]*stdioServer{}
	d.catMu.Unlock()
	for _, st := range gone {
		st.close()
	}
}

var _ door.Door = (*Door)(nil)
