package oauthserver

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/mcpauth"
)

// The token endpoint (RFC 6749 with OAuth 2.1's rules): a code, spent
// once, for the client it was issued to, at the redirect URI it was
// issued for, with the PKCE verifier of its challenge; or a refresh
// token, spent once, rotated. A code or refresh token presented after it
// was spent revokes every token of its grant (its family): one of the
// two presenters is not the client.

// grant is what a code or a refresh token carries: the person's consent.
type grant struct {
	ClientID string `json:"client_id"`
	Server   string `json:"server"`
	Agent    string `json:"agent"`
	Scope    string `json:"scope,omitempty"`
	Subject  string `json:"sub"`
	Email    string `json:"email,omitempty"`
	Name     string `json:"name"`
	// Family names the tokens of one consent; Ends is when the last of
	// them ends (unix seconds).
	Family string `json:"family"`
	Ends   int64  `json:"ends"`
	// A code's only.
	RedirectURI string `json:"redirect_uri,omitempty"`
	Challenge   string `json:"challenge,omitempty"`
}

// access is an access token's record.
type access struct {
	Agent   string `json:"agent"`
	Path    string `json:"path"`
	Subject string `json:"sub"`
	Email   string `json:"email,omitempty"`
	Name    string `json:"name"`
	Family  string `json:"family"`
}

// family is the store keys of a consent's current tokens, for revocation.
type family struct {
	Access  string `json:"at"`
	Refresh string `json:"rt,omitempty"`
}

const (
	maxTokenRequest = 8 << 10
	refreshPrefix   = "gwmcp_rt_"
)

// verifierRE is a PKCE code verifier (RFC 7636 4.1).
var verifierRE = regexp.MustCompile(`^[A-Za-z0-9._~-]{43,128}$`)

// tokenRequest reads a token request: a form, each parameter at most once.
func tokenRequest(r *http.Request) (map[string]string, error) {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if err != nil || mt != "application/x-www-form-urlencoded" {
		return nil, fmt.Errorf("send the request as application/x-www-form-urlencoded")
	}
	body, err := httpx.ReadLimited(r, maxTokenRequest)
	if err != nil {
		return nil, fmt.Errorf("the body is unreadable or larger than %d bytes", maxTokenRequest)
	}
	return parseTokenForm(string(body))
}

// parseTokenForm parses a token request's body strictly.
func parseTokenForm(body string) (map[string]string, error) {
	v, err := url.ParseQuery(body)
	if err != nil {
		return nil, fmt.Errorf("the form is malformed")
	}
	return single(v)
}

// token serves POST /oauth/token.
func (s *Door) token(w http.ResponseWriter, r *http.Request, c *conf) {
	if r.Header.Get("Authorization") != "" {
		// Every client here is public; a client that authenticates
		// believes in a registration that is not this server's.
		s.tokenRefused(w, r, http.StatusUnauthorized, "invalid_client", "This server registers public clients only: send client_id in the form, no Authorization.", nil)
		return
	}
	f, err := tokenRequest(r)
	if err != nil {
		s.tokenRefused(w, r, http.StatusBadRequest, "invalid_request", err.Error(), nil)
		return
	}
	switch f["grant_type"] {
	case "authorization_code":
		s.exchangeCode(w, r, c, f)
	case "refresh_token":
		s.refresh(w, r, c, f)
	default:
		s.tokenRefused(w, r, http.StatusBadRequest, "unsupported_grant_type", "grant_type: authorization_code or refresh_token.", nil)
	}
}

// exchangeCode answers grant_type=authorization_code.
func (s *Door) exchangeCode(w http.ResponseWriter, r *http.Request, c *conf, f map[string]string) {
	g, key, ok := s.spend(w, r, kindCode, f["code"], "authorization code")
	if !ok {
		return
	}
	var problem string
	switch {
	case subtle.ConstantTimeCompare([]byte(f["client_id"]), []byte(g.ClientID)) != 1:
		problem = "the code was issued to another client"
	case f["redirect_uri"] != g.RedirectURI:
		problem = "redirect_uri is not the one the code was issued for"
	case !verifierRE.MatchString(f["code_verifier"]) || subtle.ConstantTimeCompare([]byte(s256(f["code_verifier"])), []byte(g.Challenge)) != 1:
		problem = "code_verifier does not match the code's challenge (PKCE S256)"
	case f["resource"] != "" && f["resource"] != c.set.Resource(g.Server):
		problem = "resource is not the one the code was issued for"
	}
	if problem != "" {
		// The code is spent all the same: a wrong guess costs it.
		s.tokenRefused(w, r, http.StatusBadRequest, "invalid_grant", "The code is refused: "+problem+".", &g)
		return
	}
	s.mark(r.Context(), key, g)
	s.issue(w, r, c, g, "authorization_code")
}

// refresh answers grant_type=refresh_token.
func (s *Door) refresh(w http.ResponseWriter, r *http.Request, c *conf, f map[string]string) {
	g, key, ok := s.spend(w, r, kindRefresh, f["refresh_token"], "refresh token")
	if !ok {
		return
	}
	s.mark(r.Context(), key, g)
	switch {
	case subtle.ConstantTimeCompare([]byte(f["client_id"]), []byte(g.ClientID)) != 1:
		// Another client holds this client's refresh token: stolen.
		s.revoke(r.Context(), g.Family)
		s.tokenRefused(w, r, http.StatusBadRequest, "invalid_grant", "The refresh token was issued to another client; its grant is revoked.", &g)
		return
	case f["resource"] != "" && f["resource"] != c.set.Resource(g.Server):
		s.tokenRefused(w, r, http.StatusBadRequest, "invalid_target", "resource is not the one the grant is for.", &g)
		return
	}
	s.issue(w, r, c, g, "refresh_token")
}

// spend takes the code or refresh token secret (of kind) once: its grant
// and store key; false once it has answered a secret that is not (or no
// longer) good.
func (s *Door) spend(w http.ResponseWriter, r *http.Request, kind, secret, what string) (grant, string, bool) {
	key := mcpauth.Key(secret)
	g, ok, err := mcpauth.Take[grant](r.Context(), s.store, kind, key)
	switch {
	case err != nil:
		s.unavailable(w, r, what, err)
	case !ok:
		s.spentAgain(w, r, key, what)
	}
	return g, key, err == nil && ok
}

// mark remembers that the code or refresh token of key was spent, for as
// long as its family may live, so that presenting it again revokes the
// family.
func (s *Door) mark(ctx context.Context, key string, g grant) {
	if ttl := time.Until(time.Unix(g.Ends, 0)); ttl > 0 {
		if err := s.store.Put(ctx, kindSpent, key, []byte(g.Family), ttl); err != nil {
			s.log.Warn("oauth: spent token not remembered (its reuse will not revoke its grant)", "error", err.Error())
		}
	}
}

// spentAgain answers a code or refresh token that is not (or no longer)
// valid; one that was spent before revokes its family's tokens.
func (s *Door) spentAgain(w http.ResponseWriter, r *http.Request, key, what string) {
	fam, spent, err := s.store.Get(r.Context(), kindSpent, key)
	if err != nil {
		s.unavailable(w, r, "reuse check", err)
		return
	}
	if spent {
		s.revoke(r.Context(), string(fam))
		s.tokenRefused(w, r, http.StatusBadRequest, "invalid_grant", "The "+what+" was already used: every token of its grant is revoked; sign in again.", nil)
		return
	}
	s.tokenRefused(w, r, http.StatusBadRequest, "invalid_grant", "The "+what+" is not valid: expired, revoked or never issued.", nil)
}

// revoke ends a family's current tokens.
func (s *Door) revoke(ctx context.Context, fam string) {
	f, ok, err := mcpauth.Take[family](ctx, s.store, kindFamily, fam)
	if err != nil || !ok {
		if err != nil {
			s.log.Error("oauth: family not revoked", "error", err.Error())
		}
		return
	}
	for kind, key := range map[string]string{kindAccess: f.Access, kindRefresh: f.Refresh} {
		if key == "" {
			continue
		}
		if err := s.store.Delete(ctx, kind, key); err != nil {
			s.log.Error("oauth: token not revoked", "kind", kind, "error", err.Error())
		}
	}
}

// issue stores and answers a new access token (and refresh token, for a
// client registered for them) of g, replacing the family's current ones.
func (s *Door) issue(w http.ResponseWriter, r *http.Request, c *conf, g grant, how string) {
	ctx := r.Context()
	ends := time.Unix(g.Ends, 0)
	left := time.Until(ends)
	if left <= 0 {
		s.tokenRefused(w, r, http.StatusBadRequest, "invalid_grant", "The grant has ended; sign in again.", &g)
		return
	}
	cl, ok, err := mcpauth.Get[client](ctx, s.store, kindClient, g.ClientID)
	if err != nil {
		s.unavailable(w, r, "token", err)
		return
	}
	if !ok {
		s.tokenRefused(w, r, http.StatusBadRequest, "invalid_client", "The client's registration expired; register again.", &g)
		return
	}
	s.revoke(ctx, g.Family)
	at := mcpauth.Secret(door.ClientTokenPrefix)
	atTTL := min(c.set.AccessTokenTTL.D(), left)
	fam := family{Access: mcpauth.Key(at)}
	rec := access{Agent: g.Agent, Path: mcpauth.ResourcePath(g.Server), Subject: g.Subject, Email: g.Email, Name: g.Name, Family: g.Family}
	if err := mcpauth.Put(ctx, s.store, kindAccess, fam.Access, rec, atTTL); err != nil {
		s.unavailable(w, r, "token", err)
		return
	}
	out := map[string]any{"access_token": at, "token_type": "Bearer", "expires_in": int(atTTL / time.Second), "scope": "mcp"}
	if cl.refreshes() {
		rt := mcpauth.Secret(refreshPrefix)
		fam.Refresh = mcpauth.Key(rt)
		g.RedirectURI, g.Challenge = "", ""
		if err := mcpauth.Put(ctx, s.store, kindRefresh, fam.Refresh, g, left); err != nil {
			s.unavailable(w, r, "token", err)
			return
		}
		out["refresh_token"] = rt
	}
	if err := mcpauth.Put(ctx, s.store, kindFamily, g.Family, fam, left); err != nil {
		s.unavailable(w, r, "token", err)
		return
	}
	if err := s.record(r, KindToken, g.Agent, &door.Person{Subject: g.Subject, Email: g.Email, Name: g.Name},
		map[string]any{"client_id": g.ClientID, "server": g.Server, "grant_type": how}); err != nil {
		// Closed audit: no token whose issue is not on the trail.
		s.revoke(ctx, g.Family)
		httpx.Fail(w, r, err)
		return
	}
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Pragma", "no-cache")
	httpx.WriteJSON(w, r, http.StatusOK, out)
}

// s256 is PKCE's S256 transform of a verifier.
func s256(verifier string) string {
	h := sha256.Sum256([]byte(verifier))
	return base64.RawURLEncoding.EncodeToString(h[:])
}

// Tokens are the access tokens of Store as the identify stage asks for
// them (door.ClientTokens); the frame holds it from start-up, before the
// doors are built.
type Tokens struct{ Store mcpauth.Store }

// ClientToken implements door.ClientTokens: the grant of an access token,
// by its SHA-256.
func (t Tokens) ClientToken(ctx context.Context, sum [sha256.Size]byte) (door.ClientGrant, bool, error) {
	a, ok, err := mcpauth.Get[access](ctx, t.Store, kindAccess, hex.EncodeToString(sum[:]))
	if err != nil || !ok {
		return door.ClientGrant{}, false, err
	}
	return door.ClientGrant{Agent: a.Agent, Path: a.Path, Person: door.Behalf{Subject: a.Subject, Email: a.Email, Name: a.Name}}, true, nil
}

var _ door.ClientTokens = Tokens{}

// oauthError answers an OAuth error (RFC 6749 5.2).
func oauthError(w http.ResponseWriter, r *http.Request, status int, code, desc string) {
	w.Header().Set("Cache-Control", "no-store")
	httpx.WriteJSON(w, r, status, map[string]string{"error": code, "error_description": desc})
}

// tokenRefused answers a refused token request and audits it as an
// auth.failure of its source (limited and summarized per source like
// every unauthenticated failure), naming the grant's person when known.
func (s *Door) tokenRefused(w http.ResponseWriter, r *http.Request, status int, code, desc string, g *grant) {
	sum := &audit.Object{}
	sum.Str("route", r.URL.Path)
	sum.Str("method", r.Method)
	sum.Str("reason", code+": "+desc)
	sum.Str("remote", door.RemoteIP(r))
	rec := audit.Record{Kind: audit.KindAuthFailure, Object: sum}
	if g != nil {
		rec.AgentID = g.Agent
		sum.Str("client_id", g.ClientID)
		sum.Any("on_behalf_of", map[string]any{"subject": g.Subject, "email": g.Email})
	}
	if err := door.JournalOf(r, s.audit).Refused(r.Context(), rec); err != nil {
		httpx.Fail(w, r, err)
		return
	}
	oauthError(w, r, status, code, desc)
}

// unavailable answers a store that failed: 503, retry later.
func (s *Door) unavailable(w http.ResponseWriter, r *http.Request, what string, err error) {
	s.log.Error("oauth: "+what+": store unavailable", "error", err.Error())
	w.Header().Set("Retry-After", "5")
	oauthError(w, r, http.StatusServiceUnavailable, "temporarily_unavailable", "The authorization server's state cannot be reached; retry shortly.")
}

// record writes an oauth.* entry naming the person (never a token); its
// error is the recorder's (audit.fail_mode closed: 503).
func (s *Door) record(r *http.Request, kind, agent string, who *door.Person, fields map[string]any) error {
	sum := &audit.Object{}
	if who != nil {
		fields["on_behalf_of"] = map[string]any{"subject": who.Subject, "email": who.Email}
	}
	for k, v := range fields {
		sum.Any(k, v)
	}
	sum.Str("remote", door.RemoteIP(r))
	rec := audit.Record{Kind: kind, AgentID: agent, Object: sum}
	return door.JournalOf(r, s.audit).Refused(r.Context(), rec)
}
