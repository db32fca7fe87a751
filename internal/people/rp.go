package people

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"golang.org/x/oauth2"
)

// The relying party: go-oidc verifies ID tokens (signature against the
// provider's published keys, issuer, audience, expiry) and x/oauth2 runs
// the authorization code exchange with PKCE. Every call to the provider
// (discovery, keys, the token endpoint) goes through the client the
// gateway gives, which is its outbound guard's, with its deadline.

var (
	// ErrRefused is a sign-in the gateway refuses: a state that is not the
	// browser's, an ID token that fails verification, the provider's own
	// error answer, a person in no mapped group.
	ErrRefused = errors.New("sign-in refused")
	// ErrUnavailable is a provider that cannot be reached or answers out
	// of turn.
	ErrUnavailable = errors.New("identity provider unavailable")
)

// Flow is one sign-in's secrets, kept by the browser (in an HttpOnly
// cookie) between leaving for the provider and coming back: the state
// binds the answer to this browser, the nonce the ID token to this
// sign-in, the verifier (PKCE) the code to this client.
type Flow struct {
	State    string `json:"s"`
	Nonce    string `json:"n"`
	Verifier string `json:"v"`
	// Next is where the browser goes once signed in.
	Next string `json:"x"`
}

// NewFlow returns a flow with fresh random secrets.
func NewFlow(next string) Flow {
	return Flow{State: random(), Nonce: random(), Verifier: oauth2.GenerateVerifier(), Next: next}
}

// Encode is f as a cookie value.
func (f Flow) Encode() string {
	b, _ := json.Marshal(f) // strings only: never fails
	return base64.RawURLEncoding.EncodeToString(b)
}

// DecodeFlow reads a cookie value Encode wrote; anything else is refused.
func DecodeFlow(s string) (Flow, error) {
	var f Flow
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(b) > 4096 {
		return Flow{}, fmt.Errorf("%w: the sign-in cookie is unreadable", ErrRefused)
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&f); err != nil || f.State == "" || f.Nonce == "" || f.Verifier == "" {
		return Flow{}, fmt.Errorf("%w: the sign-in cookie is unreadable", ErrRefused)
	}
	return f, nil
}

func random() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// Identity is the person an ID token names.
type Identity struct {
	Subject string
	Email   string
	Groups  []string
	// Expiry is the ID token's: the session ends then.
	Expiry time.Time
}

// RP signs people in with one provider.
type RP struct {
	cfg    *OIDC
	client *http.Client

	mu   sync.Mutex
	prov *oidc.Provider
	// endSession is the provider's end_session_endpoint, if any.
	endSession string
}

// NewRP returns the relying party of cfg; client makes every call to the
// provider. The provider is discovered at the first sign-in (and again
// after a failed discovery), so a provider down at start-up delays no
// start.
func NewRP(cfg *OIDC, client *http.Client) *RP { return &RP{cfg: cfg, client: client} }

// Config is the settings the RP was built from.
func (rp *RP) Config() *OIDC { return rp.cfg }

func (rp *RP) ctx(ctx context.Context) context.Context {
	return oidc.ClientContext(ctx, rp.client)
}

func (rp *RP) provider(ctx context.Context) (*oidc.Provider, error) {
	rp.mu.Lock()
	defer rp.mu.Unlock()
	if rp.prov != nil {
		return rp.prov, nil
	}
	// The key set go-oidc builds keeps the context it was given for its
	// later fetches: it must outlive this request (the client bounds each
	// fetch).
	p, err := oidc.NewProvider(rp.ctx(context.WithoutCancel(ctx)), rp.cfg.Issuer)
	if err != nil {
		return nil, fmt.Errorf("%w: discovery at %s: %w", ErrUnavailable, rp.cfg.Issuer, err)
	}
	var extra struct {
		EndSession string `json:"end_session_endpoint"`
	}
	if err := p.Claims(&extra); err == nil && extra.EndSession != "" {
		if u, err := url.Parse(extra.EndSession); err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "" {
			rp.endSession = extra.EndSession
		}
	}
	rp.prov = p
	return p, nil
}

func (rp *RP) oauth(p *oidc.Provider, redirect string) *oauth2.Config {
	return &oauth2.Config{ClientID: rp.cfg.ClientID, ClientSecret: rp.cfg.ClientSecret, Endpoint: p.Endpoint(),
		RedirectURL: redirect, Scopes: rp.cfg.Scopes}
}

// AuthURL is where the browser goes to sign in with f: the provider's
// authorization endpoint with the state, the nonce and the PKCE challenge.
func (rp *RP) AuthURL(ctx context.Context, f Flow, redirect string) (string, error) {
	p, err := rp.provider(ctx)
	if err != nil {
		return "", err
	}
	return rp.oauth(p, redirect).AuthCodeURL(f.State, oidc.Nonce(f.Nonce), oauth2.S256ChallengeOption(f.Verifier)), nil
}

// Finish checks the provider's answer q against f (the browser's flow),
// exchanges the code, verifies the ID token and reads the person from it.
// The state is checked before anything is sent anywhere.
func (rp *RP) Finish(ctx context.Context, f Flow, redirect string, q url.Values) (Identity, error) {
	if subtle.ConstantTimeCompare([]byte(q.Get("state")), []byte(f.State)) != 1 {
		return Identity{}, fmt.Errorf("%w: the state does not match this browser's sign-in", ErrRefused)
	}
	if e := q.Get("error"); e != "" {
		return Identity{}, fmt.Errorf("%w: the provider answered %s", ErrRefused, clip(e))
	}
	code := q.Get("code")
	if code == "" {
		return Identity{}, fmt.Errorf("%w: the provider sent no code", ErrRefused)
	}
	p, err := rp.provider(ctx)
	if err != nil {
		return Identity{}, err
	}
	tok, err := rp.oauth(p, redirect).Exchange(rp.ctx(ctx), code, oauth2.VerifierOption(f.Verifier))
	if err != nil {
		if _, ok := errors.AsType[*oauth2.RetrieveError](err); ok {
			return Identity{}, fmt.Errorf("%w: the provider refused the code", ErrRefused)
		}
		return Identity{}, fmt.Errorf("%w: token endpoint: %w", ErrUnavailable, err)
	}
	raw, ok := tok.Extra("id_token").(string)
	if !ok || raw == "" {
		return Identity{}, fmt.Errorf("%w: the provider returned no ID token", ErrRefused)
	}
	return rp.verify(ctx, p, raw, f.Nonce)
}

// verify checks an ID token (signature, issuer, audience, expiry, nonce)
// and reads the person from it: the subject, the e-mail, the groups claim
// (an array of strings, or absent; anything else is refused).
func (rp *RP) verify(ctx context.Context, p *oidc.Provider, raw, nonce string) (Identity, error) {
	idt, err := p.Verifier(&oidc.Config{ClientID: rp.cfg.ClientID}).Verify(rp.ctx(ctx), raw)
	if err != nil {
		return Identity{}, fmt.Errorf("%w: ID token: %w", ErrRefused, err)
	}
	// go-oidc checked that the audience names this client; a token for
	// several audiences must also have been issued to it (azp, OpenID
	// Connect Core 3.1.3.7).
	var azp struct {
		AZP string `json:"azp"`
	}
	if err := idt.Claims(&azp); err != nil || (len(idt.Audience) > 1 || azp.AZP != "") && azp.AZP != rp.cfg.ClientID {
		return Identity{}, fmt.Errorf("%w: the ID token was issued to another client (azp)", ErrRefused)
	}
	if subtle.ConstantTimeCompare([]byte(idt.Nonce), []byte(nonce)) != 1 {
		return Identity{}, fmt.Errorf("%w: the ID token's nonce is not this sign-in's", ErrRefused)
	}
	var claims map[string]json.RawMessage
	if err := idt.Claims(&claims); err != nil {
		return Identity{}, fmt.Errorf("%w: ID token claims: %w", ErrRefused, err)
	}
	id := Identity{Subject: idt.Subject, Expiry: idt.Expiry}
	if e, ok := claims["email"]; ok {
		if err := json.Unmarshal(e, &id.Email); err != nil {
			return Identity{}, fmt.Errorf("%w: the email claim is not a string", ErrRefused)
		}
	}
	if g, ok := claims[rp.cfg.GroupsClaim]; ok {
		if err := json.Unmarshal(g, &id.Groups); err != nil {
			return Identity{}, fmt.Errorf("%w: the %s claim is not a list of group names", ErrRefused, rp.cfg.GroupsClaim)
		}
	}
	if id.Subject == "" {
		return Identity{}, fmt.Errorf("%w: the ID token names no subject", ErrRefused)
	}
	return id, nil
}

// EndSessionURL is the provider's logout, coming back to postLogout;
// false when the provider publishes no end_session_endpoint, or cannot be
// discovered now (the person is signed out of the gateway all the same).
// It names the client, not the ID token (id_token_hint): the gateway keeps
// no ID token once it has read the person from it.
func (rp *RP) EndSessionURL(ctx context.Context, postLogout string) (string, bool) {
	// The person may have signed in on another replica: this one may
	// not have discovered the provider yet.
	if _, err := rp.provider(ctx); err != nil {
		return "", false
	}
	rp.mu.Lock()
	end := rp.endSession
	rp.mu.Unlock()
	if end == "" {
		return "", false
	}
	u, err := url.Parse(end)
	if err != nil {
		return "", false
	}
	q := u.Query()
	q.Set("client_id", rp.cfg.ClientID)
	if postLogout != "" {
		q.Set("post_logout_redirect_uri", postLogout)
	}
	u.RawQuery = q.Encode()
	return u.String(), true
}

// clip bounds a provider's error code as it is quoted back.
func clip(s string) string {
	if len(s) > 64 {
		s = s[:64]
	}
	return fmt.Sprintf("%q", s)
}
