package app

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/testredis"
)

const chatBody = `{"model":"mock-1","messages":[{"role":"user","content":"hi"}]}`

// issue creates agent name through the admin API as the admin and issues
// it a key; it returns the key and its id.
func issue(t *testing.T, g *a2a, name string) (key, id string) {
	t.Helper()
	if st, body, _ := g.do(http.MethodPost, "/admin/agents", "tok-admin", `{"name":"`+name+`","type":"coder","rate_limit":"100/minute"}`); st != http.StatusCreated {
		t.Fatalf("create %s: %d %s", name, st, body)
	}
	st, body, h := g.do(http.MethodPost, "/admin/agents/"+name+"/keys", "tok-admin", `{"expires_in":"1h"}`)
	var k struct{ ID, Key string }
	if st != http.StatusCreated || json.Unmarshal(body, &k) != nil || !strings.HasPrefix(k.Key, "gw-key-") || h.Get("Cache-Control") != "no-store" {
		t.Fatalf("issue: %d %s", st, body)
	}
	return k.Key, k.ID
}

// TestAdminAgentsAndKeys: an agent created at run time calls a model with
// an issued key; the key is listed without itself; an agent's key on the
// admin API is 403; the agent and key survive a restart (memory backend:
// the state dir); a revoked key is refused at once; every change is an
// admin.* entry naming the admin, and no entry carries the key.
func TestAdminAgentsAndKeys(t *testing.T) {
	g := newA2A(t, a2aOpts{})
	key, id := issue(t, g, "rt-coder")
	if st, body, _ := g.do(http.MethodPost, "/v1/chat/completions", key, chatBody); st != http.StatusOK {
		t.Fatalf("chat with an issued key: %d %s", st, body)
	}
	for _, tok := range []string{key, "tok-orch_1"} {
		if st, body, _ := g.do(http.MethodGet, "/admin/agents", tok, ""); st != http.StatusForbidden {
			t.Errorf("an agent's key on the admin API: %d %s, want 403", st, body)
		}
	}
	st, body, _ := g.do(http.MethodGet, "/admin/agents/rt-coder/keys", "tok-admin", "")
	if st != http.StatusOK || !strings.Contains(string(body), id) || strings.Contains(string(body), key) || !strings.Contains(string(body), "last_used_at") {
		t.Fatalf("keys list: %d %s", st, body)
	}
	if st, body, _ := g.do(http.MethodPost, "/admin/agents", "tok-admin", `{"name":"orch_1","type":"x"}`); st != http.StatusConflict {
		t.Errorf("a name agents.yaml defines: %d %s, want 409", st, body)
	}
	if st, body, _ := g.do(http.MethodPost, "/admin/agents", "tok-admin", `{"name":"typo","rate_limt":"1/hour"}`); st != http.StatusBadRequest || !strings.Contains(string(body), `did you mean \"rate_limit\"?`) {
		t.Errorf("an unknown field: %d %s, want 400 with a suggestion", st, body)
	}

	g.stop()
	g2 := newA2A(t, a2aOpts{dir: g.dir, peers: g.peers, auditDir: g.auditDir})
	if st, body, _ := g2.do(http.MethodPost, "/v1/chat/completions", key, chatBody); st != http.StatusOK {
		t.Fatalf("after a restart: %d %s", st, body)
	}
	if st, body, _ := g2.do(http.MethodPatch, "/admin/agents/rt-coder", "tok-admin", `{"disabled":true}`); st != http.StatusOK {
		t.Fatalf("disable: %d %s", st, body)
	}
	if st, _, _ := g2.do(http.MethodPost, "/v1/chat/completions", key, chatBody); st != http.StatusUnauthorized {
		t.Errorf("a disabled agent's key: %d, want 401", st)
	}
	g2.do(http.MethodPatch, "/admin/agents/rt-coder", "tok-admin", `{"disabled":false}`)
	if st, body, _ := g2.do(http.MethodDelete, "/admin/agents/rt-coder/keys/"+id, "tok-admin", ""); st != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", st, body)
	}
	if st, _, _ := g2.do(http.MethodPost, "/v1/chat/completions", key, chatBody); st != http.StatusUnauthorized {
		t.Errorf("a revoked key: %d, want 401", st)
	}
	for _, k := range []string{"admin.agent.create", "admin.key.issue", "admin.agent.disable", "admin.agent.enable", "admin.key.revoke"} {
		es := g2.entries(k)
		if len(es) == 0 {
			t.Errorf("no %s entry", k)
		}
		for _, e := range es {
			if !strings.Contains(string(e.Summary), `"by":"admin"`) || e.AgentID != "rt-coder" {
				t.Errorf("%s does not name the admin and the agent: %s %s", k, e.AgentID, e.Summary)
			}
		}
	}
	files, _ := filepath.Glob(filepath.Join(g.auditDir, "*.jsonl"))
	for _, f := range files {
		raw, _ := os.ReadFile(f)
		if strings.Contains(string(raw), key) {
			t.Errorf("%s carries the key", f)
		}
	}
}

// TestRevokedKeyOnBothReplicas: two gateways on one redis-server; a key
// issued on one works on the other, and once revoked on one it is
// refused on both within a second.
func TestRevokedKeyOnBothReplicas(t *testing.T) {
	url := testredis.Start(t).URL()
	g1 := newA2A(t, a2aOpts{redisURL: url, chain: "one"})
	g2 := newA2A(t, a2aOpts{redisURL: url, chain: "two"})
	key, id := issue(t, g1, "rt-shared")
	for _, g := range []*a2a{g1, g2} {
		if st, body, _ := g.do(http.MethodPost, "/v1/chat/completions", key, chatBody); st != http.StatusOK {
			t.Fatalf("%s before the revocation: %d %s", g.srv.URL, st, body)
		}
	}
	if st, body, _ := g1.do(http.MethodDelete, "/admin/agents/rt-shared/keys/"+id, "tok-admin", ""); st != http.StatusNoContent {
		t.Fatalf("revoke: %d %s", st, body)
	}
	revoked := time.Now()
	for _, g := range []*a2a{g2, g1} {
		for {
			st, _, _ := g.do(http.MethodPost, "/v1/chat/completions", key, chatBody)
			if st == http.StatusUnauthorized {
				break
			}
			if time.Since(revoked) > time.Second {
				t.Fatalf("%s still answers %d a second after the revocation", g.srv.URL, st)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestOpenAPIRoutesMounted: every operation /openapi.json documents is
// mounted on the built gateway and reaches the admin door: a reviewer
// (who owns no team) gets the door's 403 on each (a route that is not
// there would be 404 or 405).
func TestOpenAPIRoutesMounted(t *testing.T) {
	g := newA2A(t, a2aOpts{})
	st, body, _ := g.do(http.MethodGet, "/openapi.json", "", "")
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if st != http.StatusOK || json.Unmarshal(body, &doc) != nil || len(doc.Paths) == 0 {
		t.Fatalf("GET /openapi.json: %d", st)
	}
	for path, ops := range doc.Paths {
		concrete := strings.NewReplacer("{name}", "some-agent", "{team}", "some-team", "{id}", "key_1").Replace(path)
		for method := range ops {
			if method == "parameters" {
				continue
			}
			if st, body, _ := g.do(strings.ToUpper(method), concrete, "tok-reviewer", "{}"); st != http.StatusForbidden || !strings.Contains(string(body), "admin API needs") {
				t.Errorf("%s %s as a reviewer: %d %s, want the admin door's 403", strings.ToUpper(method), concrete, st, body)
			}
		}
	}
}
