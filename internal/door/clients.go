package door

import (
	"context"
	"crypto/sha256"
	"net"
	"net/http"
	"strings"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
)

// ClientTokenPrefix starts every access token the gateway's authorization
// server issues to a person's MCP client, so that the identify stage asks
// the client tokens, and nothing else, about it (and agents' tokens never
// cost a lookup there).
const ClientTokenPrefix = "gwmcp_at_"

// ClientTokens finds the grant behind an access token the gateway's
// authorization server issued, by the token's SHA-256; an expired or
// revoked token is not found.
type ClientTokens interface {
	ClientToken(ctx context.Context, sum [sha256.Size]byte) (ClientGrant, bool, error)
}

// ClientGrant is what a person's consent gave their client: to act as
// Agent at the resource whose path is Path ("/mcp/files"), for Person.
type ClientGrant struct {
	Agent  string
	Path   string
	Person Behalf
}

// clientToken identifies a request that carries a client's access token:
// the token must be good, for this very resource (the audience it was
// issued for, RFC 8707: a token for /mcp/a is refused at /mcp/b and at any
// other route), and its agent still configured. The rules of certificates
// and sidecars hold as for an agent's token.
func (s *Identifier) clientToken(r *http.Request, tok string) (*roster.Agent, *Behalf, error) {
	g, ok, err := s.Clients.ClientToken(r.Context(), sha256.Sum256([]byte(tok)))
	switch {
	case err != nil:
		return nil, nil, apierror.StateUnavailable(err)
	case !ok:
		return nil, nil, apierror.Unauthorized("The access token is not valid here: expired, revoked or never issued. Sign in again.")
	case g.Path != r.URL.Path:
		return nil, nil, apierror.Unauthorized("The access token was issued for another resource than " + r.URL.Path + ".")
	}
	a := s.byID[g.Agent]
	if a == nil {
		return nil, nil, apierror.Unauthorized("The agent " + g.Agent + " this access token acts as is no longer configured.")
	}
	if certAgent, spiffe := s.fromCertificate(r); spiffe != "" && certAgent != a {
		return nil, nil, apierror.Unauthorized("The token and the client certificate name different agents.")
	}
	if s.sidecar != nil && a != s.sidecar {
		return nil, nil, apierror.Unauthorized("This sidecar gateway serves agent " + s.sidecar.ID + " only; the request carries another agent's token.")
	}
	b := g.Person
	return a, &b, nil
}

// identifyClient is identify, with a client's access token recognised
// first; behalf is the person it acts for (nil for any other credential).
func (s *Identifier) identifyClient(r *http.Request) (a *roster.Agent, method string, behalf *Behalf, err error) {
	if _, acting := scope.ActingOf(r.Context()); s.Clients != nil && !acting {
		if tok, present, cerr := credential(r); cerr == nil && present && strings.HasPrefix(tok, ClientTokenPrefix) {
			a, behalf, err = s.clientToken(r, tok)
			return a, "oauth", behalf, err
		}
	}
	a, method, err = s.identify(r)
	return a, method, nil, err
}

// RemoteIP is the peer address without the port, as the identify stage
// names a refused source: unauthenticated endpoints limit and summarize
// per source by it (proxies are not trusted to rewrite it).
func RemoteIP(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}
