package oauthserver

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/mcpauth"
	"github.com/sacpgw/gateway/internal/strictjson"
	"github.com/sacpgw/gateway/limit"
)

// Dynamic client registration (RFC 7591). Anyone may register: a client
// is nothing until a person consents on a page that names it and where
// its codes go. So registration is bounded instead: per source address,
// in size, and each registration expires (mcp_clients.client_ttl).

// client is a registered client. Every client is public (PKCE is its
// proof; it holds no secret).
type client struct {
	ID           string   `json:"id"`
	Name         string   `json:"name,omitempty"`
	RedirectURIs []string `json:"redirect_uris"`
	GrantTypes   []string `json:"grant_types"`
	IssuedAt     int64    `json:"iat"`
}

// refreshes reports whether the client registered for refresh tokens.
func (c client) refreshes() bool { return slices.Contains(c.GrantTypes, "refresh_token") }

// Bounds of a registration.
const (
	maxRegistration = 16 << 10
	maxRedirectURIs = 10
	maxURILength    = 2000
	maxClientName   = 100
	clientIDPrefix  = "gwmcp_client_"
)

// registration is the metadata of RFC 7591 the gateway reads; other
// members are ignored, as the RFC asks, but each of these must have its
// type, and no member may appear twice or as a case variant of these.
type registration struct {
	RedirectURIs            []string `json:"redirect_uris"`
	ClientName              *string  `json:"client_name"`
	GrantTypes              []string `json:"grant_types"`
	ResponseTypes           []string `json:"response_types"`
	TokenEndpointAuthMethod *string  `json:"token_endpoint_auth_method"`
	Scope                   *string  `json:"scope"`
}

var registrationShape = strictjson.Object(map[string]*strictjson.Fields{
	"redirect_uris": nil, "client_name": nil, "grant_types": nil, "response_types": nil,
	"token_endpoint_auth_method": nil, "scope": nil,
})

// errMetadata is a registration refused: RFC 7591's
// invalid_client_metadata or invalid_redirect_uri.
type errMetadata struct{ code, msg string }

func (e *errMetadata) Error() string { return e.code + ": " + e.msg }

func metadataError(format string, args ...any) error {
	return &errMetadata{"invalid_client_metadata", fmt.Sprintf(format, args...)}
}

// parseRegistration reads a registration request's body strictly and
// returns the client it registers (without its id).
func parseRegistration(body []byte) (client, error) {
	if err := strictjson.Check(body, registrationShape); err != nil {
		return client{}, metadataError("the body is not a JSON object read strictly: %v", err)
	}
	var reg registration
	if err := json.Unmarshal(body, &reg); err != nil {
		return client{}, metadataError("a member has the wrong type: %v", err)
	}
	c := client{RedirectURIs: reg.RedirectURIs, GrantTypes: reg.GrantTypes}
	if len(c.RedirectURIs) == 0 || len(c.RedirectURIs) > maxRedirectURIs {
		return client{}, &errMetadata{"invalid_redirect_uri", fmt.Sprintf("redirect_uris: want 1 to %d URIs", maxRedirectURIs)}
	}
	for _, u := range c.RedirectURIs {
		if err := checkRedirectURI(u); err != nil {
			return client{}, &errMetadata{"invalid_redirect_uri", err.Error()}
		}
	}
	if reg.ClientName != nil {
		name := *reg.ClientName
		if utf8.RuneCountInString(name) > maxClientName || strings.IndexFunc(name, unicode.IsControl) >= 0 {
			return client{}, metadataError("client_name: at most %d characters, none of them a control character", maxClientName)
		}
		c.Name = name
	}
	if len(c.GrantTypes) == 0 {
		c.GrantTypes = []string{"authorization_code"}
	}
	for _, g := range c.GrantTypes {
		if g != "authorization_code" && g != "refresh_token" {
			return client{}, metadataError("grant_types: %s is not supported (authorization_code, refresh_token)", strconv.Quote(clip(g)))
		}
	}
	if !slices.Contains(c.GrantTypes, "authorization_code") {
		return client{}, metadataError("grant_types: authorization_code is required")
	}
	for _, rt := range reg.ResponseTypes {
		if rt != "code" {
			return client{}, metadataError("response_types: only code is supported")
		}
	}
	return c, nil
}

// checkRedirectURI accepts what a client may have its codes sent to: an
// absolute URI without a fragment, https, or http on a loopback address
// (a native app's listener, RFC 8252), or an app's private-use scheme; never
// a scheme a browser runs (javascript:, data:...).
func checkRedirectURI(s string) error {
	u, err := url.Parse(s)
	switch {
	case len(s) > maxURILength || err != nil || !u.IsAbs():
		return fmt.Errorf("redirect URI %s: want an absolute URI of at most %d characters", strconv.Quote(clip(s)), maxURILength)
	case u.Fragment != "" || strings.Contains(s, "#"):
		return fmt.Errorf("redirect URI %s: no fragment allowed", strconv.Quote(clip(s)))
	case u.User != nil:
		return fmt.Errorf("redirect URI %s: no user information allowed", strconv.Quote(clip(s)))
	}
	switch scheme := strings.ToLower(u.Scheme); scheme {
	case "https":
		if u.Host == "" {
			return fmt.Errorf("redirect URI %s: no host", strconv.Quote(clip(s)))
		}
	case "http":
		if !mcpauth.Loopback(u.Hostname()) {
			return fmt.Errorf("redirect URI %s: http only to a loopback address (use https)", strconv.Quote(clip(s)))
		}
	case "javascript", "data", "vbscript", "file", "blob", "about", "ftp", "ws", "wss":
		return fmt.Errorf("redirect URI %s: scheme %s is not allowed", strconv.Quote(clip(s)), scheme)
	}
	return nil
}

// clip bounds what a refusal quotes back of a client's value.
func clip(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}

// register serves POST /oauth/register.
func (s *Door) register(w http.ResponseWriter, r *http.Request, c *conf) {
	ip := door.RemoteIP(r)
	rule := limit.Rule{N: c.set.Registrations.N, Period: c.set.Registrations.Period}
	res, err := s.limiter.Allow(r.Context(), "oauth-register:"+ip, rule, 1)
	switch {
	case err != nil:
		s.log.Error("client registration: limiter unavailable", "error", err.Error())
		oauthError(w, r, http.StatusServiceUnavailable, "temporarily_unavailable", "Registrations cannot be counted right now; retry later.")
		return
	case !res.Allowed:
		w.Header().Set("Retry-After", strconv.Itoa(max(1, int(res.RetryAfter/time.Second))))
		oauthError(w, r, http.StatusTooManyRequests, "slow_down", "Too many client registrations from your address; retry later.")
		return
	}
	if !jsonBody(r) {
		oauthError(w, r, http.StatusBadRequest, "invalid_client_metadata", "Send the metadata as application/json.")
		return
	}
	body, err := httpx.ReadLimited(r, maxRegistration)
	if err != nil {
		oauthError(w, r, http.StatusBadRequest, "invalid_client_metadata", fmt.Sprintf("The body is unreadable or larger than %d bytes.", maxRegistration))
		return
	}
	cl, err := parseRegistration(body)
	if em, ok := errors.AsType[*errMetadata](err); ok {
		oauthError(w, r, http.StatusBadRequest, em.code, em.msg)
		return
	}
	cl.ID, cl.IssuedAt = mcpauth.Secret(clientIDPrefix), s.now().Unix()
	if err := mcpauth.Put(r.Context(), s.store, kindClient, cl.ID, cl, c.set.ClientTTL.D()); err != nil {
		s.unavailable(w, r, "client registration", err)
		return
	}
	if err := s.record(r, KindRegister, "", nil, map[string]any{"client_id": cl.ID, "client_name": cl.Name, "redirect_uris": cl.RedirectURIs}); err != nil {
		_ = s.store.Delete(r.Context(), kindClient, cl.ID)
		httpx.Fail(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	out := map[string]any{
		"client_id": cl.ID, "client_id_issued_at": cl.IssuedAt, "redirect_uris": cl.RedirectURIs,
		"grant_types": cl.GrantTypes, "response_types": []string{"code"}, "token_endpoint_auth_method": "none",
	}
	if cl.Name != "" {
		out["client_name"] = cl.Name
	}
	httpx.WriteJSON(w, r, http.StatusCreated, out)
}

// jsonBody reports whether r's body is declared application/json.
func jsonBody(r *http.Request) bool {
	mt, _, _ := strings.Cut(r.Header.Get("Content-Type"), ";")
	return strings.EqualFold(strings.TrimSpace(mt), "application/json")
}
