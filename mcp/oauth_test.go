package mcp

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/oauth2"
	"golang.org/x/oauth2/clientcredentials"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/egress"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/internal/testkit"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/mcp/mcpconf"
	"github.com/sacpgw/gateway/policy"
)

// answering is a transport that answers every request with body, as JSON.
type answering []byte

func (b answering) RoundTrip(*http.Request) (*http.Response, error) {
	return &http.Response{StatusCode: http.StatusOK, Header: http.Header{"Content-Type": {"application/json"}},
		Body: io.NopCloser(bytes.NewReader(b))}, nil
}

// fetch runs the client credentials grant against an endpoint answering
// body, through the gateway's strict reading.
func fetch(body []byte) (*oauth2.Token, error) {
	cfg := clientcredentials.Config{ClientID: "gw", ClientSecret: "s", TokenURL: "http://as.test/token"}
	client := strictClient(&http.Client{Transport: answering(body)})
	return cfg.Token(context.WithValue(context.Background(), oauth2.HTTPClient, client))
}

// TestTokenResponseStrict: answers that a lenient reader would take are
// refused: no access token, no type, another type, duplicate or case
// variant members, a number for the token, a token that would split a
// header, an expired one.
func TestTokenResponseStrict(t *testing.T) {
	for _, body := range []string{
		`{"token_type":"Bearer","expires_in":60}`,
		`{"access_token":"a","expires_in":60}`,
		`{"access_token":"a","token_type":"Bearer","access_token":"b"}`,
		`{"access_token":"a","token_type":"Bearer","ACCESS_TOKEN":"b"}`,
		`{"access_token":1,"token_type":"Bearer"}`,
		`{"access_token":"a","token_type":"Bearer","expires_in":"60"}`,
		`{"access_token":"a","token_type":"Bearer","expires_in":-5}`,
		`{"access_token":"a","token_type":"Bearer"} {}`,
		`access_token=a&token_type=Bearer`,
	} {
		if tok, err := fetch([]byte(body)); err == nil {
			t.Errorf("%s: read as %+v", body, tok)
		}
	}
	for _, tc := range []struct{ body, want string }{
		{`{"access_token":"a","token_type":"mac"}`, "not a Bearer token"},
		{`{"access_token":"a b\r\nX: y","token_type":"Bearer"}`, "is not a token"},
	} {
		tok, err := fetch([]byte(tc.body))
		if err != nil {
			t.Fatalf("%s: %v", tc.body, err)
		}
		if _, err := checkToken(tok, time.Now()); err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "X: y") {
			t.Errorf("%s: %v, want %q", tc.body, err, tc.want)
		}
	}
	tok, err := fetch([]byte(`{"access_token":"good","token_type":"bearer","expires_in":40,"scope":"a b","id_token":"x"}`))
	if err != nil {
		t.Fatal(err)
	}
	ct, err := checkToken(tok, time.Now())
	if err != nil || ct.auth != "Bearer good" || time.Until(ct.until) > 31*time.Second || time.Until(ct.until) < 29*time.Second {
		t.Errorf("token %+v, %v: want Bearer good until 10s before its expiry", ct, err)
	}
}

// FuzzTokenResponse: whatever an authorization server answers, a token
// the gateway takes is the token the strict reading saw, fits in a header
// and is a Bearer token.
func FuzzTokenResponse(f *testing.F) {
	f.Add([]byte(`{"access_token":"a","token_type":"Bearer","expires_in":60}`))
	f.Add([]byte(`{"access_token":"a","token_type":"Bearer","Access_token":"b"}`))
	f.Add([]byte(`{"access_token":"\u0061","token_type":"BEARER","refresh_token":"r"}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		strict, serr := readTokenResponse(body)
		tok, err := fetch(body)
		if err != nil {
			return
		}
		if serr != nil {
			t.Fatalf("taken although the strict reading refused it: %v", serr)
		}
		if tok.AccessToken != strict.AccessToken || tok.TokenType != strict.TokenType || tok.RefreshToken != strict.RefreshToken {
			t.Fatalf("oauth2 read %q/%q, the strict reading %q/%q", tok.AccessToken, tok.TokenType, strict.AccessToken, strict.TokenType)
		}
		if ct, err := checkToken(tok, time.Now()); err == nil && (!visibleASCII(ct.auth[len("Bearer "):]) || !strings.EqualFold(tok.TokenType, "bearer")) {
			t.Fatalf("took %q", ct.auth)
		}
	})
}

// TestTokenFailureKeepsSecrets: a token endpoint that refuses the gateway
// (and echoes what it was sent) fails the agent's initialize with a
// message naming the status, and neither that answer nor the client
// secret reaches the agent or the log; the server is never called.
func TestTokenFailureKeepsSecrets(t *testing.T) {
	var upCalls atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { upCalls.Add(1) }))
	t.Cleanup(up.Close)
	as := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		_, secret, _ := r.BasicAuth()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusUnauthorized)
		fmt.Fprintf(w, `{"error":"invalid_client","error_description":"wrong secret %s%s"}`, secret, r.PostForm.Get("client_secret"))
	}))
	t.Cleanup(as.Close)
	agent := &roster.Agent{ID: "a1", MaxRequestSize: 1 << 20, MCPTools: map[string][]string{"files": {"*"}}}
	cfg := &config.Config{Agents: map[string]*roster.Agent{"a1": agent}}
	cfg.Gateway.MCP.Servers = []config.MCPServer{{Name: "files", URL: up.URL, Timeout: config.Duration(5e9),
		OAuth: &mcpconf.OAuth{ClientCredentials: &mcpconf.ClientCredentials{TokenURL: as.URL, ClientID: "gw", ClientSecret: "cc-s3cret"}}}}
	logs := &testkit.LogBuffer{}
	d, err := New(Deps{Config: cfg, Policy: fakePolicy{policy.MCPDecision{Decision: policy.MCPAllow}}, Limiter: limit.NewMemory(), Log: slog.New(slog.NewTextHandler(logs, nil)),
		OAuthClient: egress.Policy{Allowed: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8")}}.Client(0)})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = scope.Attach(r, &scope.Exchange{RequestID: "req-1", Agent: agent})
		r.SetPathValue("server", "files")
		d.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/mcp/files", strings.NewReader(`{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(res.Body)
	_ = res.Body.Close()
	if !strings.Contains(string(body), `could not be authorized: the token endpoint answered HTTP 401 (invalid_client)`) {
		t.Errorf("answer %s", body)
	}
	for what, text := range map[string]string{"answer": string(body), "log": logs.String()} {
		if strings.Contains(text, "s3cret") || strings.Contains(text, "wrong secret") {
			t.Errorf("the %s holds the secret or the endpoint's answer:\n%s", what, text)
		}
	}
	if !strings.Contains(logs.String(), "could not be authorized") {
		t.Errorf("the log does not say why:\n%s", logs.String())
	}
	if upCalls.Load() != 0 {
		t.Errorf("the server was called %d times without a token", upCalls.Load())
	}
}
