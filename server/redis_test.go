package server_test

import (
	"net/http"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sacpgw/gateway/internal/testredis"
)

// Two gateway replicas sharing one Redis admit exactly the configured number
// of requests under concurrent load, and a replica that restarts keeps the
// limit and sees the approval states.
func TestReplicasShareLimitsAndApprovals(t *testing.T) {
	rs := testredis.Start(t)
	a := newStack(t, stackOpts{redisURL: rs.URL()})
	b := newStack(t, stackOpts{redisURL: rs.URL()})
	body := `{"model":"mock-1","messages":[{"role":"user","content":"x"}]}`
	var ok, limited atomic.Int32
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			st := a
			if i%2 == 1 {
				st = b
			}
			req, _ := http.NewRequest(http.MethodPost, st.srv.URL+"/v1/chat/completions", stringsReader(body))
			req.Header.Set("Authorization", "Bearer tok-limited")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			switch resp.StatusCode {
			case http.StatusOK:
				ok.Add(1)
			case http.StatusTooManyRequests:
				limited.Add(1)
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 2 || limited.Load() != 18 {
		t.Fatalf("two replicas admitted %d (limited %d) of 20 against 2/minute", ok.Load(), limited.Load())
	}
	// An approval decided on replica a is visible on b, and after a "restart".
	code, resp := a.agentRequest("tok-alpha", designRequest())
	if code != 200 || resp["status"] != "approved" {
		t.Fatalf("approval: %d %v", code, resp)
	}
	id := resp["request_id"].(string)
	c := newStack(t, stackOpts{redisURL: rs.URL()})
	for _, st := range []*stack{b, c} {
		if code, status := st.get("/agent/status/"+id, "tok-alpha"); code != 200 || status["state"] != "APPROVED" {
			t.Errorf("other replica: %d %v", code, status)
		}
	}
	if r := c.post("/v1/chat/completions", "tok-limited", body); r.StatusCode != http.StatusTooManyRequests {
		t.Errorf("restarted replica forgot the limit: %d", r.StatusCode)
	}
	// Redis down with on_failure closed: 503, and the process keeps serving health.
	rs.Stop()
	if r := a.post("/v1/chat/completions", "tok-alpha", body); r.StatusCode != http.StatusServiceUnavailable {
		t.Errorf("redis down, closed mode: %d", r.StatusCode)
	}
}
