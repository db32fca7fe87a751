package proxy_test

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/team"
	"github.com/sacpgw/gateway/internal/testredis"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/proxy"
)

// A team's budget is shared by its agents on every replica: N concurrent
// calls from four agents of one team (none with a budget of its own),
// spread over two replicas sharing one Redis, against a team budget that
// covers exactly K of them: exactly K pass, and every refusal names the
// team. Every call is held inside the provider until all have been
// decided, so no settlement makes room for another. The keys pass the
// Cluster's slot rule (testredis.SlotCheck).
func TestTeamBudgetExactOnRedis(t *testing.T) {
	srv := testredis.Start(t)
	const n, k = 60, 7
	ds := &team.Team{Name: "data-science", Budget: config.Money{MicroUSD: k * 40_000, Period: day}}
	replicas := make([]*proxy.Limits, 2)
	for i := range replicas {
		c, err := limit.NewRedisClient(srv.URL(), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.AddHook(testredis.SlotCheck(t))
		t.Cleanup(func() { _ = c.Close() })
		replicas[i] = &proxy.Limits{Requests: limit.NewMemory(), Tokens: limit.NewRedisBudget(c, limit.WithKeyPrefix("t:"+t.Name()+":")), Prices: testPrices}
	}
	agents := []*roster.Agent{}
	for _, id := range []string{"a1", "a2", "a3", "a4"} {
		agents = append(agents, &roster.Agent{ID: id, Team: ds.Name, CompletionEstimate: 500})
	}
	var decided sync.WaitGroup
	decided.Add(n)
	var allowed, refused atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			once := sync.OnceFunc(decided.Done)
			c := stageCall{model: "test-model", estimate: 1000, maxTokens: 1000, attempts: 1, status: 200, team: ds,
				usage: usage(1000, 0, 1000), // the provider bills exactly the reservation
				hold:  func() { once(); decided.Wait() }}
			w, _ := serveStage(ctx, replicas[i%2], agents[i%len(agents)], c)
			once()
			switch w.Code {
			case http.StatusOK:
				allowed.Add(1)
			case http.StatusTooManyRequests:
				e := decodeError(t, w)
				if e.Error.Code != "budget_exceeded" || !strings.Contains(e.Error.Message, "team data-science") || w.Header().Get("X-Ratelimit-Remaining-Usd") == "" {
					t.Errorf("429 %+v %v", e.Error, w.Header())
				}
				refused.Add(1)
			default:
				t.Errorf("status %d: %s", w.Code, w.Body)
			}
		})
	}
	wg.Wait()
	if allowed.Load() != k || refused.Load() != n-k {
		t.Fatalf("allowed %d, refused %d; want exactly %d and %d", allowed.Load(), refused.Load(), k, n-k)
	}
}

// A team's token_limit refuses what the agent's own would allow, names
// the team, and gives back the agent's reservation made before it.
func TestTeamTokenLimitOnTopOfAgents(t *testing.T) {
	b := limit.NewMemoryBudget()
	l := &proxy.Limits{Requests: limit.NewMemory(), Tokens: b, Prices: testPrices}
	a := &roster.Agent{ID: "a1", Team: "ds", TokenLimit: config.Rate{N: 100_000, Period: time.Hour}}
	ds := &team.Team{Name: "ds", TokenLimit: config.Rate{N: 3000, Period: time.Hour}}
	c := stageCall{model: "test-model", estimate: 1000, maxTokens: 1000, attempts: 1, status: 200, team: ds, usage: usage(1000, 0, 1000)}
	if w, _ := serveStage(t.Context(), l, a, c); w.Code != http.StatusOK {
		t.Fatalf("first call: %d %s", w.Code, w.Body)
	}
	w, _ := serveStage(t.Context(), l, a, c)
	if w.Code != http.StatusTooManyRequests {
		t.Fatalf("second call: %d %s, want the team's 429", w.Code, w.Body)
	}
	if e := decodeError(t, w); !strings.Contains(e.Error.Message, "team ds: 3000/hour") || w.Header().Get("Retry-After") == "" {
		t.Errorf("refusal %+v %v", e.Error, w.Header())
	}
	// The agent's own bucket got its 2000 tokens back: 98,000 left.
	res, _ := b.Reserve(t.Context(), proxy.TokensKey+"a1", limit.Rule{N: 100_000, Period: time.Hour}, 0)
	if res.Remaining < 97_990 || res.Remaining > 98_000 {
		t.Errorf("agent's tokens remaining %d, want 98000 (the refused call's reservation given back)", res.Remaining)
	}
}
