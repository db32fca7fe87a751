package mcp

import (
	"net/http"
	"strconv"

	"github.com/sacpgw/gateway/internal/door"
)

// challenge is the WWW-Authenticate value of the door's 401 when the
// gateway runs the authorization server for people's MCP clients
// (mcp_clients): the pointer to the server's protected resource metadata
// (RFC 9728), from which an IDE's client learns where to sign its person
// in. A request that carried a token that is not good here is told so
// (RFC 6750 invalid_token), so the client gets a new one instead of
// retrying it. None for a server not configured, or without mcp_clients.
func (d *Door) challenge(r *http.Request) string {
	c := d.conf.Load()
	name := r.PathValue("server")
	if c.clients == nil || c.servers[name] == nil {
		return ""
	}
	v := "Bearer resource_metadata=" + strconv.Quote(c.clients.ResourceMetadata(name))
	if r.Header.Get("Authorization") != "" {
		v += `, error="invalid_token"`
	}
	return v
}

// behalfOf is the person r acts for as the audit entries name them:
// subject and e-mail (never the token); nil for an agent's own request.
func behalfOf(r *http.Request) map[string]any {
	b, ok := door.BehalfOf(r.Context())
	if !ok {
		return nil
	}
	return map[string]any{"subject": b.Subject, "email": b.Email}
}
