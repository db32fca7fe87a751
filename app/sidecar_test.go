package app

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// placeholderKey is the key the chart's sidecar example gives the agent's SDKs.
const placeholderKey = "unused-the-sidecar-identifies-the-agent"

// asSidecar serves g's configuration (agents, policies, upstreams) as the
// sidecar of agent, as `gateway serve --sidecar-agent` builds it, on its
// own audit chain.
func asSidecar(t *testing.T, g *a2a, agent string) *a2a {
	t.Helper()
	cfg := *g.cfg
	cfg.Gateway.Audit.Dir = filepath.Join(t.TempDir(), "audit")
	cfg.Gateway.Audit.Chain = "sidecar"
	log := slog.New(slog.DiscardHandler)
	auditLog, err := openAudit(&cfg, log)
	if err != nil {
		t.Fatal(err)
	}
	a, err := Build(&cfg, Options{Sidecar: agent, Log: log, Audit: auditLog})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(a.server.Handler())
	t.Cleanup(func() {
		srv.Close()
		a.Close()
		auditLog.Close()
	})
	return &a2a{t: t, srv: srv, app: a, auditDir: cfg.Gateway.Audit.Dir, cfg: &cfg}
}

// TestSidecarFrontDoorsOneRule: at a sidecar every front door that
// identifies agents serves a placeholder key (in the header its SDK uses)
// as the sidecar's agent, and refuses another agent's token with a 401 in
// the route's error shape and an auth.failure entry.
func TestSidecarFrontDoorsOneRule(t *testing.T) {
	sc := asSidecar(t, newA2A(t, a2aOpts{}), "planner_1")
	chat := `{"model":"mock-1","messages":[{"role":"user","content":"hi"}]}`
	doors := []struct {
		method, path, header, body string
		served                     int    // the status with a placeholder key
		shape                      string // in the 401's body
	}{
		{"POST", "/v1/chat/completions", "Authorization", chat, 200, `"code":"invalid_api_key"`},
		{"POST", "/v1/embeddings", "Authorization", `{"model":"mock-1","input":"hi"}`, 200, `"code":"invalid_api_key"`},
		{"POST", "/v1/responses", "Authorization", `{"model":"mock-1","input":"hi"}`, 200, `"code":"invalid_api_key"`},
		{"POST", "/v1/messages", "X-Api-Key", `{"model":"mock-1","max_tokens":16,"messages":[{"role":"user","content":"hi"}]}`, 200, `"type":"authentication_error"`},
		{"GET", "/v1/models", "Authorization", "", 200, `"code":"invalid_api_key"`},
		{"POST", "/openai/v1/chat/completions", "Api-Key", chat, 200, `"code":"invalid_api_key"`},
		{"GET", "/agent/capabilities", "Authorization", "", 200, `"invalid_api_key"`},
		// planner_1 sent nothing in this workflow: a 404 that names it.
		{"GET", "/relay/messages?workflow_id=w-1", "Authorization", "", 404, `"invalid_api_key"`},
		{"GET", "/workflows", "Authorization", "", 200, `"invalid_api_key"`},
		{"POST", "/registry/query", "Authorization", `{"verb":"PLAN","inputs":["goal"],"output_type":"plan"}`, 200, `"invalid_api_key"`},
		{"GET", "/registry/agents", "Authorization", "", 200, `"invalid_api_key"`},
	}
	for i, d := range doors {
		t.Run(d.method+" "+d.path, func(t *testing.T) {
			// One source address per door: the refusals are each the
			// first of their source, so each is written at once.
			client := fromAddr(doorAddr(i))
			call := func(key string) (int, string) {
				t.Helper()
				req, _ := http.NewRequestWithContext(context.Background(), d.method, sc.srv.URL+d.path, strings.NewReader(d.body))
				req.Header.Set("Content-Type", "application/json")
				if d.header == "Authorization" {
					key = "Bearer " + key
				}
				req.Header.Set(d.header, key)
				resp, err := client.Do(req)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			if status, body := call(placeholderKey); status != d.served {
				t.Errorf("placeholder key: %d %s, want %d", status, body, d.served)
			}
			if status, body := call("tok-planner_1"); status != d.served {
				t.Errorf("the sidecar agent's own token: %d %s, want %d", status, body, d.served)
			}
			status, body := call("tok-orch_1")
			if status != http.StatusUnauthorized || !strings.Contains(body, d.shape) {
				t.Errorf("another agent's token: %d %s, want 401 with %s", status, body, d.shape)
			}
		})
	}
	refused := map[string]bool{} // by source address
	for deadline := time.Now().Add(5 * time.Second); len(refused) < len(doors) && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		for _, e := range sc.entries("auth.failure") {
			var sum struct{ Remote, Reason string }
			if json.Unmarshal(e.Summary, &sum) == nil && strings.Contains(sum.Reason, "another agent's token") {
				refused[sum.Remote] = true
			}
		}
	}
	for i, d := range doors {
		if !refused[doorAddr(i)] {
			t.Errorf("%s %s: no auth.failure entry for another agent's token", d.method, d.path)
		}
	}
	if served := sc.entries("llm.request"); len(served) == 0 || served[0].AgentID != "planner_1" {
		t.Errorf("llm.request entries %v: want planner_1's", served)
	}
}

// doorAddr is the source address of door i's requests.
func doorAddr(i int) string { return "127.0.9." + strconv.Itoa(i+1) }

// TestSidecarMCPPlaceholderKey: an MCP client at a sidecar is the sidecar's
// agent with a placeholder key; with another agent's token it cannot
// connect.
func TestSidecarMCPPlaceholderKey(t *testing.T) {
	sc := asSidecar(t, newMCPGateway(t, newToolServer(t)), "coder")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := connect(ctx, sc, "files", placeholderKey)
	if err != nil {
		t.Fatalf("connect with a placeholder key: %v", err)
	}
	defer cs.Close()
	tools, err := cs.ListTools(ctx, nil)
	if err != nil || len(tools.Tools) == 0 {
		t.Fatalf("coder's tools: %v %v", tools, err)
	}
	if cs, err := connect(ctx, sc, "files", "tok-intern"); err == nil {
		cs.Close()
		t.Fatal("connected with another agent's token")
	}
	if len(sc.entries("auth.failure")) == 0 {
		t.Error("no auth.failure entry for another agent's token")
	}
}
