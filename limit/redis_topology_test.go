package limit

import (
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/redisx"
	"github.com/sacpgw/gateway/internal/testredis"
)

// TestBudgetExactAcrossReplicasAndTopologies: a token budget shared by 2, 4
// and 8 replicas (each its own client and connection pool, as separate
// gateway processes have) on one node, a Sentinel-managed primary and a
// 3-master Cluster grants exactly what it holds: 300 racing reservations
// of 7 tokens against 500 a day get 71, and after each is settled at
// what it really spent (5 tokens) the refunds are granted again, exactly.
func TestBudgetExactAcrossReplicasAndTopologies(t *testing.T) {
	topologies := map[string]func(t *testing.T) redisx.Settings{
		"single": func(t *testing.T) redisx.Settings { return redisx.Settings{URL: testredis.Start(t).URL()} },
		"sentinel": func(t *testing.T) redisx.Settings {
			s := testredis.StartSentinel(t)
			return redisx.Settings{Sentinel: &redisx.Sentinel{Master: testredis.MasterName, Addrs: s.SentinelAddrs()}}
		},
		"cluster": func(t *testing.T) redisx.Settings {
			return redisx.Settings{Cluster: &redisx.Cluster{Addrs: testredis.StartCluster(t).Addrs()}}
		},
	}
	for _, topo := range []string{"single", "sentinel", "cluster"} {
		t.Run(topo, func(t *testing.T) {
			settings := topologies[topo](t)
			for _, n := range []int{2, 4, 8} {
				t.Run(strconv.Itoa(n), func(t *testing.T) {
					replicas := make([]*RedisBudget, n)
					for i := range replicas {
						c, err := NewStateClient(settings, 2*time.Second)
						if err != nil {
							t.Fatal(err)
						}
						t.Cleanup(func() { _ = c.Close() })
						replicas[i] = NewRedisBudget(c)
					}
					rule := Rule{N: 500, Period: 24 * time.Hour} // a day: no refill to speak of while the test runs
					key := "agent:{budget-" + topo + "-" + strconv.Itoa(n) + "}"
					granted := race(t, replicas, key, rule, 300, 7)
					if granted != 71 {
						t.Fatalf("%d replicas granted %d reservations of 7 against 500, want exactly 71", n, granted)
					}
					// Each spent 5 of its 7: 71*2 = 142 tokens come back,
					// which is 20 more reservations of 7 (140), exactly.
					for i := range granted {
						if err := replicas[i%n].Settle(t.Context(), key, rule, 7, 5); err != nil {
							t.Fatal(err)
						}
					}
					if again := race(t, replicas, key, rule, 100, 7); again != 20 {
						t.Fatalf("after the refunds %d replicas granted %d more, want exactly 20", n, again)
					}
				})
			}
		})
	}
}

// race makes total reservations of n tokens, spread over replicas, all at
// once, and returns how many were granted.
func race(t *testing.T, replicas []*RedisBudget, key string, rule Rule, total, n int) int {
	var granted atomic.Int64
	var wg sync.WaitGroup
	for i := range total {
		b := replicas[i%len(replicas)]
		wg.Go(func() {
			res, err := b.Reserve(t.Context(), key, rule, n)
			if err != nil {
				t.Error(err)
				return
			}
			if res.Allowed {
				granted.Add(1)
			}
		})
	}
	wg.Wait()
	return int(granted.Load())
}
