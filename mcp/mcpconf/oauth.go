package mcpconf

import (
	"encoding/base64"
	"errors"
	"net"
	"net/textproto"
	"net/url"

	"github.com/sacpgw/gateway/internal/confkit"
)

// TokenKey decodes a token_key: 32 bytes (AES-256) in standard base64.
func TokenKey(s string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(k) != 32 {
		return nil, errors.New("want 32 bytes in base64 (such as the output of openssl rand -base64 32)")
	}
	return k, nil
}

// checkKeys checks token_key and previous_token_keys; the key itself is
// never quoted back.
func (m *Settings) checkKeys(r confkit.Reporter) {
	delegated := false
	for _, s := range m.Servers {
		delegated = delegated || s.OAuth != nil && s.OAuth.Delegated != nil
	}
	switch {
	case m.TokenKey == "" && delegated:
		r.Add(r.Line("token_key"), "mcp.token_key: required when a server has oauth.delegated (it encrypts the people's tokens); write it as ${VAR}")
	case m.TokenKey != "":
		if _, err := TokenKey(m.TokenKey); err != nil {
			r.Add(r.Line("token_key"), "mcp.token_key: %v", err)
		}
	}
	if m.PreviousTokenKey != "" {
		if _, err := TokenKey(m.PreviousTokenKey); err != nil {
			r.Add(r.Line("previous_token_key"), "mcp.previous_token_key: %v", err)
		}
	}
}

// oauth checks a server's oauth.
func (c check) oauth(s *Server) {
	o := s.OAuth
	if o == nil {
		return
	}
	i := c.i
	if s.URL == "" {
		c.add("oauth", "mcp.servers[%d].oauth: only a Streamable HTTP server (url) has one", i)
	}
	for name := range s.Headers {
		if textproto.CanonicalMIMEHeaderKey(name) == "Authorization" {
			c.r.Add(c.r.Line("headers", name), "mcp.servers[%d].headers: Authorization is the oauth token's", i)
		}
	}
	r := confkit.Sub(c.r, "oauth")
	switch {
	case (o.ClientCredentials == nil) == (o.Delegated == nil):
		c.add("oauth", "mcp.servers[%d].oauth: give one of client_credentials or delegated", i)
	case o.ClientCredentials != nil:
		cc := o.ClientCredentials
		key := check{r: confkit.Sub(r, "client_credentials"), i: i}
		key.endpoint("oauth.client_credentials.token_url", "token_url", cc.TokenURL, true)
		key.client("oauth.client_credentials", cc.ClientID, cc.ClientSecret, true)
		if cc.Resource != "" && !confkit.HTTPURL(cc.Resource) {
			key.add("resource", "mcp.servers[%d].oauth.client_credentials.resource %q: want the server's absolute URL", i, cc.Resource)
		}
	default:
		d := o.Delegated
		key := check{r: confkit.Sub(r, "delegated"), i: i}
		key.endpoint("oauth.delegated.authorization_url", "authorization_url", d.AuthorizationURL, false)
		key.endpoint("oauth.delegated.token_url", "token_url", d.TokenURL, false)
		key.client("oauth.delegated", d.ClientID, d.ClientSecret, false)
	}
}

// endpoint checks an authorization server's endpoint.
func (c check) endpoint(field, key, u string, required bool) {
	if u == "" && !required {
		return
	}
	if !SecureURL(u) {
		c.add(key, "mcp.servers[%d].%s %q: want an https URL (http only on a loopback address)", c.i, field, u)
	}
}

// client checks the gateway's registration at an authorization server.
func (c check) client(field, id, secret string, secretRequired bool) {
	if id == "" {
		c.add("client_id", "mcp.servers[%d].%s.client_id: required (the gateway's client there)", c.i, field)
	}
	if secret == "" && secretRequired {
		c.add("client_secret", "mcp.servers[%d].%s.client_secret: required; write it as ${VAR}", c.i, field)
	}
}

// SecureURL reports whether s is an absolute https URL, or http on a
// loopback address (tests, a local sidecar), without credentials or
// fragment: where a client's secret and tokens may travel.
func SecureURL(s string) bool {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.User != nil || u.Fragment != "" {
		return false
	}
	if u.Scheme == "https" {
		return true
	}
	ip := net.ParseIP(u.Hostname())
	return u.Scheme == "http" && (u.Hostname() == "localhost" || ip != nil && ip.IsLoopback())
}
