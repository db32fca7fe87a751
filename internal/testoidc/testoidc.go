// Package testoidc starts a real OpenID Connect provider for tests: the
// OP of github.com/zitadel/oidc (an OpenID-certified library) over an
// in-memory store, with users who carry groups, one confidential client,
// and a login that needs no interaction (SignInAs) or a one-field form
// (for a browser). It serves discovery, JWKS, the authorization code flow
// with PKCE, userinfo and RP-initiated logout, like an organisation's
// provider would. Knobs make it misbehave the ways a relying party must
// refuse: an ID token for another audience, or with another nonce.
package testoidc

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	jose "github.com/go-jose/go-jose/v4"
	"github.com/zitadel/oidc/v3/pkg/oidc"
	"github.com/zitadel/oidc/v3/pkg/op"
	"golang.org/x/text/language"
)

// User is a person the provider knows.
type User struct {
	Subject string
	Email   string
	Name    string
	// Groups go in the ID token's groups claim (GroupsClaim) when the
	// client asks for the "groups" scope.
	Groups []string
}

// Options configure the provider.
type Options struct {
	Users []User
	// GroupsClaim names the claim that carries the groups. Default "groups".
	GroupsClaim string
	// IDTokenLifetime is how long an ID token is valid. Default 1h.
	IDTokenLifetime time.Duration
}

// Provider is a running OpenID Connect provider.
type Provider struct {
	// Issuer is the provider's URL (discovery is under
	// /.well-known/openid-configuration).
	Issuer       string
	ClientID     string
	ClientSecret string

	srv   *httptest.Server
	op    *op.Provider
	store *storage
}

// Start starts a provider for the test's duration.
func Start(t testing.TB, o Options) *Provider {
	t.Helper()
	if o.GroupsClaim == "" {
		o.GroupsClaim = "groups"
	}
	if o.IDTokenLifetime == 0 {
		o.IDTokenLifetime = time.Hour
	}
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatalf("testoidc: key: %v", err)
	}
	st := &storage{
		opts: o, key: key, keyID: randomID(), users: map[string]User{},
		requests: map[string]*authRequest{}, codes: map[string]string{}, tokens: map[string]string{},
		client: &client{id: "gateway", secret: randomID(), lifetime: o.IDTokenLifetime},
	}
	for _, u := range o.Users {
		st.users[u.Subject] = u
	}
	p := &Provider{store: st, ClientID: st.client.id, ClientSecret: st.client.secret}
	mux := http.NewServeMux()
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	p.Issuer = p.srv.URL
	var crypto [32]byte
	_, _ = rand.Read(crypto[:])
	p.op, err = op.NewProvider(&op.Config{
		CryptoKey: crypto, CodeMethodS256: true, AuthMethodPost: true,
		SupportedUILocales: []language.Tag{language.English}, DefaultLogoutRedirectURI: "/logged-out",
	}, st, op.StaticIssuer(p.Issuer), op.WithAllowInsecure())
	if err != nil {
		t.Fatalf("testoidc: provider: %v", err)
	}
	st.callback = op.AuthCallbackURL(p.op)
	in := op.NewIssuerInterceptor(p.op.IssuerFromRequest)
	mux.Handle("/login", in.HandlerFunc(p.login))
	// A browser asks every host for its icon; a 404 would be reported as a
	// page's problem.
	mux.HandleFunc("/favicon.ico", func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) })
	mux.HandleFunc("/logged-out", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("signed out")) })
	mux.Handle("/", p.reissue(p.op))
	return p
}

// reissue passes requests to next; while WrongAudience is on, the ID
// token of a token response is signed again by the provider's key for
// another client (aud and azp), as a token the provider issued to another
// relying party would be.
func (p *Provider) reissue(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.store.mu.Lock()
		on := p.store.wrongAud
		p.store.mu.Unlock()
		if !on || r.URL.Path != "/oauth/token" {
			next.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		next.ServeHTTP(rec, r)
		var body map[string]any
		if err := json.Unmarshal(rec.Body.Bytes(), &body); err == nil {
			if raw, ok := body["id_token"].(string); ok {
				if again, err := p.store.resign(raw, "another-client"); err == nil {
					body["id_token"] = again
				}
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(rec.Code)
		_ = json.NewEncoder(w).Encode(body)
	})
}

// resign signs raw's claims again with aud and azp set to audience.
func (s *storage) resign(raw, audience string) (string, error) {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return "", errors.New("testoidc: not a JWS")
	}
	payload, err := base64.RawURLEncoding.DecodeString(parts[1])
	if err != nil {
		return "", err
	}
	var claims map[string]any
	if err := json.Unmarshal(payload, &claims); err != nil {
		return "", err
	}
	claims["aud"], claims["azp"], claims["client_id"] = []string{audience}, audience, audience
	payload, _ = json.Marshal(claims)
	signer, err := jose.NewSigner(jose.SigningKey{Algorithm: jose.RS256, Key: jose.JSONWebKey{Key: s.key, KeyID: s.keyID}},
		(&jose.SignerOptions{}).WithType("JWT"))
	if err != nil {
		return "", err
	}
	jws, err := signer.Sign(payload)
	if err != nil {
		return "", err
	}
	return jws.CompactSerialize()
}

// AllowRedirect registers a redirect URI (the relying party's callback)
// and a post-logout redirect URI for the client: the gateway's address is
// known only once its test server runs.
func (p *Provider) AllowRedirect(callback, postLogout string) {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	p.store.client.redirects = append(p.store.client.redirects, callback)
	if postLogout != "" {
		p.store.client.postLogout = append(p.store.client.postLogout, postLogout)
	}
}

// SignInAs makes the next logins complete as subject with no form
// (subject "" brings the form back).
func (p *Provider) SignInAs(subject string) {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	p.store.auto = subject
}

// WrongAudience makes the provider answer the token request with an ID
// token it issued to another client.
func (p *Provider) WrongAudience(on bool) {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	p.store.wrongAud = on
}

// WrongNonce makes the provider put another nonce in ID tokens.
func (p *Provider) WrongNonce(on bool) {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	p.store.wrongNonce = on
}

// Logouts are the subjects whose sessions RP-initiated logouts ended, in
// order ("" for a logout that named nobody).
func (p *Provider) Logouts() []string {
	p.store.mu.Lock()
	defer p.store.mu.Unlock()
	return slices.Clone(p.store.logouts)
}

var loginForm = template.Must(template.New("login").Parse(`<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1"><title>Test provider: sign in</title></head>
<body><form method="post" action="/login"><input type="hidden" name="id" value="{{.}}">
<label for="username">User</label> <input id="username" name="username"> <button type="submit" id="login">Sign in</button></form></body></html>`))

// login is the provider's login page: the auth request named by id is
// completed for the SignInAs subject, or for the user the form names.
func (p *Provider) login(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, "bad form", http.StatusBadRequest)
		return
	}
	id := r.Form.Get("id")
	subject := r.PostForm.Get("username")
	if r.Method == http.MethodGet {
		p.store.mu.Lock()
		subject = p.store.auto
		p.store.mu.Unlock()
		if subject == "" {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			_ = loginForm.Execute(w, id)
			return
		}
	}
	if err := p.store.complete(id, subject); err != nil {
		http.Error(w, err.Error(), http.StatusForbidden)
		return
	}
	http.Redirect(w, r, p.store.callback(r.Context(), id), http.StatusFound)
}

func randomID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// storage is op.Storage in memory.
type storage struct {
	opts     Options
	key      *rsa.PrivateKey
	keyID    string
	callback func(context.Context, string) string

	mu         sync.Mutex
	users      map[string]User
	client     *client
	requests   map[string]*authRequest
	codes      map[string]string // code → request id
	tokens     map[string]string // access token id → subject
	auto       string
	wrongAud   bool
	wrongNonce bool
	logouts    []string
}

var errNotFound = errors.New("testoidc: not found")

func (s *storage) complete(id, subject string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	req, ok := s.requests[id]
	if !ok {
		return errNotFound
	}
	if _, ok := s.users[subject]; !ok {
		return errors.New("testoidc: no such user")
	}
	req.subject, req.done, req.authTime = subject, true, time.Now()
	return nil
}

func (s *storage) CreateAuthRequest(_ context.Context, r *oidc.AuthRequest, _ string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	a := &authRequest{id: randomID(), clientID: r.ClientID, redirect: r.RedirectURI, state: r.State, nonce: r.Nonce,
		scopes: r.Scopes, responseType: r.ResponseType, responseMode: r.ResponseMode}
	if r.CodeChallenge != "" {
		a.challenge = &oidc.CodeChallenge{Challenge: r.CodeChallenge, Method: r.CodeChallengeMethod}
	}
	if s.wrongNonce {
		a.nonce = "not-" + r.Nonce
	}
	s.requests[a.id] = a
	return a, nil
}

func (s *storage) AuthRequestByID(_ context.Context, id string) (op.AuthRequest, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if a, ok := s.requests[id]; ok {
		return a, nil
	}
	return nil, errNotFound
}

func (s *storage) AuthRequestByCode(ctx context.Context, code string) (op.AuthRequest, error) {
	s.mu.Lock()
	id, ok := s.codes[code]
	s.mu.Unlock()
	if !ok {
		return nil, errNotFound
	}
	return s.AuthRequestByID(ctx, id)
}

func (s *storage) SaveAuthCode(_ context.Context, id, code string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.codes[code] = id
	return nil
}

func (s *storage) DeleteAuthRequest(_ context.Context, id string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.requests, id)
	for code, rid := range s.codes {
		if rid == id {
			delete(s.codes, code)
		}
	}
	return nil
}

func (s *storage) CreateAccessToken(_ context.Context, r op.TokenRequest) (string, time.Time, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	id := randomID()
	s.tokens[id] = r.GetSubject()
	return id, time.Now().Add(5 * time.Minute), nil
}

func (s *storage) CreateAccessAndRefreshTokens(context.Context, op.TokenRequest, string) (string, string, time.Time, error) {
	return "", "", time.Time{}, errors.New("testoidc: no refresh tokens")
}

func (s *storage) TokenRequestByRefreshToken(context.Context, string) (op.RefreshTokenRequest, error) {
	return nil, op.ErrInvalidRefreshToken
}

func (s *storage) TerminateSession(_ context.Context, userID, _ string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.logouts = append(s.logouts, userID)
	return nil
}

func (s *storage) RevokeToken(context.Context, string, string, string) *oidc.Error { return nil }

func (s *storage) GetRefreshTokenInfo(context.Context, string, string) (string, string, error) {
	return "", "", op.ErrInvalidRefreshToken
}

func (s *storage) SigningKey(context.Context) (op.SigningKey, error) {
	return signingKey{s.keyID, s.key}, nil
}

func (s *storage) SignatureAlgorithms(context.Context) ([]jose.SignatureAlgorithm, error) {
	return []jose.SignatureAlgorithm{jose.RS256}, nil
}

func (s *storage) KeySet(context.Context) ([]op.Key, error) {
	return []op.Key{publicKey{s.keyID, &s.key.PublicKey}}, nil
}

func (s *storage) GetClientByClientID(_ context.Context, id string) (op.Client, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if id != s.client.id {
		return nil, errNotFound
	}
	c := *s.client
	c.redirects, c.postLogout = slices.Clone(c.redirects), slices.Clone(c.postLogout)
	return &c, nil
}

func (s *storage) AuthorizeClientIDSecret(_ context.Context, id, secret string) error {
	if id != s.client.id || secret != s.client.secret {
		return errors.New("testoidc: wrong client credentials")
	}
	return nil
}

// setUser fills info with subject's claims for scopes: email, name, and
// the groups claim for the "groups" scope.
func (s *storage) setUser(info *oidc.UserInfo, subject string, scopes []string) error {
	s.mu.Lock()
	u, ok := s.users[subject]
	s.mu.Unlock()
	if !ok {
		return errNotFound
	}
	info.Subject = subject
	for _, sc := range scopes {
		switch sc {
		case oidc.ScopeEmail:
			info.Email, info.EmailVerified = u.Email, true
		case oidc.ScopeProfile:
			info.Name = u.Name
		case "groups":
			info.AppendClaims(s.opts.GroupsClaim, slices.Clone(u.Groups))
		}
	}
	return nil
}

func (s *storage) SetUserinfoFromScopes(_ context.Context, info *oidc.UserInfo, subject, _ string, scopes []string) error {
	return s.setUser(info, subject, scopes)
}

func (s *storage) SetUserinfoFromToken(_ context.Context, info *oidc.UserInfo, tokenID, _, _ string) error {
	s.mu.Lock()
	subject, ok := s.tokens[tokenID]
	s.mu.Unlock()
	if !ok {
		return errNotFound
	}
	return s.setUser(info, subject, []string{oidc.ScopeEmail, oidc.ScopeProfile, "groups"})
}

func (s *storage) SetIntrospectionFromToken(context.Context, *oidc.IntrospectionResponse, string, string, string) error {
	return errors.New("testoidc: no introspection")
}

func (s *storage) GetPrivateClaimsFromScopes(context.Context, string, string, []string) (map[string]any, error) {
	return nil, nil
}

func (s *storage) GetKeyByIDAndClientID(context.Context, string, string) (*jose.JSONWebKey, error) {
	return nil, errNotFound
}

func (s *storage) ValidateJWTProfileScopes(context.Context, string, []string) ([]string, error) {
	return nil, errors.New("testoidc: no JWT profile")
}

func (s *storage) Health(context.Context) error { return nil }

// authRequest is op.AuthRequest.
type authRequest struct {
	id, clientID, redirect, state, nonce, subject string
	scopes                                        []string
	responseType                                  oidc.ResponseType
	responseMode                                  oidc.ResponseMode
	challenge                                     *oidc.CodeChallenge
	done                                          bool
	authTime                                      time.Time
}

func (a *authRequest) GetID() string                         { return a.id }
func (a *authRequest) GetACR() string                        { return "" }
func (a *authRequest) GetAMR() []string                      { return []string{"pwd"} }
func (a *authRequest) GetAudience() []string                 { return []string{a.clientID} }
func (a *authRequest) GetAuthTime() time.Time                { return a.authTime }
func (a *authRequest) GetClientID() string                   { return a.clientID }
func (a *authRequest) GetCodeChallenge() *oidc.CodeChallenge { return a.challenge }
func (a *authRequest) GetNonce() string                      { return a.nonce }
func (a *authRequest) GetRedirectURI() string                { return a.redirect }
func (a *authRequest) GetResponseType() oidc.ResponseType    { return a.responseType }
func (a *authRequest) GetResponseMode() oidc.ResponseMode    { return a.responseMode }
func (a *authRequest) GetScopes() []string                   { return a.scopes }
func (a *authRequest) GetState() string                      { return a.state }
func (a *authRequest) GetSubject() string                    { return a.subject }
func (a *authRequest) Done() bool                            { return a.done }

// client is the gateway's registration: a confidential web client that
// must use PKCE.
type client struct {
	id, secret            string
	redirects, postLogout []string
	lifetime              time.Duration
}

func (c *client) GetID() string                       { return c.id }
func (c *client) RedirectURIs() []string              { return c.redirects }
func (c *client) PostLogoutRedirectURIs() []string    { return c.postLogout }
func (c *client) ApplicationType() op.ApplicationType { return op.ApplicationTypeWeb }
func (c *client) AuthMethod() oidc.AuthMethod         { return oidc.AuthMethodBasic }
func (c *client) ResponseTypes() []oidc.ResponseType {
	return []oidc.ResponseType{oidc.ResponseTypeCode}
}
func (c *client) GrantTypes() []oidc.GrantType        { return []oidc.GrantType{oidc.GrantTypeCode} }
func (c *client) LoginURL(id string) string           { return "/login?id=" + id }
func (c *client) AccessTokenType() op.AccessTokenType { return op.AccessTokenTypeBearer }
func (c *client) IDTokenLifetime() time.Duration      { return c.lifetime }
func (c *client) DevMode() bool                       { return true }
func (c *client) RestrictAdditionalIdTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) RestrictAdditionalAccessTokenScopes() func([]string) []string {
	return func(s []string) []string { return s }
}
func (c *client) IsScopeAllowed(scope string) bool     { return scope == "groups" }
func (c *client) IDTokenUserinfoClaimsAssertion() bool { return true }
func (c *client) ClockSkew() time.Duration             { return 0 }

type signingKey struct {
	id  string
	key *rsa.PrivateKey
}

func (k signingKey) SignatureAlgorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k signingKey) Key() any                                    { return k.key }
func (k signingKey) ID() string                                  { return k.id }

type publicKey struct {
	id  string
	key *rsa.PublicKey
}

func (k publicKey) ID() string                         { return k.id }
func (k publicKey) Algorithm() jose.SignatureAlgorithm { return jose.RS256 }
func (k publicKey) Use() string                        { return "sig" }
func (k publicKey) Key() any                           { return k.key }
