package app

import (
	"context"
	"encoding/json"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
)

// newMCPReplica is one replica of the gateway (Build, as the command
// builds it) in front of ts, with state.backend redis on redisURL and
// audit chain chain: servers "files" and agents coder and intern as
// newMCPGateway's.
func newMCPReplica(t *testing.T, ts *toolServer, redisURL, chain string) *a2a {
	t.Helper()
	dir := t.TempDir()
	auditDir := filepath.Join(dir, "audit")
	gw := agentGatewayYAML(auditDir, chain) + `  fail_mode: closed
state:
  backend: redis
` + redisYAML(redisURL) + `  timeout: 1s
mcp:
  servers:
    - name: files
      url: ` + ts.srv.URL + `/mcp
      headers:
        Authorization: "Bearer up-secret"
`
	agents := "agents:\n"
	for id, tools := range map[string]string{"coder": `{files: ["read_*", "write_*", delete_file]}`, "intern": `{files: ["read_*"]}`} {
		agents += "  " + id + ":\n    type: coder\n    token_sha256: \"" + roster.HashTokenHex("tok-"+id) + "\"\n    mcp_tools: " + tools + "\n"
	}
	return serveApp(t, dir, auditDir, map[string]string{
		config.GatewayFile:  gw,
		config.AgentsFile:   agents,
		config.ProtocolFile: "protocol: {}\n",
	})
}

// balancer is a load balancer in front of replicas without sticky
// sessions: every request goes to the replica it is set to at the time.
type balancer struct {
	mu sync.Mutex
	to *url.URL
}

func (b *balancer) route(g *a2a) {
	u, _ := url.Parse(g.srv.URL)
	b.mu.Lock()
	b.to = u
	b.mu.Unlock()
}

func (b *balancer) RoundTrip(r *http.Request) (*http.Response, error) {
	b.mu.Lock()
	to := b.to
	b.mu.Unlock()
	r = r.Clone(r.Context())
	r.URL.Scheme, r.URL.Host, r.Host = to.Scheme, to.Host, ""
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCPTwoReplicasShareRedis: two gateways on one Redis are one MCP
// gateway to an agent (the official SDK client, through a balancer that
// is not sticky): a session initialized through A goes on through B, and
// stays its agent's; an escalation opened through A and approved through
// B's admin API lets the call through once, through whichever replica
// the agent reaches, and never a second time through the other.
func TestMCPTwoReplicasShareRedis(t *testing.T) { forEachRedis(t, testMCPTwoReplicas) }

func testMCPTwoReplicas(t *testing.T, target string) {
	ts := newToolServer(t)
	a := newMCPReplica(t, ts, target, "replica-a")
	b := newMCPReplica(t, ts, target, "replica-b")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lb := &balancer{}
	lb.route(a)
	client := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "1"}, nil)
	cs, err := client.Connect(ctx, &sdk.StreamableClientTransport{Endpoint: "http://balancer/mcp/files",
		HTTPClient: &http.Client{Transport: bearer{"tok-coder", lb}}}, nil)
	if err != nil {
		t.Fatalf("connect through A: %v", err)
	}
	t.Cleanup(func() { _ = cs.Close() })
	session := cs.ID()

	// raw is one request of agent's in the session, to replica g.
	raw := func(g *a2a, method, token, body string) int {
		t.Helper()
		req, _ := http.NewRequest(method, g.srv.URL+"/mcp/files", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+token)
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.Header.Set("Mcp-Session-Id", session)
		req.Header.Set("Mcp-Protocol-Version", "2025-06-18")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	t.Run("a session initialized through A goes on through B", func(t *testing.T) {
		lb.route(b)
		res, err := cs.ListTools(ctx, nil)
		if err != nil || len(res.Tools) == 0 {
			t.Fatalf("tools/list through B: %v %v", res, err)
		}
		if st := raw(b, http.MethodPost, "tok-intern", `{"jsonrpc":"2.0","id":1,"method":"ping"}`); st != http.StatusNotFound {
			t.Errorf("another agent with coder's session through B: %d", st)
		}
	})

	// escalated opens a review of delete_file(path) through g.
	escalated := func(g *a2a, path string) string {
		t.Helper()
		lb.route(g)
		_, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "delete_file", Arguments: map[string]any{"path": path}})
		e := rpcError(t, err)
		var data struct {
			ID string `json:"escalation_id"`
		}
		if e.Code != -32061 || json.Unmarshal(e.Data, &data) != nil || data.ID == "" {
			t.Fatalf("delete_file %s: error %d %q %s", path, e.Code, e.Message, e.Data)
		}
		return data.ID
	}
	approve := func(g *a2a, id string) {
		t.Helper()
		if status, body, _ := g.do(http.MethodPost, "/admin/escalations/"+id+"/decision", "tok-admin", `{"decision":"approve","reviewer":"ops","comment":"ok"}`); status != http.StatusOK {
			t.Fatalf("approve %s: %d %s", id, status, body)
		}
	}
	deleted := func(g *a2a, path string) {
		t.Helper()
		lb.route(g)
		res, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "delete_file", Arguments: map[string]any{"path": path}})
		if err != nil || toolText(res) != "deleted "+path {
			t.Fatalf("the approved call of delete_file %s: %v %v", path, res, err)
		}
	}

	for _, tc := range []struct {
		note      string
		path      string
		call, not *a2a
	}{
		// B heard the decision and takes the grant: A must not find it.
		{"opened through A, approved through B, called through B", "b.txt", b, a},
		// A never heard the decision: only the shared grant lets it pass.
		{"opened through A, approved through B, called through A", "a.txt", a, b},
	} {
		t.Run(tc.note, func(t *testing.T) {
			before := len(ts.calls("delete_file"))
			id := escalated(a, tc.path)
			approve(b, id)
			deleted(tc.call, tc.path)
			if again := escalated(tc.not, tc.path); again == id {
				t.Errorf("the approval %s was reused", id)
			}
			if n := len(ts.calls("delete_file")) - before; n != 1 {
				t.Errorf("the server deleted %s %d times, want once", tc.path, n)
			}
		})
	}

	t.Run("a session ended through B is ended on A", func(t *testing.T) {
		if st := raw(b, http.MethodDelete, "tok-coder", ""); st != http.StatusNoContent {
			t.Fatalf("DELETE through B: %d", st)
		}
		if st := raw(a, http.MethodPost, "tok-coder", `{"jsonrpc":"2.0","id":1,"method":"ping"}`); st != http.StatusNotFound {
			t.Errorf("the ended session through A: %d", st)
		}
	})
}
