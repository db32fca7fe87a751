// Package mcpauth is what the gateway's authorization server for people's
// MCP clients shares with the parts below the doors: gateway.yaml's
// mcp_clients section, the URLs a client discovers (the protected
// resource of each MCP server, its metadata, the issuer), and the store
// of registered clients, codes and tokens (this process, or Redis so that
// every replica honours them). The door itself is package oauthserver;
// the MCP door only names the metadata in its 401.
package mcpauth

import (
	"net"
	"net/url"
	"strings"
	"time"

	"github.com/sacpgw/gateway/internal/confkit"
)

// Settings is gateway.yaml's mcp_clients: the authorization server that
// lets an IDE's MCP client connect to /mcp/{server} with nothing but the
// URL, the person signing in through the organisation's provider.
type Settings struct {
	// BaseURL is the gateway's external URL (https://gw.example.org): the
	// issuer, and the prefix of every resource and endpoint the metadata
	// names. Default approval.base_url; one of them is required, as the
	// Host header a client sends is not to be trusted with it.
	BaseURL string `yaml:"base_url"`
	// AccessTokenTTL is how long an access token is good for. Default 1h.
	AccessTokenTTL confkit.Duration `yaml:"access_token_ttl"`
	// RefreshTokenTTL bounds a sign-in: refresh tokens rotate on every
	// use, none lives past this after the person consented. Default 720h.
	RefreshTokenTTL confkit.Duration `yaml:"refresh_token_ttl"`
	// ClientTTL is how long a dynamically registered client is kept
	// without a new sign-in. Default 720h.
	ClientTTL confkit.Duration `yaml:"client_ttl"`
	// Registrations bounds the dynamic client registrations of one source
	// address ("10/hour"). Default 20/hour.
	Registrations confkit.Rate `yaml:"registrations"`
}

// Defaults and bounds.
const (
	DefaultAccessTTL  = time.Hour
	DefaultRefreshTTL = 30 * 24 * time.Hour
)

// Check fills in the defaults and reports what is wrong through r.
// approvalBaseURL is approval.base_url, the default base; oidc reports
// whether people.oidc is set, without which nobody could sign in.
func (s *Settings) Check(r confkit.Reporter, approvalBaseURL string, oidc bool) {
	if s.BaseURL == "" {
		s.BaseURL = approvalBaseURL
	}
	s.BaseURL = strings.TrimSuffix(s.BaseURL, "/")
	switch {
	case s.BaseURL == "":
		r.Add(r.Line("base_url"), "mcp_clients.base_url: required (or approval.base_url): the gateway's external URL, which clients are told to sign in at")
	case !baseOK(s.BaseURL):
		r.Add(r.Line("base_url"), "mcp_clients.base_url %q: want an https URL without query or fragment (http only on a loopback address, for tests)", s.BaseURL)
	}
	if !oidc {
		r.Add(r.Line(), "mcp_clients needs people.oidc: people sign in to authorize their clients with the organisation's provider")
	}
	for _, d := range []struct {
		key string
		v   *confkit.Duration
		def time.Duration
	}{
		{"access_token_ttl", &s.AccessTokenTTL, DefaultAccessTTL},
		{"refresh_token_ttl", &s.RefreshTokenTTL, DefaultRefreshTTL},
		{"client_ttl", &s.ClientTTL, DefaultRefreshTTL},
	} {
		switch {
		case *d.v == 0:
			*d.v = confkit.Duration(d.def)
		case d.v.D() < time.Minute:
			r.Add(r.Line(d.key), "mcp_clients.%s %v: want at least 1m", d.key, d.v.D())
		}
	}
	if s.AccessTokenTTL.D() > s.RefreshTokenTTL.D() {
		r.Add(r.Line("access_token_ttl"), "mcp_clients.access_token_ttl is longer than refresh_token_ttl")
	}
	if s.Registrations.IsZero() {
		s.Registrations = confkit.Rate{N: 20, Period: time.Hour}
	}
}

// baseOK accepts an https URL, or http on a loopback address: clients
// send their codes and tokens there.
func baseOK(s string) bool {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return false
	}
	return u.Scheme == "https" || u.Scheme == "http" && Loopback(u.Hostname())
}

// Loopback reports whether host is localhost or a loopback address.
func Loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// Paths of the metadata, relative to the base URL.
const (
	// ResourceMetadataPrefix + "/mcp/{server}" is RFC 9728's metadata of
	// an MCP server (the path of the resource inserted after it).
	ResourceMetadataPrefix = "/.well-known/oauth-protected-resource"
	// ServerMetadataPath is RFC 8414's metadata of the issuer.
	ServerMetadataPath = "/.well-known/oauth-authorization-server"
)

// ResourcePath is an MCP server's resource path.
func ResourcePath(server string) string { return "/mcp/" + server }

// Resource is the resource indicator (RFC 8707) of an MCP server: its URL.
func (s *Settings) Resource(server string) string { return s.BaseURL + ResourcePath(server) }

// ResourceMetadata is the URL of an MCP server's protected resource
// metadata, the one a 401 names.
func (s *Settings) ResourceMetadata(server string) string {
	return s.BaseURL + ResourceMetadataPrefix + ResourcePath(server)
}
