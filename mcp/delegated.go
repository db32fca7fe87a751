package mcp

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/go-json-experiment/json"
	"golang.org/x/oauth2"

	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/mcp/mcpconf"
)

// stored is a person's token pair for one server, as sealed.
type stored struct {
	Access  string    `json:"access"`
	Refresh string    `json:"refresh,omitzero"`
	Until   time.Time `json:"until"`
}

// delegatedCreds is oauth.delegated: each request carries the token of
// the person it is made for (door.BehalfOf), obtained once through the
// server's authorization flow (connect.go), kept sealed in the state
// backend and renewed with its refresh token, one renewal at a time per
// person.
type delegatedCreds struct {
	server, url string
	cfg         mcpconf.Delegated
	// client calls the token endpoint (strict reading); meta reads the
	// metadata documents. Both are the outbound guard's.
	client, meta *http.Client
	timeout      time.Duration
	seal         *sealer
	store        TokenStore
	// connect is where a person connects their account (the page).
	connect string

	mu       sync.Mutex
	renewing map[string]*renewal
	ep       *oauth2.Endpoint
}

// renewal is one refresh in flight, which the person's other requests
// wait for.
type renewal struct {
	done chan struct{}
	auth string
	err  error
}

func (c *delegatedCreds) refuse(reason string) error { return &credentialError{c.server, reason} }

func (c *delegatedCreds) notConnected(who string) error {
	return c.refuse(who + " has not connected their account there; connect it at " + c.connect)
}

func (c *delegatedCreds) authorization(ctx context.Context) (string, error) {
	b, ok := door.BehalfOf(ctx)
	if !ok {
		return "", c.refuse("it is called with each person's own account, and this call is made on nobody's behalf")
	}
	st, err := c.load(ctx, b.Subject)
	switch {
	case errors.Is(err, errSealed):
		return "", c.notConnected(b.Name)
	case err != nil:
		return "", c.refuse("the stored tokens could not be read")
	case st == nil:
		return "", c.notConnected(b.Name)
	case time.Now().Before(st.Until):
		return "Bearer " + st.Access, nil
	}
	return c.renew(ctx, b, st)
}

// renew refreshes b's token, once for all of b's requests waiting.
func (c *delegatedCreds) renew(ctx context.Context, b door.Behalf, st *stored) (string, error) {
	c.mu.Lock()
	r := c.renewing[b.Subject]
	leader := r == nil
	if leader {
		r = &renewal{done: make(chan struct{})}
		c.renewing[b.Subject] = r
	}
	c.mu.Unlock()
	if leader {
		// Detached from this request (its waiters share the result),
		// bounded all the same.
		r.auth, r.err = c.refresh(context.WithoutCancel(ctx), b, st)
		c.mu.Lock()
		delete(c.renewing, b.Subject)
		c.mu.Unlock()
		close(r.done)
	}
	select {
	case <-r.done:
		return r.auth, r.err
	case <-ctx.Done():
		return "", c.refuse("no token within the call's time")
	}
}

func (c *delegatedCreds) refresh(ctx context.Context, b door.Behalf, st *stored) (string, error) {
	if st.Refresh == "" {
		return "", c.refuse(b.Name + "'s token has expired; connect again at " + c.connect)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	cfg, err := c.oauthConfig(ctx, "")
	if err != nil {
		return "", c.refuse(err.Error())
	}
	old := &oauth2.Token{RefreshToken: st.Refresh, Expiry: time.Unix(1, 0)}
	tok, err := cfg.TokenSource(context.WithValue(ctx, oauth2.HTTPClient, c.client), old).Token()
	if err != nil {
		return "", c.refuse(tokenFailure(ctx, err, c.timeout) + "; connect again at " + c.connect)
	}
	return c.keep(ctx, b.Subject, tok, st.Refresh)
}

// keep checks tok, seals and stores it for subject (with refresh when
// tok brings no new refresh token) and returns its Authorization.
func (c *delegatedCreds) keep(ctx context.Context, subject string, tok *oauth2.Token, refresh string) (string, error) {
	ct, err := checkToken(tok, time.Now())
	if err != nil {
		return "", c.refuse(err.Error())
	}
	if tok.RefreshToken != "" {
		refresh = tok.RefreshToken
	}
	st := stored{Access: tok.AccessToken, Refresh: refresh, Until: ct.until}
	plain, err := json.Marshal(st)
	if err != nil {
		return "", fmt.Errorf("mcp tokens: %w", err)
	}
	if err := c.store.Store(ctx, tokenKey(c.server, subject), c.seal.seal(c.server, subject, plain)); err != nil {
		return "", c.refuse("the token could not be stored")
	}
	return ct.auth, nil
}

func (c *delegatedCreds) load(ctx context.Context, subject string) (*stored, error) {
	blob, err := c.store.Load(ctx, tokenKey(c.server, subject))
	if err != nil || blob == nil {
		return nil, err
	}
	plain, err := c.seal.open(c.server, subject, blob)
	if err != nil {
		return nil, err
	}
	var st stored
	if err := json.Unmarshal(plain, &st); err != nil || st.Access == "" {
		return nil, errSealed
	}
	return &st, nil
}

// rejected marks the person's token as expired, so that the next request
// renews it.
func (c *delegatedCreds) rejected(ctx context.Context, auth string) {
	b, ok := door.BehalfOf(ctx)
	if !ok {
		return
	}
	if st, err := c.load(ctx, b.Subject); err == nil && st != nil && "Bearer "+st.Access == auth {
		st.Until = time.Time{}
		if plain, err := json.Marshal(st); err == nil {
			_ = c.store.Store(ctx, tokenKey(c.server, b.Subject), c.seal.seal(c.server, b.Subject, plain))
		}
	}
}

// disconnect forgets subject's tokens.
func (c *delegatedCreds) disconnect(ctx context.Context, subject string) error {
	return c.store.Delete(ctx, tokenKey(c.server, subject))
}

// connected reports whether subject has a token stored that opens.
func (c *delegatedCreds) connected(ctx context.Context, subject string) bool {
	st, err := c.load(ctx, subject)
	return err == nil && st != nil
}

// oauthConfig is the gateway's client at the server's authorization
// server, with its endpoints configured or discovered.
func (c *delegatedCreds) oauthConfig(ctx context.Context, redirect string) (*oauth2.Config, error) {
	ep, err := c.endpoints(ctx)
	if err != nil {
		return nil, err
	}
	return &oauth2.Config{ClientID: c.cfg.ClientID, ClientSecret: c.cfg.ClientSecret, Endpoint: *ep, Scopes: c.cfg.Scopes, RedirectURL: redirect}, nil
}

// begin starts subject's authorization flow: the URL to send the browser
// to, and the PKCE verifier the callback needs.
func (c *delegatedCreds) begin(ctx context.Context, redirect, state string) (authURL, verifier string, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	cfg, err := c.oauthConfig(ctx, redirect)
	if err != nil {
		return "", "", err
	}
	verifier = oauth2.GenerateVerifier()
	return cfg.AuthCodeURL(state, oauth2.S256ChallengeOption(verifier), oauth2.SetAuthURLParam("resource", c.url)), verifier, nil
}

// finish exchanges the callback's code for subject's tokens and keeps
// them.
func (c *delegatedCreds) finish(ctx context.Context, subject, redirect, code, verifier string) error {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	cfg, err := c.oauthConfig(ctx, redirect)
	if err != nil {
		return err
	}
	tok, err := cfg.Exchange(context.WithValue(ctx, oauth2.HTTPClient, c.client), code,
		oauth2.VerifierOption(verifier), oauth2.SetAuthURLParam("resource", c.url))
	if err != nil {
		return c.refuse(tokenFailure(ctx, err, c.timeout))
	}
	_, err = c.keep(ctx, subject, tok, "")
	return err
}

// randomState is an unguessable value for a flow's state.
func randomState() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return base64.RawURLEncoding.EncodeToString(b)
}
