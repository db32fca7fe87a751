package server_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/testredis"
	"github.com/sacpgw/gateway/limit"
)

// A hung Redis (frozen, not refusing connections) used to stall every
// request about 10 s, and approvals answered 500. With state.timeout every
// call gives up after its deadline; a store that is down is 503
// state_unavailable with Retry-After; and the gateway serves again as soon
// as Redis does.
func TestSecurityHungRedisIsBounded(t *testing.T) {
	rs := testredis.Start(t)
	_, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, completion("ok"))
	})
	st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1", redisURL: rs.URL()})
	chat := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`
	if resp := st.post("/v1/chat/completions", "tok-alpha", chat); resp.StatusCode != http.StatusOK {
		t.Fatalf("before: %d", resp.StatusCode)
	}
	rs.Pause()
	defer rs.Resume()
	for i := range 5 {
		start := time.Now()
		resp := st.post("/v1/chat/completions", "tok-alpha", chat)
		body := readAll(t, resp.Body)
		// The stack runs state.on_failure closed: 503, at once, retryable.
		if resp.StatusCode != http.StatusServiceUnavailable || resp.Header.Get("Retry-After") == "" || !strings.Contains(body, "state_unavailable") {
			t.Fatalf("chat %d with Redis frozen: %d %s", i, resp.StatusCode, body)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("chat %d waited %s for a frozen Redis", i, d)
		}
	}
	start := time.Now()
	status, out := st.agentRequest("tok-alpha", map[string]any{"agent_id": "alpha", "request_type": "QUERY", "action": "read", "target_type": "code"})
	if status != http.StatusServiceUnavailable || time.Since(start) > 2*time.Second {
		t.Fatalf("approval with Redis frozen: %d after %s: %v", status, time.Since(start), out)
	}
	rs.Resume()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp := st.post("/v1/chat/completions", "tok-alpha", chat)
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %d after Redis came back", resp.StatusCode)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// With on_failure local, a frozen Redis costs the first decision its
// deadline and the rest nothing: they go to the local limiter at once, and
// no request pays the probe that brings Redis back.
func TestSecurityHungRedisFallsBackLocallyAtOnce(t *testing.T) {
	rs := testredis.Start(t)
	client, err := limit.NewRedisClient(rs.URL(), 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	f := &limit.Fallback{Primary: limit.NewRedis(client), Local: limit.NewMemory(), OnFailure: limit.OnFailureLocal, RetryInterval: 100 * time.Millisecond}
	rule := limit.Rule{N: 1000, Period: time.Minute}
	if _, err := f.Allow(context.Background(), "k", rule, 1); err != nil {
		t.Fatal(err)
	}
	rs.Pause()
	var worst time.Duration
	for range 50 {
		start := time.Now()
		if _, err := f.Allow(context.Background(), "k", rule, 1); err != nil {
			t.Fatal(err)
		}
		worst = max(worst, time.Since(start))
		time.Sleep(10 * time.Millisecond) // spans several retry intervals
	}
	if worst > 300*time.Millisecond {
		t.Fatalf("a decision waited %s on a frozen Redis", worst)
	}
	rs.Resume()
	deadline := time.Now().Add(5 * time.Second)
	for f.Fallbacks() > 0 {
		before := f.Fallbacks()
		if _, err := f.Allow(context.Background(), "k", rule, 1); err != nil {
			t.Fatal(err)
		}
		if f.Fallbacks() == before {
			break // decided by Redis again
		}
		if time.Now().After(deadline) {
			t.Fatal("Redis never used again")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
