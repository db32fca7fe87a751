package door

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/internal/team"
)

// Identifier is the identify stage every door runs first: bearer token,
// client certificate, sidecar or in-process caller → agent.
//
// Tokens are never stored: the token's SHA-256 is compared with every
// agent's configured hash in constant time, and the loop never exits early,
// so timing tells nothing about which hash, or how much of one, matched.
type Identifier struct {
	agents []tokenEntry
	// byID finds the agent of an in-process caller (scope.Acting).
	byID    map[string]*roster.Agent
	sidecar *roster.Agent
	// bySPIFFE maps the SPIFFE IDs of agents' client certificates (mTLS).
	bySPIFFE map[string]*roster.Agent
	// Audit records failed authentications (never the token).
	Audit *Recorder
	// Spawned, if set, knows the agents registered at run time; a token
	// no configured agent holds is looked up there.
	Spawned SpawnedAgents
	// Keys, if set, knows the keys issued through the admin API; a token
	// neither a configured nor a spawned agent holds is looked up there.
	Keys RuntimeKeys
	// Log receives the failures to record a spawned agent's use.
	Log *slog.Logger
	// Teams finds the identified agent's team (teams.yaml's and the
	// runtime ones); nil: the agents' teams are not looked up, and an
	// agent in a team is refused (fail closed).
	Teams team.Source
	// Clients, if set, finds the grants of the access tokens the gateway's
	// authorization server issued to people's MCP clients
	// (ClientTokenPrefix); nil: such a token is unknown.
	Clients ClientTokens
}

// SpawnedAgents finds an agent registered at run time by the SHA-256 of its
// token (comparing in constant time), and records that it was used (an
// unused spawned agent expires).
type SpawnedAgents interface {
	AgentByToken(ctx context.Context, sum [sha256.Size]byte) (*roster.Agent, bool, error)
	Touch(ctx context.Context, name string) error
}

// RuntimeKeys finds the agent of a key issued through the admin API by the
// key's SHA-256, read from the shared state on every call so that a key
// revoked (or an agent disabled) on one replica is refused on all at once.
// It also records the key's use, cheaply. runtime is the agent when it
// was created through the API, nil for a key of an agents.yaml agent
// (name), which the identify stage takes from its own configuration. An
// expired or revoked key, or a disabled agent's, is not found.
type RuntimeKeys interface {
	AgentByKey(ctx context.Context, sum [sha256.Size]byte) (name string, runtime *roster.Agent, ok bool, err error)
}

type tokenEntry struct {
	hash  [sha256.Size]byte
	agent *roster.Agent
}

// NewIdentifier builds the stage. A non-empty sidecar names the agent that
// every request is attributed to (sidecar mode): with no key, a placeholder
// key, or that agent's own token; another agent's token is refused.
func NewIdentifier(agents map[string]*roster.Agent, sidecar string) (*Identifier, error) {
	id := &Identifier{bySPIFFE: map[string]*roster.Agent{}, byID: agents}
	for _, a := range agents {
		if a.TokenSHA256 != "" {
			id.agents = append(id.agents, tokenEntry{hash: a.TokenHash, agent: a})
		}
		if a.SPIFFEID != "" {
			id.bySPIFFE[a.SPIFFEID] = a
		}
	}
	if sidecar != "" {
		a, ok := agents[sidecar]
		if !ok {
			return nil, &unknownAgentError{id: sidecar}
		}
		id.sidecar = a
	}
	return id, nil
}

type unknownAgentError struct{ id string }

func (e *unknownAgentError) Error() string {
	return "sidecar agent " + e.id + " is not in agents.yaml"
}

// Serve runs next as the identified agent (the exchange's auth check
// passed), or audits the refusal as auth.failure and returns it: a proxy
// Stage, and the frame of every other door's agent routes.
func (s *Identifier) Serve(w http.ResponseWriter, r *http.Request, next http.Handler) error {
	ex := scope.Get(r.Context())
	a, method, behalf, err := s.identifyClient(r)
	if err != nil {
		e := apierror.From(err)
		summary := &audit.Object{}
		summary.Str("route", r.URL.Path)
		summary.Str("method", r.Method)
		summary.Str("reason", e.Message)
		summary.Str("remote", RemoteIP(r))
		if aerr := JournalOf(r, s.Audit).Refused(r.Context(), audit.Record{Kind: audit.KindAuthFailure, Object: summary}); aerr != nil {
			return aerr
		}
		return err
	}
	ex.Agent = a
	ex.Check(scope.Verdict{Check: scope.CheckAuth, Verdict: "pass", Method: method})
	ex.Authenticated()
	if ex.Team, err = s.teamOf(r.Context(), a); err != nil {
		return err
	}
	if behalf != nil {
		r = r.WithContext(WithBehalf(r.Context(), *behalf))
	}
	next.ServeHTTP(w, r)
	return nil
}

// teamOf finds a's team. An agent whose team cannot be found is refused
// rather than served without the team's limits: the team's budget is a
// promise to whoever pays for it.
func (s *Identifier) teamOf(ctx context.Context, a *roster.Agent) (*team.Team, error) {
	if a.Team == "" {
		return nil, nil
	}
	var t *team.Team
	found := false
	if s.Teams != nil {
		var err error
		if t, found, err = s.Teams.Team(ctx, a.Team); err != nil {
			return nil, StateError("team", err)
		}
	}
	if !found {
		return nil, &apierror.Error{Status: http.StatusForbidden, Type: apierror.TypePermission, Code: "team_not_found",
			Message: fmt.Sprintf("Agent %s belongs to team %s, which is not defined; ask the gateway's operator.", a.ID, a.Team)}
	}
	return t, nil
}

// Identify returns the agent a request authenticates as: by bearer token,
// by the SPIFFE ID of a verified client certificate, or as the sidecar's
// agent. A token and a certificate that name different agents are refused.
func (s *Identifier) Identify(r *http.Request) (*roster.Agent, error) {
	a, _, err := s.identify(r)
	return a, err
}

// identify is Identify, also returning how the agent was identified (the
// auth check's method: token, sidecar, mtls, workflow or in_process).
//
// At a sidecar one rule holds for every front door: the request is the
// sidecar's agent, with no key or with any key that is not a known
// agent's token (the placeholder an SDK insists on sending: OpenAI's and
// Azure's SDKs refuse to run without one), and with the agent's own
// token. The token of another known agent, configured or spawned, is
// refused: a pod holding it is misconfigured or has a token it should not,
// and either is worth a refusal and an audit entry rather than a silent
// attribution to the sidecar's agent.
func (s *Identifier) identify(r *http.Request) (*roster.Agent, string, error) {
	if acting, ok := scope.ActingOf(r.Context()); ok {
		if acting.Self != nil {
			// The gateway calling for itself (no network request can
			// carry a context value).
			return acting.Self, "gateway", nil
		}
		// The gateway's own call as the agent: a workflow step, or the
		// registry embedding the querying agent's text.
		method := "in_process"
		if acting.RunID != "" {
			method = "workflow"
		}
		a, err := s.acting(acting.AgentID)
		return a, method, err
	}
	certAgent, spiffe := s.fromCertificate(r)
	tok, present, err := credential(r)
	if err != nil {
		return nil, "", err
	}
	if present {
		a, method, err := s.byToken(r, tok)
		if err != nil {
			return nil, "", err
		}
		if spiffe != "" && a != certAgent {
			return nil, "", apierror.Unauthorized("The token and the client certificate name different agents.")
		}
		return a, method, nil
	}
	switch {
	case certAgent != nil:
		return certAgent, "mtls", nil
	case spiffe != "":
		return nil, "", apierror.Unauthorized("The client certificate's SPIFFE ID is not registered to any agent.")
	case s.sidecar != nil:
		a, err := s.sidecarAgent(r)
		return a, "sidecar", err
	}
	return nil, "", apierror.Unauthorized("You didn't provide an API key. Send your gateway token as 'Authorization: Bearer <token>'.")
}

// sidecarAgent is the sidecar's agent for a request that carries no token
// of it (none, or a placeholder).
func (s *Identifier) sidecarAgent(r *http.Request) (*roster.Agent, error) {
	if browserContext(r) {
		// A web page can make a browser send a token-less request to a
		// loopback sidecar (a text/plain POST needs no preflight): only a
		// local process, never a page, speaks for the agent.
		return nil, apierror.Unauthorized("A request from a browser context (an Origin header, or a body that is not application/json) needs the agent's token, even at a sidecar.")
	}
	return s.sidecar, nil
}

// acting returns the agent of an in-process caller (a workflow step): one
// of the configured agents, and at a sidecar only the sidecar's own.
func (s *Identifier) acting(id string) (*roster.Agent, error) {
	a, ok := s.byID[id]
	switch {
	case !ok:
		return nil, apierror.Unauthorized("The workflow step's agent " + strconv.Quote(id) + " is not in agents.yaml.")
	case s.sidecar != nil && a != s.sidecar:
		return nil, apierror.Unauthorized("This sidecar gateway serves agent " + s.sidecar.ID + " only.")
	}
	return a, nil
}

// fromCertificate returns the agent named by the SPIFFE ID (URI SAN) of the
// client certificate the TLS layer verified, and the ID itself.
func (s *Identifier) fromCertificate(r *http.Request) (*roster.Agent, string) {
	if r.TLS == nil || len(r.TLS.VerifiedChains) == 0 || len(r.TLS.PeerCertificates) == 0 {
		return nil, ""
	}
	for _, u := range r.TLS.PeerCertificates[0].URIs {
		if u.Scheme == "spiffe" {
			id := u.String()
			return s.bySPIFFE[id], id
		}
	}
	return nil, ""
}

// byToken finds the agent whose token hash matches, a configured agent
// else one spawned at run time, and returns it with the auth method. A
// token no agent holds is refused, except at a sidecar, where it is a
// placeholder and the request the sidecar's agent (see identify).
func (s *Identifier) byToken(r *http.Request, tok string) (*roster.Agent, string, error) {
	ctx := r.Context()
	h := sha256.Sum256([]byte(tok))
	var match *roster.Agent
	for i := range s.agents {
		if subtle.ConstantTimeCompare(h[:], s.agents[i].hash[:]) == 1 {
			match = s.agents[i].agent
		}
	}
	spawned := false
	if match == nil && s.Keys != nil {
		a, err := s.runtimeKey(ctx, h)
		if err != nil {
			return nil, "", err
		}
		match = a
	}
	if match == nil && s.Spawned != nil {
		// Looked up at a sidecar too: a spawned agent's token is a known
		// agent's, to refuse there, not a placeholder.
		a, ok, err := s.Spawned.AgentByToken(ctx, h)
		switch {
		case ok:
			match, spawned = a, true
		case err != nil:
			// The registry could not be read: no answer about the token,
			// so no identity, but not "incorrect" either.
			return nil, "", apierror.StateUnavailable(err)
		}
	}
	switch {
	case match == nil && s.sidecar != nil:
		a, err := s.sidecarAgent(r)
		return a, "sidecar", err
	case match == nil:
		return nil, "", apierror.Unauthorized("Incorrect API key provided.")
	case s.sidecar != nil && match != s.sidecar:
		// A sidecar speaks for exactly one agent.
		return nil, "", apierror.Unauthorized("This sidecar gateway serves agent " + s.sidecar.ID + " only; the request carries another agent's token.")
	}
	if spawned {
		if err := s.Spawned.Touch(ctx, match.ID); err != nil && s.Log != nil {
			s.Log.Warn("spawned agent: use not recorded (it may expire early)", "agent", match.ID, "error", err.Error())
		}
	}
	return match, "token", nil
}

// runtimeKey is the agent of a key issued through the admin API, or nil.
// A run-time agent whose name agents.yaml now also defines is refused
// rather than either one chosen: gateway config check names the clash.
func (s *Identifier) runtimeKey(ctx context.Context, h [sha256.Size]byte) (*roster.Agent, error) {
	name, runtime, ok, err := s.Keys.AgentByKey(ctx, h)
	switch {
	case err != nil:
		return nil, apierror.StateUnavailable(err)
	case !ok:
		return nil, nil
	case runtime == nil:
		// A key of an agents.yaml agent: the agent as this configuration
		// has it, or nobody if the file no longer defines it.
		return s.byID[name], nil
	case s.byID[name] != nil:
		return nil, apierror.Unauthorized("Agent " + strconv.Quote(name) + " is defined both in agents.yaml and through the admin API; its run-time keys are refused until one of them goes (see gateway config check).")
	}
	return runtime, nil
}

// browserContext reports whether a request bears the marks of a browser
// page: an Origin header, or a body whose type is not JSON.
func browserContext(r *http.Request) bool {
	if r.Header.Get("Origin") != "" {
		return true
	}
	switch r.Method {
	case http.MethodPost, http.MethodPut, http.MethodPatch:
		mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
		return err != nil || mt != "application/json"
	}
	return false
}

// credential extracts the agent's gateway token from the headers the
// SDKs send it in: "Authorization: Bearer <t>" (OpenAI's), "api-key: <t>"
// (Azure OpenAI's) or "x-api-key: <t>" (Anthropic's). present reports
// whether a credential header was sent at all (an empty value counts as
// none). Every value of the three headers is read, not the first found: a
// malformed one, or two that carry different tokens, is refused rather than
// one of them chosen, so which header wins can never decide the identity
// (nor can a token hidden behind another be "tried" unnoticed). The same
// token sent twice (a client setting both Authorization and api-key) is
// one credential.
func credential(r *http.Request) (tok string, present bool, err error) {
	var found []string
	for _, name := range []string{"Authorization", "Api-Key", "X-Api-Key"} {
		for _, v := range r.Header.Values(name) {
			if v == "" {
				continue
			}
			t := strings.TrimSpace(v)
			if name == "Authorization" {
				scheme, rest, ok := strings.Cut(t, " ")
				if !ok || !strings.EqualFold(scheme, "Bearer") {
					return "", true, apierror.Unauthorized("Malformed Authorization header: want 'Bearer <token>'.")
				}
				t = strings.TrimSpace(rest)
			}
			if t == "" {
				return "", true, apierror.Unauthorized("Malformed " + name + " header: it carries no token.")
			}
			found = append(found, t)
		}
	}
	if len(found) == 0 {
		return "", false, nil
	}
	for _, t := range found[1:] {
		// Both are the caller's own strings, so their comparison reveals
		// nothing of a stored hash; constant time all the same, as every
		// token comparison here.
		if subtle.ConstantTimeCompare([]byte(t), []byte(found[0])) != 1 {
			return "", true, apierror.Unauthorized("The request carries two different tokens (in Authorization, api-key or x-api-key): send the gateway token once.")
		}
	}
	return found[0], true, nil
}
