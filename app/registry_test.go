package app

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/config"
)

// TestRegistrySemanticQuery: with registry.embeddings set, a free-text
// query is ranked by embeddings that the gateway computes through its own
// governed /v1/embeddings route: the query as the querying agent, every
// candidate's profile as the gateway itself ("gateway:registry", under its
// own limits, on the trail by that name), so a candidate not allowed the
// embeddings model (planner_1 here) does not turn the query lexical;
// without it, the same query is ranked lexically and says so.
func TestRegistrySemanticQuery(t *testing.T) {
	cases := []struct {
		name, extra, ranking string
	}{
		{"embeddings", "  embeddings:\n    upstream: mock\n    model: mock-embed\n", "semantic"},
		{"no embeddings model", "", "lexical"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := newA2A(t, a2aOpts{registryExtra: c.extra})
			status, body, _ := g.do(http.MethodPost, "/registry/query", "tok-outsider", `{"query": {"text": "plan the workflow and predict prices"}, "top_k": 3}`)
			if status != http.StatusOK {
				t.Fatalf("query: %d %s", status, body)
			}
			var ans struct {
				Ranking string `json:"ranking"`
				Data    []struct {
					AgentName string `json:"agent_name"`
					Method    string `json:"method"`
				} `json:"data"`
			}
			if err := json.Unmarshal(body, &ans); err != nil {
				t.Fatal(err)
			}
			if ans.Ranking != c.ranking || len(ans.Data) == 0 || ans.Data[0].AgentName != "planner_1" {
				t.Fatalf("ranking %q, hits %+v: want planner_1 first, %s: %s", ans.Ranking, ans.Data, c.ranking, body)
			}
			if c.ranking != "semantic" {
				return
			}
			by := map[string]int{}
			for _, e := range g.entries(audit.KindLLMResponse) {
				if summaryOf(e)["model"] == "mock-embed" {
					by[e.AgentID]++
				}
			}
			if by["gateway:registry"] == 0 || by["outsider"] == 0 || len(by) != 2 {
				t.Errorf("embeddings calls by %v: want the profiles as gateway:registry and the query as outsider, all on the audit trail", by)
			}
		})
	}
}

// TestShippedConfigQueriesSemantically: the shipped configuration with
// registry.embeddings switched on ranks a free-text query semantically,
// although most shipped agents are not allowed the embeddings model: their
// profiles are embedded by the gateway itself.
func TestShippedConfigQueriesSemantically(t *testing.T) {
	root := t.TempDir()
	dir := filepath.Join(root, "config") // its policy.dir is ../rego
	if err := os.CopyFS(dir, os.DirFS("../config")); err != nil {
		t.Fatal(err)
	}
	if err := os.CopyFS(filepath.Join(root, "rego"), os.DirFS("../rego")); err != nil {
		t.Fatal(err)
	}
	reg, err := os.ReadFile(filepath.Join(dir, config.RegistryFile))
	if err != nil {
		t.Fatal(err)
	}
	_, a, auditLog := buildFromFiles(t, dir, map[string]string{
		config.RegistryFile: string(reg) + "  embeddings:\n    upstream: mock\n    model: mock-embed\n",
	})
	srv := httptest.NewServer(a.Handler())
	t.Cleanup(func() {
		srv.Close()
		a.Close()
		_ = auditLog.Close()
	})
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/registry/query", strings.NewReader(`{"query": {"text": "check that an email address is valid"}, "top_k": 3}`))
	req.Header.Set("Authorization", "Bearer gw-demo-claude-3")
	req.Header.Set("Content-Type", "application/json")
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var ans struct {
		Ranking string `json:"ranking"`
	}
	body, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || json.Unmarshal(body, &ans) != nil || ans.Ranking != "semantic" {
		t.Fatalf("%d %s: want a semantic ranking", res.StatusCode, body)
	}
}
