package mcp

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/sacpgw/gateway/internal/egress"
	"github.com/sacpgw/gateway/mcp/mcpconf"
)

// credential is how the gateway authorizes its requests to one server
// (its oauth): the Authorization value of a request made in ctx, and the
// news that the server refused one.
type credential interface {
	authorization(ctx context.Context) (string, error)
	// rejected drops auth, which the server answered 401: the next
	// request obtains another.
	rejected(ctx context.Context, auth string)
}

// tokenTimeout bounds one call to an authorization server when the
// server's timeout is longer.
const tokenTimeout = 10 * time.Second

// credentialError is a request to a server the gateway could not
// authorize. Its text is the agent's too: it names what failed, never a
// secret, a token or what the authorization server answered in its body.
type credentialError struct {
	server string
	reason string
}

func (e *credentialError) Error() string {
	return "MCP server " + quote(e.server) + " could not be authorized: " + e.reason
}

// failure is what the agent is told of a failed request to srv: the
// credential's reason when that is what failed, else fallback.
func failure(err error, fallback string) string {
	if ce, ok := errors.AsType[*credentialError](err); ok {
		return ce.Error() + "."
	}
	return fallback
}

// oauthState keeps the servers' credentials across reloads, so a reload
// that does not change a server's oauth keeps its cached token, and the
// people's flows under way.
type oauthState struct {
	// client calls the token endpoints (strict reading), meta the
	// metadata documents: both the outbound guard's.
	client, meta *http.Client
	// store keeps the people's sealed tokens.
	store   TokenStore
	mu      sync.Mutex
	current *credentials
	// flows are the people's authorization flows under way, by state.
	flows map[string]*flow
}

func newOAuthState(client *http.Client, store TokenStore) *oauthState {
	if client == nil {
		client = egress.Policy{}.Client(0)
	}
	if store == nil {
		store = NewMemoryTokens()
	}
	return &oauthState{client: strictClient(client), meta: client, store: store, current: &credentials{byKey: map[string]credential{}},
		flows: map[string]*flow{}}
}

// credentials are the credentials of one configuration.
type credentials struct {
	// byKey are the credentials by oauthKey.
	byKey map[string]credential
	// delegated are the servers with oauth.delegated, by name.
	delegated map[string]*delegatedCreds
	seal      *sealer
	// connect is where a person connects their accounts.
	connect string
}

// next starts the credentials of configuration m; baseURL is the
// gateway's external URL (approval.base_url, may be empty).
func (o *oauthState) next(m mcpconf.Settings, baseURL string) (*credentials, error) {
	seal, err := newSealer(m)
	if err != nil {
		return nil, err
	}
	for _, sc := range m.Servers {
		if sc.OAuth != nil && sc.OAuth.Delegated != nil && seal == nil {
			return nil, fmt.Errorf("server %q has oauth.delegated and mcp.token_key is not set", sc.Name)
		}
	}
	return &credentials{byKey: map[string]credential{}, delegated: map[string]*delegatedCreds{}, seal: seal,
		connect: strings.TrimSuffix(baseURL, "/") + accountsPath}, nil
}

// credential is sc's credential in the configuration being prepared (into
// next), the running one's when sc's oauth did not change; nil without
// oauth.
func (o *oauthState) credential(next *credentials, sc mcpconf.Server) credential {
	if sc.OAuth == nil || sc.URL == "" {
		return nil
	}
	key := oauthKey(sc, next)
	o.mu.Lock()
	c := o.current.byKey[key]
	o.mu.Unlock()
	if c == nil {
		c = o.build(sc, next)
	}
	next.byKey[key] = c
	if dc, ok := c.(*delegatedCreds); ok {
		next.delegated[sc.Name] = dc
	}
	return c
}

// keep makes next the running configuration's credentials.
func (o *oauthState) keep(next *credentials) {
	o.mu.Lock()
	o.current = next
	o.mu.Unlock()
}

func (o *oauthState) build(sc mcpconf.Server, next *credentials) credential {
	timeout := min(sc.Timeout.D(), tokenTimeout)
	if timeout <= 0 {
		timeout = tokenTimeout
	}
	if d := sc.OAuth.Delegated; d != nil {
		return &delegatedCreds{server: sc.Name, url: sc.URL, cfg: *d, client: o.client, meta: o.meta, timeout: timeout,
			seal: next.seal, store: o.store, connect: next.connect, renewing: map[string]*renewal{}}
	}
	cc := sc.OAuth.ClientCredentials
	cfg := clientcredentials.Config{ClientID: cc.ClientID, ClientSecret: cc.ClientSecret, TokenURL: cc.TokenURL, Scopes: cc.Scopes}
	if cc.Resource != "" {
		cfg.EndpointParams = url.Values{"resource": {cc.Resource}}
	}
	return &clientCreds{server: sc.Name, cfg: cfg, client: o.client, timeout: timeout, sem: make(chan struct{}, 1)}
}

// oauthKey is what a credential depends on: the server's name and URL,
// its oauth, and the token key and connect page of a delegated one
// (hashed: the key holds the client secret).
func oauthKey(sc mcpconf.Server, next *credentials) string {
	h := sha256.New()
	fmt.Fprintf(h, "%q %q %d %+v", sc.Name, sc.URL, sc.Timeout, sc.OAuth.ClientCredentials)
	if d := sc.OAuth.Delegated; d != nil {
		fmt.Fprintf(h, " %+v %q", *d, next.connect)
		if next.seal != nil {
			fmt.Fprintf(h, " %q %d", next.seal.current, len(next.seal.keys))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// clientCreds is the client credentials grant: one token of the gateway's
// for every request, obtained when none is cached, kept until shortly
// before it expires, one fetch at a time for every concurrent request.
type clientCreds struct {
	server  string
	cfg     clientcredentials.Config
	client  *http.Client
	timeout time.Duration
	// sem admits one fetch; the others wait for its token (or their
	// context's end).
	sem chan struct{}
	mu  sync.Mutex
	tok cachedToken
}

// cachedToken is an Authorization value and when to stop using it.
type cachedToken struct {
	auth  string
	until time.Time
}

func (c *clientCreds) cached() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tok.auth != "" && time.Now().Before(c.tok.until) {
		return c.tok.auth
	}
	return ""
}

func (c *clientCreds) authorization(ctx context.Context) (string, error) {
	if auth := c.cached(); auth != "" {
		return auth, nil
	}
	select {
	case c.sem <- struct{}{}:
	case <-ctx.Done():
		return "", &credentialError{c.server, "no token within the call's time"}
	}
	defer func() { <-c.sem }()
	if auth := c.cached(); auth != "" {
		return auth, nil // fetched while this request waited
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	tok, err := c.cfg.Token(context.WithValue(ctx, oauth2.HTTPClient, c.client))
	if err != nil {
		return "", &credentialError{c.server, tokenFailure(ctx, err, c.timeout)}
	}
	ct, err := checkToken(tok, time.Now())
	if err != nil {
		return "", &credentialError{c.server, err.Error()}
	}
	c.mu.Lock()
	c.tok = ct
	c.mu.Unlock()
	return ct.auth, nil
}

func (c *clientCreds) rejected(_ context.Context, auth string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.tok.auth == auth {
		c.tok = cachedToken{}
	}
}

// Token lifetimes: a token without expires_in is used this long; one is
// dropped a quarter of its life (at most refreshSkew) before it expires,
// so that no request carries a token that expires on its way.
const (
	defaultTokenLife = 5 * time.Minute
	refreshSkew      = 30 * time.Second
	maxTokenLen      = 16 << 10
)

// checkToken is the strict reading of a token response: an access token
// that fits in a header, of type Bearer, not yet expired. The errors name
// what is wrong, never the token.
func checkToken(tok *oauth2.Token, now time.Time) (cachedToken, error) {
	switch {
	case tok == nil || tok.AccessToken == "":
		return cachedToken{}, errors.New("the token endpoint's answer has no access_token")
	case !strings.EqualFold(tok.TokenType, "bearer"):
		return cachedToken{}, errors.New("the token endpoint's answer is not a Bearer token")
	case len(tok.AccessToken) > maxTokenLen || !visibleASCII(tok.AccessToken):
		return cachedToken{}, errors.New("the token endpoint's access_token is not a token")
	}
	until := now.Add(defaultTokenLife)
	if !tok.Expiry.IsZero() {
		life := tok.Expiry.Sub(now)
		if life <= 0 {
			return cachedToken{}, errors.New("the token endpoint's token has already expired")
		}
		until = tok.Expiry.Add(-min(life/4, refreshSkew))
	}
	return cachedToken{auth: "Bearer " + tok.AccessToken, until: until}, nil
}

// visibleASCII: the characters a token may have in a header (no space, no
// line break, nothing that would split it).
func visibleASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// tokenFailure says why a token request failed, without the endpoint's
// answer (its body may echo what was sent) or the URL.
func tokenFailure(ctx context.Context, err error, timeout time.Duration) string {
	if re, ok := errors.AsType[*oauth2.RetrieveError](err); ok {
		code := ""
		if oauthErrorCode(re.ErrorCode) {
			code = " (" + re.ErrorCode + ")"
		}
		if re.Response != nil {
			return fmt.Sprintf("the token endpoint answered HTTP %d%s", re.Response.StatusCode, code)
		}
		return "the token endpoint refused the request" + code
	}
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return "the token endpoint did not answer within " + timeout.String()
	case errors.Is(err, errTokenResponse):
		if ue, ok := errors.AsType[*url.Error](err); ok {
			return ue.Err.Error() // readTokenResponse's words, which quote nothing
		}
		return errTokenResponse.Error()
	case errors.Is(err, egress.ErrDestination):
		return "the token endpoint's address is not one the gateway may call (messaging.allowed_networks)"
	}
	if _, ok := errors.AsType[*url.Error](err); ok {
		return "the token endpoint could not be reached"
	}
	return "the token endpoint's answer could not be read"
}

// oauthErrorCode: an OAuth error code is quoted back only when it is one
// (RFC 6749's are lowercase words joined by '_').
func oauthErrorCode(s string) bool {
	if s == "" || len(s) > 40 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !(s[i] >= 'a' && s[i] <= 'z' || s[i] == '_') {
			return false
		}
	}
	return true
}
