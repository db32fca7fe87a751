package app

import (
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/testredis"
)

// TestLimitsExactAcrossReplicas: N gateways on one Redis admit exactly an
// agent's limit of a burst spread over all of them, on one node, a
// Sentinel-managed primary and a 3-master Cluster. The CI run is 4
// replicas on a Cluster; GATEWAY_REDIS_SCALE=1 runs 2, 4 and 8 replicas on
// each (the figures of docs/deploy.md).
func TestLimitsExactAcrossReplicas(t *testing.T) {
	topologies := []string{"cluster"}
	sizes := []int{4}
	if os.Getenv("GATEWAY_REDIS_SCALE") == "1" {
		topologies, sizes = []string{"single", "sentinel", "cluster"}, []int{2, 4, 8}
	}
	for _, topo := range topologies {
		t.Run(topo, func(t *testing.T) {
			var target string
			switch topo {
			case "single":
				target = testredis.Start(t).URL()
			case "sentinel":
				target = sentinelYAML(testredis.StartSentinel(t))
			case "cluster":
				target = clusterYAML(testredis.StartCluster(t))
			}
			peer := newPeer(t)
			var gs []*a2a
			for _, n := range sizes {
				for len(gs) < n {
					gs = append(gs, newStateGateway(t, target, "closed", topo+"-"+strconv.Itoa(len(gs)), peer))
				}
				t.Run(strconv.Itoa(n), func(t *testing.T) { burst(t, gs, "exact-"+strconv.Itoa(n)) })
			}
		})
	}
}

// burst sends 60 chats as agent (limit 10 an hour), 12 at a time, spread
// over gs in turn, and wants exactly 10 admitted.
func burst(t *testing.T, gs []*a2a, agent string) {
	const total, limit = 60, 10
	var ok, limited, other atomic.Int32
	var wg sync.WaitGroup
	sem := make(chan struct{}, 12)
	from := time.Now()
	for i := range total {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			switch st, _ := chat(t.Context(), gs[i%len(gs)].srv.URL, agent); st {
			case http.StatusOK:
				ok.Add(1)
			case http.StatusTooManyRequests:
				limited.Add(1)
			default:
				other.Add(1)
			}
		})
	}
	wg.Wait()
	t.Logf("FIGURES exactness, %s over %d replicas: %d of %d admitted against %d/hour, %d limited, %d other, in %s",
		t.Name(), len(gs), ok.Load(), total, limit, limited.Load(), other.Load(), time.Since(from).Round(time.Millisecond))
	if ok.Load() != limit || limited.Load() != total-limit {
		t.Errorf("%d replicas admitted %d (limited %d, other %d) of %d against %d/hour", len(gs), ok.Load(), limited.Load(), other.Load(), total, limit)
	}
}
