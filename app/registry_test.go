package app

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/sacpgw/gateway/audit"
)

// TestRegistrySemanticQuery: with registry.embeddings set, a free-text
// query is ranked by embeddings that the gateway computes through its own
// governed /v1/embeddings route (as the querying and the described agents:
// audited like their own calls); without it, the same query is ranked
// lexically and says so.
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
			embeds := 0
			for _, e := range g.entries(audit.KindLLMResponse) {
				if summaryOf(e)["model"] == "mock-embed" {
					embeds++
				}
			}
			if embeds == 0 {
				t.Error("the embeddings calls must be governed calls, on the audit trail")
			}
		})
	}
}
