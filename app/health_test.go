package app

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/testcert"
	"github.com/sacpgw/gateway/internal/testkit"
)

// freeAddr returns a loopback address nothing listens on (Serve opens its
// listeners from the config, so a test cannot hand it one).
func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	return addr
}

type served struct {
	main, health string
	stop         context.CancelFunc
	done         chan error
	logs         *testkit.LogBuffer
}

// serveHealthConfig runs Serve (the command's path: main listener,
// health_listen, drain) on a config with gateway.yaml's extra lines.
func serveHealthConfig(t *testing.T, upstreamURL, extra string) *served {
	t.Helper()
	dir := t.TempDir()
	s := &served{main: freeAddr(t), health: freeAddr(t), done: make(chan error, 1), logs: &testkit.LogBuffer{}}
	files := map[string]string{
		config.GatewayFile: "listen: " + s.main + "\nhealth_listen: " + s.health + "\nlog: {level: debug}\n" +
			"upstreams:\n  - {name: up, type: openai, base_url: " + upstreamURL + "/v1, models: ['*']}\n" +
			"audit: {dir: " + filepath.Join(dir, "audit") + "}\nstate: {dir: " + filepath.Join(dir, "state") + "}\n" + extra,
		config.AgentsFile:   "agents:\n  a1:\n    token_sha256: \"" + roster.HashTokenHex("tok") + "\"\n",
		config.ProtocolFile: "protocol: {}\n",
	}
	for name, c := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.stop = cancel
	go func() { s.done <- Serve(ctx, cfg, Options{Version: "test"}, s.logs) }()
	t.Cleanup(func() {
		cancel()
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			t.Error("Serve did not return")
		}
		if t.Failed() {
			t.Logf("gateway log:\n%s", s.logs.String())
		}
	})
	// The health port answers once Serve is up.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if res, err := http.Get("http://" + s.health + "/healthz"); err == nil {
			res.Body.Close()
			return s
		}
		select {
		case err := <-s.done:
			t.Fatalf("Serve returned before listening: %v\n%s", err, s.logs.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("health port %s never answered\n%s", s.health, s.logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func getJSON(t *testing.T, c *http.Client, url string) (int, map[string]any) {
	t.Helper()
	res, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer res.Body.Close()
	var body map[string]any
	b, _ := io.ReadAll(res.Body)
	_ = json.Unmarshal(b, &body)
	return res.StatusCode, body
}

// TestHealthListenUnderMutualTLS: with tls.client_ca_file the main port
// refuses a client without a certificate (the kubelet), while health_listen
// serves /healthz and /readyz (the main server's checks) in plain HTTP, and
// nothing else.
func TestHealthListenUnderMutualTLS(t *testing.T) {
	ca := testcert.NewCA(t)
	dir := t.TempDir()
	put := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	sc, sk := ca.Issue(t, 10, "")
	s := serveHealthConfig(t, "http://127.0.0.1:9", "tls:\n  cert_file: "+put("server.pem", sc)+"\n  key_file: "+put("server.key", sk)+
		"\n  client_ca_file: "+put("ca.pem", ca.PEM)+"\n")

	// The main port: mTLS only.
	noCert := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool()}}}
	if res, err := noCert.Get("https://" + s.main + "/healthz"); err == nil {
		res.Body.Close()
		t.Fatalf("the main port answered a client without a certificate (%s): the test proves nothing", res.Status)
	}
	cc, ck := ca.Issue(t, 11, "spiffe://example.org/agent/probe")
	pair, err := tls.X509KeyPair(cc, ck)
	if err != nil {
		t.Fatal(err)
	}
	withCert := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{pair}}}}
	mainCode, mainReady := getJSON(t, withCert, "https://"+s.main+"/readyz")

	// The health port: plain HTTP, no certificate.
	if code, body := getJSON(t, http.DefaultClient, "http://"+s.health+"/healthz"); code != http.StatusOK || body["status"] != "ok" {
		t.Errorf("health port /healthz: %d %v", code, body)
	}
	code, ready := getJSON(t, http.DefaultClient, "http://"+s.health+"/readyz")
	if code != http.StatusOK || ready["status"] != "ready" {
		t.Errorf("health port /readyz: %d %v", code, ready)
	}
	// The same checks as the main port's readiness, not a copy of some.
	checks, _ := ready["checks"].(map[string]any)
	mainChecks, _ := mainReady["checks"].(map[string]any)
	if code != mainCode || len(checks) == 0 || len(checks) != len(mainChecks) {
		t.Errorf("health port /readyz %d %v, main port /readyz %d %v: want the same checks", code, checks, mainCode, mainChecks)
	}
	for _, name := range []string{"config", "policies", "audit"} {
		if checks[name] != "ok" || mainChecks[name] != "ok" {
			t.Errorf("check %q: health port %v, main port %v", name, checks[name], mainChecks[name])
		}
	}

	// Nothing else: no API, no metrics, no admin or review pages.
	for _, r := range []struct{ method, path string }{
		{http.MethodGet, "/metrics"},
		{http.MethodGet, "/v1/models"},
		{http.MethodPost, "/v1/chat/completions"},
		{http.MethodGet, "/admin/escalations"},
		{http.MethodGet, "/review/ops"},
		{http.MethodGet, "/"},
	} {
		req, _ := http.NewRequest(r.method, "http://"+s.health+r.path, strings.NewReader(`{}`))
		req.Header.Set("Authorization", "Bearer tok")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", r.method, r.path, err)
		}
		res.Body.Close()
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("health port %s %s: %d, want 404", r.method, r.path, res.StatusCode)
		}
	}
	// The main port still serves them (to a client with a certificate).
	if res, err := withCert.Get("https://" + s.main + "/metrics"); err != nil || res.StatusCode != http.StatusOK {
		t.Errorf("main port /metrics: %v %v", err, res)
	} else {
		res.Body.Close()
	}
}

// TestHealthListenOutlivesTheDrain: on shutdown the health port keeps
// answering while requests in flight drain (liveness ok, readiness
// "draining": out of the Service, not restarted), and closes with the main
// server.
func TestHealthListenOutlivesTheDrain(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	up := newSlowUpstream(started, release)
	defer up.Close()
	// Whatever happens, the upstream's handler returns (Close waits for it).
	var once sync.Once
	releaseUpstream := func() { once.Do(func() { close(release) }) }
	defer releaseUpstream()
	s := serveHealthConfig(t, up.URL, "")

	answered := make(chan int, 1)
	go func() {
		req, _ := http.NewRequest(http.MethodPost, "http://"+s.main+"/v1/chat/completions",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}]}`))
		req.Header.Set("Authorization", "Bearer tok")
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			answered <- 0
			return
		}
		res.Body.Close()
		answered <- res.StatusCode
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the request never reached the upstream")
	}
	s.stop()

	// Draining: readiness says so on the health port, liveness holds.
	deadline := time.Now().Add(5 * time.Second)
	for {
		code, body := getJSON(t, http.DefaultClient, "http://"+s.health+"/readyz")
		if code == http.StatusServiceUnavailable && body["status"] == "draining" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("health port /readyz during the drain: %d %v, want 503 draining", code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	if code, _ := getJSON(t, http.DefaultClient, "http://"+s.health+"/healthz"); code != http.StatusOK {
		t.Errorf("health port /healthz during the drain: %d, want 200", code)
	}

	releaseUpstream()
	if code := <-answered; code != http.StatusOK {
		t.Errorf("in-flight request: %d, want 200", code)
	}
	select {
	case err := <-s.done:
		s.done <- err // for the cleanup
		if err != nil {
			t.Fatalf("Serve: %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return after the drain")
	}
	if res, err := http.Get("http://" + s.health + "/healthz"); err == nil {
		res.Body.Close()
		t.Error("the health port still accepts connections after Serve returned")
	}
}

// TestHealthListenBusy: a health_listen that cannot be opened is a startup
// error naming it, and the main port is released.
func TestHealthListenBusy(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := t.TempDir()
	mainAddr := freeAddr(t)
	files := map[string]string{
		config.GatewayFile: "listen: " + mainAddr + "\nhealth_listen: " + busy.Addr().String() + "\n" +
			"upstreams:\n  - {name: mock, type: mock, models: ['*']}\naudit: {dir: " + filepath.Join(dir, "audit") + "}\n" +
			"state: {dir: " + filepath.Join(dir, "state") + "}\n",
		config.AgentsFile:   "agents:\n  a1:\n    token_sha256: \"" + roster.HashTokenHex("tok") + "\"\n",
		config.ProtocolFile: "protocol: {}\n",
	}
	for name, c := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(c), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	err = Serve(context.Background(), cfg, Options{}, io.Discard)
	var ue *UsageError
	if !errors.As(err, &ue) || !strings.Contains(err.Error(), "health_listen "+busy.Addr().String()) {
		t.Fatalf("Serve = %v, want a UsageError naming health_listen", err)
	}
	ln, err := net.Listen("tcp", mainAddr)
	if err != nil {
		t.Fatalf("the main port was not released: %v", err)
	}
	ln.Close()
}

// newSlowUpstream is an OpenAI-compatible upstream that answers once
// release is closed, after signalling started.
func newSlowUpstream(started chan<- struct{}, release <-chan struct{}) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case started <- struct{}{}:
		default:
		}
		<-release
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"id":"x","object":"chat.completion","model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"drained"},"finish_reason":"stop"}]}`)
	}))
}
