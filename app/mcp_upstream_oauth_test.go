package app

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
)

// tokenServer is a small OAuth authorization server: its token endpoint
// issues expiring bearer tokens to one client (client_secret_basic or
// _post) for the client credentials grant, and it says whether a token it
// issued is still good.
type tokenServer struct {
	srv          *httptest.Server
	clientSecret string
	// life is the expires_in of the next tokens (seconds).
	life atomic.Int64
	// fail answers every token request 401 invalid_client.
	fail   atomic.Bool
	issued atomic.Int64
	mu     sync.Mutex
	good   map[string]time.Time
}

func newTokenServer(t *testing.T, secret string) *tokenServer {
	ts := &tokenServer{clientSecret: secret, good: map[string]time.Time{}}
	ts.life.Store(3600)
	ts.srv = httptest.NewServer(http.HandlerFunc(ts.token))
	t.Cleanup(ts.srv.Close)
	return ts
}

func (ts *tokenServer) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil || r.Method != http.MethodPost || r.URL.Path != "/token" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	id, secret, ok := r.BasicAuth()
	if !ok {
		id, secret = r.PostForm.Get("client_id"), r.PostForm.Get("client_secret")
	}
	w.Header().Set("Content-Type", "application/json")
	if ts.fail.Load() || id != "gateway" || secret != ts.clientSecret || r.PostForm.Get("grant_type") != "client_credentials" {
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":"invalid_client","error_description":"bad secret %s"}`, secret)
		return
	}
	n := ts.issued.Add(1)
	tok := fmt.Sprintf("at-%d-%s", n, r.PostForm.Get("scope"))
	life := ts.life.Load()
	ts.mu.Lock()
	ts.good[tok] = time.Now().Add(time.Duration(life) * time.Second)
	ts.mu.Unlock()
	fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":%d}`, tok, life)
}

// valid reports whether auth is "Bearer " and a token issued and not expired.
func (ts *tokenServer) valid(auth string) bool {
	tok, ok := strings.CutPrefix(auth, "Bearer ")
	ts.mu.Lock()
	defer ts.mu.Unlock()
	exp, known := ts.good[tok]
	return ok && known && time.Now().Before(exp)
}

// revoke makes every token issued so far no good.
func (ts *tokenServer) revoke() {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	clear(ts.good)
}

// protect answers 401 to a request to ts's MCP server without a bearer
// token as from.valid says, as a protected MCP server does.
func protect(ts *toolServer, from func(string) bool) {
	next := ts.srv.Config.Handler
	ts.srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !from(r.Header.Get("Authorization")) {
			w.Header().Set("WWW-Authenticate", `Bearer error="invalid_token"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// newOAuthMCPGateway is the whole gateway in front of ts as server "files",
// whose tokens come from as by the client credentials grant; agent coder
// may read and write.
func newOAuthMCPGateway(t *testing.T, ts *toolServer, as *tokenServer) *a2a {
	t.Helper()
	dir := t.TempDir()
	auditDir := filepath.Join(dir, "audit")
	gw := agentGatewayYAML(auditDir, "mcp") + `messaging:
  allowed_networks: [127.0.0.0/8]
mcp:
  servers:
    - name: files
      url: ` + ts.srv.URL + `/mcp
      oauth:
        client_credentials:
          token_url: ` + as.srv.URL + `/token
          client_id: gateway
          client_secret: ` + as.clientSecret + `
          scopes: [files]
`
	agents := fmt.Sprintf("agents:\n  coder:\n    type: coder\n    token_sha256: %q\n    mcp_tools: {files: [\"read_*\", \"write_*\"]}\n", roster.HashTokenHex("tok-coder"))
	return serveApp(t, dir, auditDir, map[string]string{config.GatewayFile: gw, config.AgentsFile: agents, config.ProtocolFile: "protocol: {}\n"})
}

// TestMCPClientCredentials: a server that wants OAuth is reached with the
// gateway's own token (client credentials), fetched once for concurrent
// calls, used until shortly before it expires, replaced when the server
// refuses it; a token endpoint that refuses the gateway is a clear
// JSON-RPC error that quotes nothing it answered; the agent's token never
// reaches the server, and no token is in the audit trail.
func TestMCPClientCredentials(t *testing.T) {
	ts := newToolServer(t)
	as := newTokenServer(t, "cc-s3cret")
	protect(ts, as.valid)
	g := newOAuthMCPGateway(t, ts, as)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := mustConnect(t, ctx, g, "files", "tok-coder")
	read := func() error {
		_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "a.txt"}})
		return err
	}

	t.Run("calls carry the gateway's token", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for range 8 {
			wg.Go(func() { errs <- read() })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Fatal(err)
			}
		}
		if n := as.issued.Load(); n != 1 {
			t.Errorf("%d tokens issued, want 1 for every call", n)
		}
		for _, h := range ts.seen() {
			if a := h.Get("Authorization"); !strings.HasPrefix(a, "Bearer at-") {
				t.Fatalf("the server was sent Authorization %q", a)
			}
		}
	})

	t.Run("an expiring token is replaced before it expires", func(t *testing.T) {
		as.life.Store(2)
		as.revoke() // the long-lived token: refused once, replaced by a 2s one
		if err := read(); err != nil {
			t.Fatal(err)
		}
		before := as.issued.Load()
		time.Sleep(2 * time.Second)
		if err := read(); err != nil {
			t.Fatalf("after the token's life: %v", err)
		}
		if as.issued.Load() != before+1 {
			t.Errorf("issued %d tokens after expiry, want one more than %d", as.issued.Load(), before)
		}
	})

	t.Run("a token the server refuses is dropped and the call retried", func(t *testing.T) {
		as.life.Store(3600)
		if err := read(); err != nil {
			t.Fatal(err)
		}
		as.revoke()
		before := as.issued.Load()
		if err := read(); err != nil {
			t.Fatalf("after revocation: %v", err)
		}
		if as.issued.Load() != before+1 {
			t.Errorf("issued %d, want %d", as.issued.Load(), before+1)
		}
	})

	t.Run("a token endpoint that refuses is a clear error", func(t *testing.T) {
		as.fail.Store(true)
		defer as.fail.Store(false)
		as.revoke()
		err := read()
		e := rpcError(t, err)
		if e.Code != -32064 || !strings.Contains(e.Message, `MCP server "files" could not be authorized: the token endpoint answered HTTP 401 (invalid_client)`) {
			t.Errorf("error %d %q", e.Code, e.Message)
		}
		if strings.Contains(e.Message, "s3cret") || strings.Contains(e.Message, "bad secret") {
			t.Errorf("the error quotes the endpoint's answer: %q", e.Message)
		}
	})

	t.Run("no token or secret in the trail, nor the agent's token at the server", func(t *testing.T) {
		g.entries("mcp.result")
		files, _ := filepath.Glob(filepath.Join(g.auditDir, "*.jsonl"))
		for _, f := range files {
			raw, _ := os.ReadFile(f)
			if strings.Contains(string(raw), "at-1-files") || strings.Contains(string(raw), "cc-s3cret") {
				t.Errorf("%s holds a token or the client secret", f)
			}
		}
		for _, h := range ts.seen() {
			if strings.Contains(h.Get("Authorization"), "tok-coder") {
				t.Fatal("the agent's token reached the server")
			}
		}
	})
}
