package server_test

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/testredis"
)

// Concurrent requests used to reserve only their prompt estimate: 14 of
// them spent 14,280 tokens of a 2,000/hour budget. The reservation now
// covers the completion bound too, so together they never spend more than
// the budget plus one request's reservation, in memory and with Redis.
func TestSecurityConcurrentRequestsDoNotOverspendTokenBudget(t *testing.T) {
	for _, backend := range []string{"memory", "redis"} {
		t.Run(backend, func(t *testing.T) {
			var spent atomic.Int64
			_, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
				time.Sleep(50 * time.Millisecond) // all requests are in flight together
				// The provider spends everything max_tokens allows.
				spent.Add(40 + 10)
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"id":"c","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"finish_reason":"length","message":{"role":"assistant","content":"x"}}],"usage":{"prompt_tokens":10,"completion_tokens":40,"total_tokens":50}}`))
			})
			o := stackOpts{upstreamURL: us.URL + "/v1", discardLogs: true}
			if backend == "redis" {
				o.redisURL = testredis.Start(t).URL()
			}
			st := newStack(t, o)
			const n = 14
			var wg sync.WaitGroup
			var ok atomic.Int64
			for range n {
				wg.Go(func() {
					resp := st.post("/v1/chat/completions", "tok-budget", `{"model":"gpt-4o-mini","max_tokens":40,"messages":[{"role":"user","content":"hi"}]}`)
					resp.Body.Close()
					if resp.StatusCode == http.StatusOK {
						ok.Add(1)
					}
				})
			}
			wg.Wait()
			// The budget agent has 100 tokens an hour; one request reserves
			// its prompt estimate (~8) plus max_tokens (40).
			if got := spent.Load(); got > 100+48 || ok.Load() == 0 {
				t.Fatalf("%d requests served spending %d tokens of a 100/hour budget", ok.Load(), got)
			}
		})
	}
}
