package app

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/auth"
	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/modelcontextprotocol/go-sdk/oauthex"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/testoidc"
	"github.com/sacpgw/gateway/internal/testredis"
)

// clientRedirect is where the test's MCP clients take their codes: a
// native app's loopback listener (nothing listens; the browser stops there).
const clientRedirect = "http://127.0.0.1:9/callback"

// oauthProvider is the organisation's provider of the OAuth tests: ada is
// an admin, rita a reviewer (she signs in to the pages, but the policy
// lets her client act as no agent).
func oauthProvider(t *testing.T) *testoidc.Provider {
	op := testoidc.Start(t, testoidc.Options{Users: []testoidc.User{
		{Subject: "u-ada", Email: "ada@example.org", Groups: []string{"gw-admins"}},
		{Subject: "u-rita", Email: "rita@example.org", Groups: []string{"gw-reviewers"}},
	}})
	t.Setenv("OIDC_SECRET", op.ClientSecret)
	return op
}

// newOAuthGateway is the whole gateway in front of ts with the
// authorization server for people's MCP clients on, served at base (a
// listener bound before the gateway is built, so that its configuration
// can name its own URL); redisURL "" keeps the state in memory.
func newOAuthGateway(t *testing.T, ts *toolServer, op *testoidc.Provider, ln net.Listener, base, redisURL, chain string) *a2a {
	t.Helper()
	dir := t.TempDir()
	auditDir := filepath.Join(dir, "audit")
	state := ""
	if redisURL != "" {
		state = "state:\n  backend: redis\n" + redisYAML(redisURL) + "  timeout: 1s\n"
	}
	gw := agentGatewayYAML(auditDir, chain) + `  fail_mode: closed
approval:
  base_url: ` + base + `
messaging:
  allowed_networks: [127.0.0.0/8]
` + peopleYAML(op, "admins: [gw-admins]", "reviewers: [gw-reviewers]") + `mcp_clients:
  access_token_ttl: 10m
` + state + `mcp:
  servers:
    - name: files
      url: ` + ts.srv.URL + `/mcp
      headers:
        Authorization: "Bearer up-secret"
    - name: files_json
      url: ` + ts.srv.URL + `/json
      headers:
        Authorization: "Bearer up-secret"
`
	agents := "agents:\n"
	for id, tools := range map[string]string{"coder": `{files: ["read_*"], files_json: ["read_*"]}`, "intern": `{files: []}`} {
		agents += "  " + id + ":\n    type: coder\n    token_sha256: \"" + roster.HashTokenHex("tok-"+id) + "\"\n    mcp_tools: " + tools + "\n"
	}
	cfg, a, auditLog := buildFromFiles(t, dir, map[string]string{
		config.GatewayFile: gw, config.AgentsFile: agents, config.ProtocolFile: "protocol: {}\n",
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	srv := httptest.NewUnstartedServer(a.server.Handler())
	srv.Listener = ln
	srv.Start()
	t.Cleanup(func() {
		srv.Close()
		cancel()
		<-done
		a.Close()
		_ = auditLog.Close()
	})
	op.AllowRedirect(base+"/review/oidc/callback", "")
	return &a2a{t: t, srv: srv, app: a, auditDir: auditDir, dir: dir, cfg: cfg}
}

// bindLoopback binds a loopback port and returns it with its URL.
func bindLoopback(t *testing.T) (net.Listener, string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln, "http://" + ln.Addr().String()
}

// browser is a person's browser: cookies kept, redirects followed, except
// the one to the client's redirect URI, which it returns.
func browser() *http.Client {
	jar, _ := cookiejar.New(nil)
	return &http.Client{Jar: jar, Timeout: 20 * time.Second, CheckRedirect: func(req *http.Request, _ []*http.Request) error {
		if strings.HasPrefix(req.URL.String(), clientRedirect) {
			return http.ErrUseLastResponse
		}
		return nil
	}}
}

var (
	csrfRE  = regexp.MustCompile(`name="csrf" value="([^"]+)"`)
	agentRE = regexp.MustCompile(`name="agent" value="([^"]+)"`)
)

// consentPage follows an authorization URL in b, through the sign-in at
// the provider, to the consent page: its URL, status and body.
func consentPage(t *testing.T, b *http.Client, authorizeURL string) (*url.URL, int, string) {
	t.Helper()
	res, err := b.Get(authorizeURL)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	return res.Request.URL, res.StatusCode, string(body)
}

// decide posts the person's decision on the consent page at page and
// returns the client's redirect (the Location the gateway answered).
func decide(t *testing.T, b *http.Client, page *url.URL, body, decision, agent string) *url.URL {
	t.Helper()
	m := csrfRE.FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no consent form at %s:\n%s", page, body)
	}
	res, err := b.PostForm(page.String(), url.Values{"csrf": {m[1]}, "decision": {decision}, "agent": {agent}})
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if res.StatusCode != http.StatusSeeOther {
		t.Fatalf("consent answered %d:\n%s", res.StatusCode, out)
	}
	loc, err := url.Parse(res.Header.Get("Location"))
	if err != nil || !strings.HasPrefix(loc.String(), clientRedirect) {
		t.Fatalf("consent redirected to %q", res.Header.Get("Location"))
	}
	return loc
}

// sdkOAuthClient is an IDE's MCP client made with the official Go SDK: its
// OAuth handler registers itself and runs the authorization code flow
// with PKCE; the "browser" signs the person in and approves as agent.
func sdkOAuthClient(t *testing.T, agent string) (*auth.AuthorizationCodeHandler, *[]string) {
	t.Helper()
	var pages []string
	h, err := auth.NewAuthorizationCodeHandler(&auth.AuthorizationCodeHandlerConfig{
		DynamicClientRegistrationConfig: &auth.DynamicClientRegistrationConfig{Metadata: &oauthex.ClientRegistrationMetadata{
			RedirectURIs: []string{clientRedirect}, ClientName: `Test IDE <script>alert(1)</script>`,
			GrantTypes: []string{"authorization_code", "refresh_token"}, TokenEndpointAuthMethod: "none",
		}},
		RequestRefreshToken: true,
		AuthorizationCodeFetcher: func(_ context.Context, args *auth.AuthorizationArgs) (*auth.AuthorizationResult, error) {
			b := browser()
			page, status, body := consentPage(t, b, args.URL)
			pages = append(pages, body)
			if status != http.StatusOK {
				return nil, fmt.Errorf("consent page %d: %s", status, body)
			}
			q := decide(t, b, page, body, "allow", agent).Query()
			return &auth.AuthorizationResult{Code: q.Get("code"), State: q.Get("state"), Iss: q.Get("iss")}, nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	return h, &pages
}

// TestMCPClientOAuthEndToEnd: an IDE's MCP client (the Go SDK's OAuth
// client) given only <gateway>/mcp/files gets a 401 naming the resource
// metadata, discovers the gateway's authorization server, registers,
// sends its person through the organisation's sign-in and the consent
// page, and lists the tools as the agent the person chose; the server
// never sees the person's token, and the audit trail names the person.
func TestMCPClientOAuthEndToEnd(t *testing.T) {
	op := oauthProvider(t)
	ts := newToolServer(t)
	ln, base := bindLoopback(t)
	g := newOAuthGateway(t, ts, op, ln, base, "", "oauth")

	// The 401 of a client with nothing, and of one with a token that is
	// not good here.
	status, _, hdr := g.do(http.MethodPost, "/mcp/files", "", `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	want := `Bearer resource_metadata="` + base + `/.well-known/oauth-protected-resource/mcp/files"`
	if status != http.StatusUnauthorized || hdr.Get("WWW-Authenticate") != want {
		t.Fatalf("no credential: %d, WWW-Authenticate %q; want 401 and %q", status, hdr.Get("WWW-Authenticate"), want)
	}
	status, _, hdr = g.do(http.MethodPost, "/mcp/files", "gwmcp_at_not-issued", `{"jsonrpc":"2.0","id":1,"method":"ping"}`)
	if status != http.StatusUnauthorized || hdr.Get("WWW-Authenticate") != want+`, error="invalid_token"` {
		t.Fatalf("unknown token: %d, WWW-Authenticate %q", status, hdr.Get("WWW-Authenticate"))
	}
	// The metadata: the resource, the issuer; an unknown server has none.
	var prm map[string]any
	status, body, _ := g.do(http.MethodGet, "/.well-known/oauth-protected-resource/mcp/files", "", "")
	if err := json.Unmarshal(body, &prm); err != nil || status != 200 || prm["resource"] != base+"/mcp/files" ||
		!slices.Equal(anyStrings(prm["authorization_servers"]), []string{base}) {
		t.Fatalf("resource metadata %d: %s", status, body)
	}
	if status, _, _ := g.do(http.MethodGet, "/.well-known/oauth-protected-resource/mcp/nope", "", ""); status != http.StatusNotFound {
		t.Fatalf("metadata of an unknown server: %d", status)
	}

	op.SignInAs("u-ada")
	h, pages := sdkOAuthClient(t, "coder")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := sdk.NewClient(&sdk.Implementation{Name: "ide", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: base + "/mcp/files", OAuthHandler: h}, nil)
	if err != nil {
		t.Fatalf("connect with OAuth: %v", err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "a.txt"}})
	if err != nil || res.IsError || !strings.Contains(toolText(res), "contents of a.txt") {
		t.Fatalf("read_file as ada's coder: %v %+v", err, res)
	}
	tools, err := cs.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, tl := range tools.Tools {
		names = append(names, tl.Name)
	}
	if !slices.Contains(names, "read_file") || slices.Contains(names, "delete_file") {
		t.Fatalf("tools as coder: %v (want coder's read_* only)", names)
	}
	if len(*pages) != 1 || !strings.Contains((*pages)[0], "Test IDE &lt;script&gt;") || strings.Contains((*pages)[0], "<script>") ||
		!strings.Contains((*pages)[0], "127.0.0.1:9") {
		t.Fatalf("consent page: want the client's name escaped and its redirect host:\n%v", *pages)
	}
	ts2, _ := h.TokenSource(ctx)
	tok, err := ts2.Token()
	if err != nil || !strings.HasPrefix(tok.AccessToken, "gwmcp_at_") || tok.RefreshToken == "" {
		t.Fatalf("token: %v %+v", err, tok)
	}
	for _, hd := range ts.seen() {
		if v := hd.Get("Authorization"); v != "Bearer up-secret" {
			t.Fatalf("the server was sent Authorization %q: only its configured credential may reach it", v)
		}
	}
	// The person on whose behalf, in the trail; never the token.
	calls := g.entries("mcp.call")
	if len(calls) == 0 || !strings.Contains(string(calls[len(calls)-1].Summary), `"on_behalf_of":{"email":"ada@example.org","subject":"u-ada"}`) ||
		calls[len(calls)-1].AgentID != "coder" {
		t.Fatalf("mcp.call entries: %+v", calls)
	}
	for _, kind := range []string{"oauth.register", "oauth.grant", "oauth.token"} {
		if len(g.entries(kind)) == 0 {
			t.Errorf("no %s entry", kind)
		}
	}
	assertTrailHasNo(t, g, tok.AccessToken, tok.RefreshToken)

	// The same token elsewhere: another server, the OpenAI API.
	if status, _, _ := g.do(http.MethodPost, "/mcp/files_json", tok.AccessToken, `{"jsonrpc":"2.0","id":1,"method":"ping"}`); status != http.StatusUnauthorized {
		t.Fatalf("token for /mcp/files at /mcp/files_json: %d, want 401", status)
	}
	if status, _, _ := g.do(http.MethodGet, "/v1/models", tok.AccessToken, ""); status != http.StatusUnauthorized {
		t.Fatalf("token for /mcp/files at /v1/models: %d, want 401", status)
	}
}

func anyStrings(v any) []string {
	var out []string
	l, _ := v.([]any)
	for _, x := range l {
		s, _ := x.(string)
		out = append(out, s)
	}
	return out
}

// assertTrailHasNo fails when a secret appears anywhere in the trail.
func assertTrailHasNo(t *testing.T, g *a2a, secrets ...string) {
	t.Helper()
	matches, _ := filepath.Glob(filepath.Join(g.auditDir, "*.jsonl"))
	for _, f := range matches {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range secrets {
			if s != "" && strings.Contains(string(raw), s) {
				t.Fatalf("%s holds a token", f)
			}
		}
	}
}

// oauthFlow drives the flow by hand, as a client would, to test its
// refusals: registration, authorization, consent, token requests.
type oauthFlow struct {
	t        *testing.T
	g        *a2a
	base     string
	clientID string
}

func newOAuthFlow(t *testing.T, g *a2a, base string) *oauthFlow {
	f := &oauthFlow{t: t, g: g, base: base}
	status, body, _ := g.do(http.MethodPost, "/oauth/register", "",
		`{"redirect_uris":["`+clientRedirect+`"],"client_name":"Hand","grant_types":["authorization_code","refresh_token"],"token_endpoint_auth_method":"none","logo_uri":"https://x.example/l.png"}`)
	var reg map[string]any
	if err := json.Unmarshal(body, &reg); err != nil || status != http.StatusCreated {
		t.Fatalf("register: %d %s", status, body)
	}
	f.clientID, _ = reg["client_id"].(string)
	return f
}

// authorizeURL is an authorization request with PKCE of verifier (method
// S256 unless given otherwise) for resource.
func (f *oauthFlow) authorizeURL(verifier, method, resource string) string {
	q := url.Values{"response_type": {"code"}, "client_id": {f.clientID}, "redirect_uri": {clientRedirect}, "state": {"st-1"}, "resource": {resource}}
	switch method {
	case "S256":
		h := sha256.Sum256([]byte(verifier))
		q.Set("code_challenge", base64.RawURLEncoding.EncodeToString(h[:]))
		q.Set("code_challenge_method", "S256")
	case "plain":
		q.Set("code_challenge", verifier)
		q.Set("code_challenge_method", "plain")
	}
	return f.base + "/oauth/authorize?" + q.Encode()
}

// code runs the flow to a code as the person op signs in next, acting as
// agent.
func (f *oauthFlow) code(verifier, agent string) string {
	b := browser()
	page, status, body := consentPage(f.t, b, f.authorizeURL(verifier, "S256", f.base+"/mcp/files"))
	if status != http.StatusOK {
		f.t.Fatalf("consent page %d: %s", status, body)
	}
	loc := decide(f.t, b, page, body, "allow", agent)
	if loc.Query().Get("state") != "st-1" || loc.Query().Get("iss") != f.base {
		f.t.Fatalf("redirect %s: want state and iss back", loc)
	}
	return loc.Query().Get("code")
}

// token posts a token request; it returns the status and the answer.
func (f *oauthFlow) token(form url.Values) (int, map[string]any) {
	f.t.Helper()
	var out map[string]any
	status := patient(func() int {
		res, err := http.PostForm(f.base+"/oauth/token", form)
		if err != nil {
			f.t.Fatal(err)
		}
		defer res.Body.Close()
		out = nil
		_ = json.NewDecoder(res.Body).Decode(&out)
		return res.StatusCode
	})
	return status, out
}

// patient runs call again while the gateway answers 429: the refusals a
// test provokes spend its source's budget of failed authentications.
func patient(call func() int) int {
	for range 5 {
		if status := call(); status != http.StatusTooManyRequests {
			return status
		}
		time.Sleep(time.Second)
	}
	return http.StatusTooManyRequests
}

func (f *oauthFlow) exchange(code, verifier string) (int, map[string]any) {
	return f.token(url.Values{"grant_type": {"authorization_code"}, "code": {code}, "client_id": {f.clientID},
		"redirect_uri": {clientRedirect}, "code_verifier": {verifier}, "resource": {f.base + "/mcp/files"}})
}

func (f *oauthFlow) refresh(rt string) (int, map[string]any) {
	return f.token(url.Values{"grant_type": {"refresh_token"}, "refresh_token": {rt}, "client_id": {f.clientID}})
}

// works reports whether an access token opens /mcp/files.
func (f *oauthFlow) works(at string) bool {
	return patient(func() int {
		status, _, _ := f.g.do(http.MethodPost, "/mcp/files", at,
			`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
		return status
	}) == http.StatusOK
}

const verifier1 = "verifier-one-0123456789-0123456789-0123456789"

// TestMCPClientOAuthRefusals: PKCE missing, plain or wrong; a code used
// twice (which revokes what it gave); refresh tokens rotated, and a spent
// one presented again revoking its grant; a person the policy lets act as
// no agent gets a page saying so and no code.
func TestMCPClientOAuthRefusals(t *testing.T) {
	op := oauthProvider(t)
	ts := newToolServer(t)
	ln, base := bindLoopback(t)
	g := newOAuthGateway(t, ts, op, ln, base, "", "oauth-refusals")
	f := newOAuthFlow(t, g, base)
	op.SignInAs("u-ada")

	for _, c := range []struct{ note, method, resource, want string }{
		{"no PKCE", "", base + "/mcp/files", "invalid_request"},
		{"plain PKCE", "plain", base + "/mcp/files", "invalid_request"},
		{"unknown resource", "S256", base + "/mcp/nope", "invalid_target"},
		{"another gateway's resource", "S256", "https://elsewhere.example/mcp/files", "invalid_target"},
	} {
		res, err := browser().Get(f.authorizeURL(verifier1, c.method, c.resource))
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		loc, _ := url.Parse(res.Header.Get("Location"))
		if res.StatusCode != http.StatusSeeOther || loc == nil || loc.Query().Get("error") != c.want || loc.Query().Get("state") != "st-1" {
			t.Errorf("%s: %d to %q, want a redirect with error=%s", c.note, res.StatusCode, res.Header.Get("Location"), c.want)
		}
	}
	// An unregistered redirect URI is never redirected to.
	u := strings.Replace(f.authorizeURL(verifier1, "S256", base+"/mcp/files"), url.QueryEscape(clientRedirect), url.QueryEscape("https://evil.example/cb"), 1)
	if res, err := browser().Get(u); err != nil || res.StatusCode != http.StatusBadRequest || res.Header.Get("Location") != "" {
		t.Fatalf("unregistered redirect_uri: %v %v", err, res)
	}

	// The consent form: a forged CSRF token, or another site's form, is
	// refused; an agent the page did not offer is decided again, and refused.
	b := browser()
	page, _, body := consentPage(t, b, f.authorizeURL(verifier1, "S256", base+"/mcp/files"))
	csrf := csrfRE.FindStringSubmatch(body)[1]
	post := func(form url.Values, origin string) int {
		req, _ := http.NewRequest(http.MethodPost, page.String(), strings.NewReader(form.Encode()))
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		res, err := b.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_ = res.Body.Close()
		return res.StatusCode
	}
	if st := post(url.Values{"csrf": {"forged"}, "decision": {"allow"}, "agent": {"coder"}}, ""); st != http.StatusForbidden {
		t.Fatalf("forged CSRF token: %d", st)
	}
	if st := post(url.Values{"csrf": {csrf}, "decision": {"allow"}, "agent": {"coder"}}, "https://evil.example"); st != http.StatusForbidden {
		t.Fatalf("another site's form: %d", st)
	}
	if st := post(url.Values{"csrf": {csrf}, "decision": {"allow"}, "agent": {"ghost"}}, ""); st != http.StatusForbidden {
		t.Fatalf("an agent not offered: %d", st)
	}

	// The wrong verifier spends the code; the right one then finds none.
	code := f.code(verifier1, "coder")
	if status, out := f.exchange(code, "wrong-verifier-0123456789-0123456789-0123456789"); status != 400 || out["error"] != "invalid_grant" {
		t.Fatalf("wrong verifier: %d %v", status, out)
	}
	if status, out := f.exchange(code, verifier1); status != 400 || out["error"] != "invalid_grant" {
		t.Fatalf("code after a wrong verifier: %d %v", status, out)
	}
	// A code used twice: the second use revokes the tokens of the first.
	code = f.code(verifier1, "coder")
	status, first := f.exchange(code, verifier1)
	at1, _ := first["access_token"].(string)
	if status != 200 || !f.works(at1) {
		t.Fatalf("exchange: %d %v", status, first)
	}
	if status, out := f.exchange(code, verifier1); status != 400 || out["error"] != "invalid_grant" {
		t.Fatalf("code reused: %d %v", status, out)
	}
	if f.works(at1) {
		t.Fatal("the token of a code used twice still works")
	}

	// Refresh: rotated; the old refresh token again revokes the family.
	code = f.code(verifier1, "coder")
	_, tok := f.exchange(code, verifier1)
	at1, rt1 := tok["access_token"].(string), tok["refresh_token"].(string)
	status, tok2 := f.refresh(rt1)
	at2, rt2 := tok2["access_token"].(string), tok2["refresh_token"].(string)
	if status != 200 || rt2 == "" || rt2 == rt1 || !f.works(at2) || f.works(at1) {
		t.Fatalf("refresh: %d %v (the new token must work, the old one not)", status, tok2)
	}
	if status, out := f.refresh(rt1); status != 400 || out["error"] != "invalid_grant" {
		t.Fatalf("spent refresh token: %d %v", status, out)
	}
	if f.works(at2) {
		t.Fatal("a spent refresh token presented again left its family's access token working")
	}
	if status, _ := f.refresh(rt2); status != 400 {
		t.Fatal("a spent refresh token presented again left its family's refresh token working")
	}

	// A person the policy lets act as no agent: a page, no code, audited.
	op.SignInAs("u-rita")
	status = patient(func() int {
		_, st, b := consentPage(t, browser(), f.authorizeURL(verifier1, "S256", base+"/mcp/files"))
		body = b
		return st
	})
	if status != http.StatusForbidden || !strings.Contains(body, "act as no agent") || agentRE.MatchString(body) {
		t.Fatalf("rita's consent: %d\n%s", status, body)
	}
	refused := g.entries("oauth.refuse")
	if len(refused) == 0 || !strings.Contains(string(refused[len(refused)-1].Summary), "rita@example.org") {
		t.Fatalf("oauth.refuse entries: %+v", refused)
	}
	assertTrailHasNo(t, g, code, at1, rt1, at2, rt2)
}

// TestMCPClientOAuthReplicasShareTokens: with state.backend redis, a
// token issued through one replica opens the server through another.
func TestMCPClientOAuthReplicasShareTokens(t *testing.T) {
	rs := testredis.Start(t)
	op := oauthProvider(t)
	ts := newToolServer(t)
	lnA, base := bindLoopback(t)
	a := newOAuthGateway(t, ts, op, lnA, base, rs.URL(), "oauth-a")
	lnB, _ := bindLoopback(t)
	b := newOAuthGateway(t, ts, op, lnB, base, rs.URL(), "oauth-b")
	f := newOAuthFlow(t, a, base)
	op.SignInAs("u-ada")
	_, tok := f.exchange(f.code(verifier1, "coder"), verifier1)
	at, _ := tok["access_token"].(string)
	onB := &oauthFlow{t: t, g: b, base: base}
	if at == "" || !onB.works(at) {
		t.Fatalf("a token issued through replica A does not work through replica B: %v", tok)
	}
}

// TestMCPClientOAuthTypeScriptSDK: the TypeScript SDK's OAuth client
// (testdata/tsclient, pinned by its package-lock.json; .ci/run installs
// it) connects given only the URL, as an IDE built on it does: 401,
// metadata, registration, the person's sign-in and consent, tools/list as
// the agent chosen.
func TestMCPClientOAuthTypeScriptSDK(t *testing.T) {
	node, err := exec.LookPath("node")
	if err != nil {
		t.Skip("SKIPPED: node is not installed (.ci/run installs nodejs and runs npm ci in app/testdata/tsclient)")
	}
	if _, err := os.Stat("testdata/tsclient/node_modules/@modelcontextprotocol/sdk/package.json"); err != nil {
		t.Skip("SKIPPED: the TypeScript SDK is not installed: run npm ci in app/testdata/tsclient")
	}
	op := oauthProvider(t)
	ts := newToolServer(t)
	ln, base := bindLoopback(t)
	g := newOAuthGateway(t, ts, op, ln, base, "", "oauth-ts")
	op.SignInAs("u-ada")
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, node, "client.mjs", base+"/mcp/files", "coder")
	cmd.Dir = "testdata/tsclient"
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("TypeScript client: %v\n%s", err, stderr.String())
	}
	var res struct {
		Tools       []string `json:"tools"`
		TokenPrefix string   `json:"token_prefix"`
	}
	if err := json.Unmarshal(out, &res); err != nil || !slices.Contains(res.Tools, "read_file") || slices.Contains(res.Tools, "delete_file") ||
		res.TokenPrefix != "gwmcp_at_" {
		t.Fatalf("TypeScript client printed %s (%v)", out, err)
	}
	if len(g.entries("oauth.token")) == 0 {
		t.Fatal("no oauth.token entry")
	}
}
