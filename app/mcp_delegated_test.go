package app

import (
	"context"
	"crypto/aes"
	"crypto/cipher"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/testoidc"
	"github.com/sacpgw/gateway/internal/testredis"
)

// personAS is an MCP server's own authorization server: authorization
// code with PKCE (S256 only), refresh tokens, RFC 8414 metadata. Whoever
// reaches /authorize is user (the server's account of the person).
type personAS struct {
	srv  *httptest.Server
	user atomic.Value // string
	life atomic.Int64
	mu   sync.Mutex
	// codes are the codes issued: their challenge, redirect and user.
	codes    map[string][3]string
	refresh  map[string]string // refresh token → user
	good     map[string]string // access token → user
	expiry   map[string]time.Time
	n        int
	refreshd atomic.Int64
}

func newPersonAS(t *testing.T) *personAS {
	as := &personAS{codes: map[string][3]string{}, refresh: map[string]string{}, good: map[string]string{}, expiry: map[string]time.Time{}}
	as.life.Store(3600)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /.well-known/oauth-authorization-server", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"issuer":%q,"authorization_endpoint":%q,"token_endpoint":%q,"code_challenge_methods_supported":["S256"]}`,
			as.srv.URL, as.srv.URL+"/authorize", as.srv.URL+"/token")
	})
	mux.HandleFunc("GET /authorize", func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("client_id") != "gateway" || q.Get("response_type") != "code" || q.Get("code_challenge_method") != "S256" || q.Get("code_challenge") == "" || q.Get("resource") == "" {
			http.Error(w, "bad authorization request "+q.Encode(), http.StatusBadRequest)
			return
		}
		as.mu.Lock()
		as.n++
		code := fmt.Sprintf("code-%d", as.n)
		as.codes[code] = [3]string{q.Get("code_challenge"), q.Get("redirect_uri"), as.user.Load().(string)}
		as.mu.Unlock()
		http.Redirect(w, r, q.Get("redirect_uri")+"?code="+code+"&state="+url.QueryEscape(q.Get("state")), http.StatusFound)
	})
	mux.HandleFunc("POST /token", as.token)
	as.srv = httptest.NewServer(mux)
	t.Cleanup(as.srv.Close)
	return as
}

func (as *personAS) token(w http.ResponseWriter, r *http.Request) {
	_ = r.ParseForm()
	as.mu.Lock()
	defer as.mu.Unlock()
	user := ""
	switch r.PostForm.Get("grant_type") {
	case "authorization_code":
		c, ok := as.codes[r.PostForm.Get("code")]
		delete(as.codes, r.PostForm.Get("code"))
		sum := sha256.Sum256([]byte(r.PostForm.Get("code_verifier")))
		if !ok || base64.RawURLEncoding.EncodeToString(sum[:]) != c[0] || r.PostForm.Get("redirect_uri") != c[1] {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"error":"invalid_grant"}`)
			return
		}
		user = c[2]
	case "refresh_token":
		user = as.refresh[r.PostForm.Get("refresh_token")]
		as.refreshd.Add(1)
	}
	if user == "" {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		fmt.Fprint(w, `{"error":"invalid_grant"}`)
		return
	}
	as.n++
	access, refresh := fmt.Sprintf("dt-%s-%d", user, as.n), fmt.Sprintf("rt-%s-%d", user, as.n)
	as.good[access], as.refresh[refresh] = user, user
	as.expiry[access] = time.Now().Add(time.Duration(as.life.Load()) * time.Second)
	w.Header().Set("Content-Type", "application/json")
	fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":%d,"refresh_token":%q}`, access, as.life.Load(), refresh)
}

// userOf is the user of a good, unexpired bearer token ("" for none).
func (as *personAS) userOf(auth string) string {
	tok, _ := strings.CutPrefix(auth, "Bearer ")
	as.mu.Lock()
	defer as.mu.Unlock()
	if time.Now().After(as.expiry[tok]) {
		return ""
	}
	return as.good[tok]
}

// protectForPeople makes ts a protected resource of as: its RFC 9728
// metadata at the well-known address, 401 without a token as issued.
func protectForPeople(ts *toolServer, as *personAS) {
	next := ts.srv.Config.Handler
	ts.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/.well-known/oauth-protected-resource/mcp" {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"resource":%q,"authorization_servers":[%q]}`, ts.srv.URL+"/mcp", as.srv.URL)
			return
		}
		if as.userOf(r.Header.Get("Authorization")) == "" {
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// actingFor stands in for the identify stage of tokens issued to a
// person's client (built elsewhere): the test header X-Test-Person names
// the person an agent's request acts for.
func actingFor(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s := r.Header.Get("X-Test-Person"); s != "" {
			r = r.WithContext(door.WithBehalf(r.Context(), door.Behalf{Subject: s, Name: s + "@example.org"}))
		}
		next.ServeHTTP(w, r)
	})
}

// personHeader adds X-Test-Person to every request.
type personHeader struct {
	subject string
	next    http.RoundTripper
}

func (p personHeader) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if p.subject != "" {
		r.Header.Set("X-Test-Person", p.subject)
	}
	return p.next.RoundTrip(r)
}

const testTokenKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

// TestMCPDelegatedTokens: a person signed in with the organisation's
// provider connects their account at a server (its endpoints discovered
// from its metadata) on a page that needs no script; an agent's calls for
// them carry their token, renewed when it expires; another person's calls
// and calls for nobody are refused with where to connect; the token is
// sealed in Redis under the key; disconnecting forgets it.
func TestMCPDelegatedTokens(t *testing.T) {
	ts := newToolServer(t)
	as := newPersonAS(t)
	as.user.Store("ada")
	protectForPeople(ts, as)
	rs := testredis.Start(t)
	op := testoidc.Start(t, testoidc.Options{Users: []testoidc.User{{Subject: "u-ada", Email: "ada@example.org", Groups: []string{"staff"}}}})
	t.Setenv("OIDC_SECRET", op.ClientSecret)
	t.Setenv("MCP_TOKEN_KEY", testTokenKey)
	dir := t.TempDir()
	_, a, auditLog := buildFromFiles(t, dir, map[string]string{
		config.GatewayFile: agentGatewayYAML(filepath.Join(dir, "audit"), "people") + `state:
  backend: redis
  redis_url: ` + rs.URL() + `
messaging:
  allowed_networks: [127.0.0.0/8]
` + peopleYAML(op, "reviewers: [staff]") + `mcp:
  token_key: ${MCP_TOKEN_KEY}
  servers:
    - name: docs
      url: ` + ts.srv.URL + `/mcp
      oauth:
        delegated:
          client_id: gateway
          scopes: [docs]
`,
		config.AgentsFile:   "agents:\n  coder:\n    type: coder\n    token_sha256: \"" + roster.HashTokenHex("tok-coder") + "\"\n    mcp_tools: {docs: [\"read_*\"]}\n",
		config.ProtocolFile: "protocol: {}\n",
	})
	srv := httptest.NewServer(actingFor(a.Handler()))
	t.Cleanup(func() {
		srv.Close()
		a.Close()
		_ = auditLog.Close()
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	call := func(subject string) (string, error) {
		client := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "1"}, nil)
		cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: srv.URL + "/mcp/docs",
			HTTPClient: &http.Client{Transport: personHeader{subject, bearer{"tok-coder", http.DefaultTransport}}}}, nil)
		if err != nil {
			return "", err
		}
		defer cs.Close()
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "a.txt"}})
		if err != nil {
			return "", err
		}
		return toolText(res), nil
	}

	// Ada signs in to the pages.
	op.AllowRedirect(srv.URL+"/review/oidc/callback", "")
	op.SignInAs("u-ada")
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	page := func(res *http.Response, err error) (string, *http.Response) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		defer res.Body.Close()
		b, _ := io.ReadAll(res.Body)
		return string(b), res
	}
	if body, res := page(browser.Get(srv.URL + "/review/oidc/login?next=/review/mcp/accounts")); res.StatusCode != http.StatusOK || !strings.Contains(body, "not connected") {
		t.Fatalf("accounts page %d:\n%s", res.StatusCode, body)
	}

	t.Run("before connecting, the call is refused with where to connect", func(t *testing.T) {
		_, err := call("u-ada")
		if e := rpcError(t, err); e.Code != -32064 || !strings.Contains(e.Message, "ada@example.org has not connected their account there; connect it at /review/mcp/accounts") {
			t.Errorf("error %d %q", e.Code, e.Message)
		}
	})

	connect := func(t *testing.T) {
		t.Helper()
		body, _ := page(browser.Get(srv.URL + "/review/mcp/accounts"))
		m := regexp.MustCompile(`action="/review/mcp/accounts/docs/connect"><input type="hidden" name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no connect form:\n%s", body)
		}
		post := func(csrf string) (string, *http.Response) {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/review/mcp/accounts/docs/connect", strings.NewReader(url.Values{"csrf": {csrf}}.Encode()))
			req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
			req.Header.Set("Origin", srv.URL)
			return page(browser.Do(req))
		}
		if _, res := post("forged"); res.StatusCode != http.StatusForbidden {
			t.Fatalf("a connect without the CSRF token: %d", res.StatusCode)
		}
		body, res := post(m[1])
		link := regexp.MustCompile(`<a href="([^"]+)">Continue`).FindStringSubmatch(body)
		if res.StatusCode != http.StatusOK || link == nil {
			t.Fatalf("connect %d:\n%s", res.StatusCode, body)
		}
		body, res = page(browser.Get(strings.ReplaceAll(link[1], "&amp;", "&")))
		if res.Request.URL.Path != "/review/mcp/accounts" || !strings.Contains(body, "Connected to docs.") {
			t.Fatalf("after the server's sign-in, at %s:\n%s", res.Request.URL, body)
		}
	}

	t.Run("connected, the calls for Ada carry Ada's token", func(t *testing.T) {
		connect(t)
		got, err := call("u-ada")
		if err != nil || !strings.Contains(got, "contents of a.txt") {
			t.Fatalf("call: %q, %v", got, err)
		}
		for _, h := range ts.seen() {
			if a := h.Get("Authorization"); a != "" && !strings.HasPrefix(a, "Bearer dt-ada-") {
				t.Errorf("the server was sent %q", a)
			}
		}
	})

	t.Run("another person's calls and calls for nobody are refused", func(t *testing.T) {
		before := len(ts.seen())
		_, err := call("u-bob")
		if e := rpcError(t, err); !strings.Contains(e.Message, "u-bob@example.org has not connected") {
			t.Errorf("bob: %q", e.Message)
		}
		_, err = call("")
		if e := rpcError(t, err); !strings.Contains(e.Message, "made on nobody's behalf") {
			t.Errorf("nobody: %q", e.Message)
		}
		if n := len(ts.seen()); n != before {
			t.Errorf("the server got %d requests for people without a token", n-before)
		}
	})

	t.Run("the stored token is sealed, and opens only with the key for Ada and docs", func(t *testing.T) {
		rc := redis.NewClient(&redis.Options{Addr: rs.Addr()})
		defer rc.Close()
		keys, err := rc.Keys(ctx, "{gw:mcp}:token:docs:*").Result()
		if err != nil || len(keys) != 1 {
			t.Fatalf("token keys %v, %v", keys, err)
		}
		blob, _ := rc.Get(ctx, keys[0]).Result()
		if strings.Contains(blob, "dt-ada") || strings.Contains(blob, "rt-ada") || strings.Contains(blob, "u-ada") {
			t.Fatalf("the stored blob shows the token or the person: %q", blob)
		}
		key, _ := base64.StdEncoding.DecodeString(testTokenKey)
		open := func(key []byte, ad string) (string, error) {
			parts := strings.SplitN(blob, ".", 3)
			ct, _ := base64.RawURLEncoding.DecodeString(parts[2])
			block, _ := aes.NewCipher(key)
			gcm, _ := cipher.NewGCM(block)
			plain, err := gcm.Open(nil, ct[:gcm.NonceSize()], ct[gcm.NonceSize():], []byte(ad))
			return string(plain), err
		}
		if plain, err := open(key, "sacp-gateway mcp token\x00docs\x00u-ada"); err != nil || !strings.Contains(plain, "dt-ada-") {
			t.Errorf("opened with the key: %q, %v", plain, err)
		}
		if _, err := open(key, "sacp-gateway mcp token\x00docs\x00u-bob"); err == nil {
			t.Error("the blob opens as bob's")
		}
		other := make([]byte, 32)
		if _, err := open(other, "sacp-gateway mcp token\x00docs\x00u-ada"); err == nil {
			t.Error("the blob opens with another key")
		}
	})

	t.Run("an expired token is renewed with its refresh token", func(t *testing.T) {
		as.life.Store(1)
		body, _ := page(browser.Get(srv.URL + "/review/mcp/accounts"))
		m := regexp.MustCompile(`/disconnect"><input type="hidden" name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no disconnect form:\n%s", body)
		}
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/review/mcp/accounts/docs/disconnect", strings.NewReader(url.Values{"csrf": {m[1]}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", srv.URL)
		if _, res := page(browser.Do(req)); res.Request.URL.Path != "/review/mcp/accounts" {
			t.Fatalf("disconnect ended at %s", res.Request.URL)
		}
		connect(t) // a token of one second
		time.Sleep(1100 * time.Millisecond)
		if got, err := call("u-ada"); err != nil || !strings.Contains(got, "contents of a.txt") {
			t.Fatalf("after expiry: %q, %v", got, err)
		}
		if as.refreshd.Load() == 0 {
			t.Error("no refresh grant was used")
		}
	})

	t.Run("disconnected, the calls are refused again", func(t *testing.T) {
		body, _ := page(browser.Get(srv.URL + "/review/mcp/accounts"))
		m := regexp.MustCompile(`/disconnect"><input type="hidden" name="csrf" value="([^"]+)"`).FindStringSubmatch(body)
		if m == nil {
			t.Fatalf("no disconnect form:\n%s", body)
		}
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/review/mcp/accounts/docs/disconnect", strings.NewReader(url.Values{"csrf": {m[1]}}.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		req.Header.Set("Origin", srv.URL)
		page(browser.Do(req))
		_, err := call("u-ada")
		if e := rpcError(t, err); !strings.Contains(e.Message, "has not connected") {
			t.Errorf("after disconnect: %q", e.Message)
		}
	})
}
