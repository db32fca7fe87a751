package proxy

import (
	"crypto/sha256"
	"crypto/subtle"
	"net"
	"net/http"
	"strings"

	"github.com/sacpgw/gateway/apierror"
	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/config"
	"github.com/sacpgw/gateway/scope"
)

// Identifier is the identify stage: bearer token → agent.
//
// Tokens are never stored: the token's SHA-256 is compared with every
// agent's configured hash in constant time, and the loop never exits early,
// so timing tells nothing about which hash, or how much of one, matched.
type Identifier struct {
	agents  []tokenEntry
	sidecar *config.Agent
	// Audit records failed authentications (never the token).
	Audit *Recorder
}

type tokenEntry struct {
	hash  [sha256.Size]byte
	agent *config.Agent
}

// NewIdentifier builds the stage. A non-empty sidecar names the agent that
// requests without a token are attributed to (sidecar mode).
func NewIdentifier(agents map[string]*config.Agent, sidecar string) (*Identifier, error) {
	id := &Identifier{}
	for _, a := range agents {
		if a.TokenSHA256 != "" {
			id.agents = append(id.agents, tokenEntry{hash: a.TokenHash, agent: a})
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

// Serve implements Stage.
func (s *Identifier) Serve(w http.ResponseWriter, r *http.Request, next http.Handler) error {
	ex := scope.Get(r.Context())
	a, err := s.Identify(r)
	if err != nil {
		ex.Audited = true
		e := apierror.From(err)
		summary := map[string]any{"route": r.URL.Path, "method": r.Method, "reason": e.Message, "remote": clientIP(r)}
		if aerr := s.Audit.Write(r.Context(), record(ex, audit.KindAuthFailure, "", summary)); aerr != nil {
			return aerr
		}
		return err
	}
	ex.Agent = a
	method := "token"
	if _, present := bearer(r); !present {
		method = "sidecar"
	}
	ex.Check("auth", map[string]any{"verdict": "pass", "method": method})
	next.ServeHTTP(w, r)
	return nil
}

// Identify returns the agent a request authenticates as.
func (s *Identifier) Identify(r *http.Request) (*config.Agent, error) {
	tok, present := bearer(r)
	if present && tok == "" {
		return nil, apierror.Unauthorized("Malformed Authorization header: want 'Bearer <token>'.")
	}
	if !present {
		if s.sidecar != nil {
			return s.sidecar, nil
		}
		return nil, apierror.Unauthorized("You didn't provide an API key. Send your gateway token as 'Authorization: Bearer <token>'.")
	}
	h := sha256.Sum256([]byte(tok))
	var match *config.Agent
	for i := range s.agents {
		if subtle.ConstantTimeCompare(h[:], s.agents[i].hash[:]) == 1 {
			match = s.agents[i].agent
		}
	}
	switch {
	case match == nil:
		return nil, apierror.Unauthorized("Incorrect API key provided.")
	case s.sidecar != nil && match != s.sidecar:
		// A sidecar speaks for exactly one agent.
		return nil, apierror.Unauthorized("This sidecar gateway serves agent " + s.sidecar.ID + " only.")
	}
	return match, nil
}

// clientIP is the peer address without the port; proxies in front of the
// gateway are not trusted to rewrite it.
func clientIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// bearer extracts the token from "Authorization: Bearer <t>" or Azure's
// "api-key: <t>" header. present reports whether a credential header was
// sent at all; a present but malformed one yields "".
func bearer(r *http.Request) (tok string, present bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		scheme, t, ok := strings.Cut(strings.TrimSpace(h), " ")
		if ok && strings.EqualFold(scheme, "Bearer") {
			return strings.TrimSpace(t), true
		}
		return "", true
	}
	if h := r.Header.Get("Api-Key"); h != "" {
		return strings.TrimSpace(h), true
	}
	return "", false
}
