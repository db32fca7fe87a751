package app

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/roster"

	"github.com/redis/go-redis/v9"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/testkit"
	"github.com/sacpgw/gateway/internal/testredis"
)

// failoverBound is how long a Sentinel failover may keep requests from
// Redis in these tests: down-after (500ms) for the Sentinels to agree,
// the election and promotion, and the client's next dial to the new
// primary. docs/deploy.md gives the bound for production timings.
const failoverBound = 10 * time.Second

// newStateGateway is a gateway on the Redis of target (redisYAML) with
// on_failure onFailure: agents loader (a limit too high to reach, so each
// chat costs a Redis round trip), metered (the same and a token limit),
// exact (10 requests an hour), alpha
// (approvals) and orch and planner (a relay message from orch to planner,
// whose endpoint is peer).
func newStateGateway(t *testing.T, target, onFailure, chain string, peer *testkit.Peer) *a2a {
	t.Helper()
	dir := t.TempDir()
	auditDir := filepath.Join(dir, "audit")
	gw := agentGatewayYAML(auditDir, chain) + `  fail_mode: closed
messaging:
  retry_backoff: 10ms
  timeout: 30s
  workers: 2
  allowed_networks: [127.0.0.0/8]
state:
  backend: redis
` + redisYAML(target) + `  on_failure: ` + onFailure + `
  timeout: 300ms
`
	agents := `agents:
  loader:
    type: coder
    rate_limit: 1000000/hour
    token_sha256: "` + roster.HashTokenHex("tok-loader") + `"
  exact:
    type: coder
    rate_limit: 10/hour
    token_sha256: "` + roster.HashTokenHex("tok-exact") + `"
  exact-2: {type: coder, rate_limit: 10/hour, token_sha256: "` + roster.HashTokenHex("tok-exact-2") + `"}
  exact-4: {type: coder, rate_limit: 10/hour, token_sha256: "` + roster.HashTokenHex("tok-exact-4") + `"}
  exact-8: {type: coder, rate_limit: 10/hour, token_sha256: "` + roster.HashTokenHex("tok-exact-8") + `"}
  metered:
    type: coder
    rate_limit: 1000000/hour
    token_limit: 1000000000/hour
    token_sha256: "` + roster.HashTokenHex("tok-metered") + `"
  alpha:
    type: code-generator
    capabilities: [read, write]
    allowed_targets: [architecture, design, code]
    token_sha256: "` + roster.HashTokenHex("tok-alpha") + `"
  orch:
    type: orchestrator
    token_sha256: "` + roster.HashTokenHex("tok-orch") + `"
    messages:
      - to: ["*"]
        actions: ["*"]
  planner:
    type: planner
    endpoint: "` + peer.Srv.URL + `/messages"
    token_sha256: "` + roster.HashTokenHex("tok-planner") + `"
`
	return serveApp(t, dir, auditDir, map[string]string{
		config.GatewayFile:  gw,
		config.AgentsFile:   agents,
		config.ProtocolFile: "protocol:\n  limits:\n    max_retry_attempts: 3\n",
	})
}

// chat sends one chat completion as agent and returns the status and the
// Retry-After header; transport errors are status 0.
func chat(ctx context.Context, base, agent string) (int, string) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, base+"/v1/chat/completions",
		strings.NewReader(`{"model":"mock-1","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer tok-"+agent)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, resp.Header.Get("Retry-After")
}

// outcome is one request of the load.
type outcome struct {
	at     time.Time
	status int
	retry  string
}

// load sends chats as agent from workers goroutines until ctx ends.
func load(ctx context.Context, base, agent string, workers int) <-chan []outcome {
	out := make(chan []outcome, 1)
	var mu sync.Mutex
	var all []outcome
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for ctx.Err() == nil {
				st, ra := chat(context.Background(), base, agent)
				mu.Lock()
				all = append(all, outcome{time.Now(), st, ra})
				mu.Unlock()
				time.Sleep(5 * time.Millisecond)
			}
		})
	}
	go func() { wg.Wait(); out <- all }()
	return out
}

// TestSentinelFailoverUnderLoad: the gateway on a primary watched by three
// Sentinels; the primary is killed (SIGKILL) while chats flow. Requests
// in the window get the on_failure behaviour (closed: 503 with
// Retry-After; local: served on local limits), nothing acknowledged before
// is lost (an approval decided, a message queued and not yet delivered, a
// limit's spent requests) and limits are exact again after.
func TestSentinelFailoverUnderLoad(t *testing.T) {
	for _, onFailure := range []string{"closed", "local"} {
		t.Run(onFailure, func(t *testing.T) { testSentinelFailover(t, onFailure) })
	}
}

func testSentinelFailover(t *testing.T, onFailure string) {
	set := testredis.StartSentinel(t)
	peer := newPeer(t)
	release := make(chan struct{})
	peer.Set(func(w http.ResponseWriter, r *http.Request, body []byte) {
		<-release // the message stays queued (read, not acknowledged) across the failover
		w.WriteHeader(http.StatusAccepted)
	})
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	g := newStateGateway(t, sentinelYAML(set), onFailure, "fo-"+onFailure, peer)

	// Acknowledged before the failover: an approval, a queued message, and
	// 4 of exact's 10 requests.
	code, body, _ := g.do(http.MethodPost, "/agent/request", "tok-alpha", mustJSON(t, map[string]any{
		"agent_id": "alpha", "session_id": "s-1", "request_type": "APPROVAL", "action": "create",
		"target_type": "design", "target_path": "docs/design/x.md", "content": "# X", "rationale": "Implementing user story US-123",
		"references": []string{}, "deviations": []any{}}))
	var decided map[string]any
	_ = json.Unmarshal(body, &decided)
	if code != http.StatusOK || decided["status"] != "approved" {
		t.Fatalf("approval: %d %s", code, body)
	}
	if st, resp := g.send("orch", `{"message_id":"fo-1","message_type":"notification","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_fo","action":"task_assign","payload":{}}`); st != http.StatusAccepted {
		t.Fatalf("message: %d %v", st, resp)
	}
	peer.WaitFor(1) // read from the queue, held unacknowledged by the peer
	for i := range 4 {
		if st, _ := chat(t.Context(), g.srv.URL, "exact"); st != http.StatusOK {
			t.Fatalf("exact request %d before: %d", i, st)
		}
	}
	set.WaitReplicated(t)

	ctx, stop := context.WithCancel(context.Background())
	results := load(ctx, g.srv.URL, "loader", 4)
	time.Sleep(300 * time.Millisecond)
	old := set.Primary(t)
	killed := time.Now()
	old.Kill()
	var promoted time.Duration
	for deadline := killed.Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if set.Primary(t) != old {
			promoted = time.Since(killed)
			break
		}
		if time.Now().After(deadline) {
			stop()
			t.Fatal("no new primary within 30s")
		}
	}
	// Run on until the gateway has served a second of chats from the new
	// primary (or the bound is over).
	var recovered time.Duration
	for deadline := killed.Add(failoverBound); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if st, _ := chat(t.Context(), g.srv.URL, "loader"); st == http.StatusOK && onFailure == "closed" || onFailure == "local" && redisServes(t, g) {
			recovered = time.Since(killed)
			break
		}
	}
	time.Sleep(time.Second)
	stop()
	all := <-results
	// The limits' fallback probes Redis once a second before it trusts it
	// again (limit.DefaultRetryInterval).
	time.Sleep(1500 * time.Millisecond)
	if recovered == 0 {
		t.Fatalf("the gateway did not reach the new primary within %s", failoverBound)
	}

	var ok, failed int
	var lastFail time.Duration
	for _, o := range all {
		switch {
		case o.status == http.StatusOK:
			ok++
		case onFailure == "closed" && o.status == http.StatusServiceUnavailable && o.retry != "":
			failed++
			lastFail = max(lastFail, o.at.Sub(killed))
		default:
			t.Errorf("a request at %s after the kill: %d (Retry-After %q); want 200 or, on_failure closed, 503 with Retry-After",
				o.at.Sub(killed).Round(time.Millisecond), o.status, o.retry)
		}
	}
	if onFailure == "local" && failed != 0 {
		t.Errorf("on_failure local: %d requests refused", failed)
	}
	if lastFail > failoverBound {
		t.Errorf("requests failed until %s after the kill, bound %s", lastFail, failoverBound)
	}
	t.Logf("FIGURES sentinel on_failure=%s: %d requests, %d answered 503 (Retry-After) in the window, last at %s, %d decided on local limits; new primary named after %s; gateway on it after %s",
		onFailure, len(all), failed, lastFail.Round(time.Millisecond), g.app.state.fallback.Fallbacks(), promoted.Round(time.Millisecond), recovered.Round(time.Millisecond))

	// Nothing acknowledged is lost.
	id, _ := decided["request_id"].(string)
	if code, body, _ := g.do(http.MethodGet, "/agent/status/"+id, "tok-alpha", ""); code != http.StatusOK || !strings.Contains(string(body), "APPROVED") {
		t.Errorf("the approval decided before the failover: %d %s", code, body)
	}
	np := redis.NewClient(&redis.Options{Addr: set.Primary(t).Addr()})
	defer np.Close()
	if n, err := np.XLen(t.Context(), "{gw:mbox}:q:"+queuePriority(t, np)).Result(); err != nil || n != 1 {
		t.Errorf("the queued message on the new primary: %d entries, %v", n, err)
	}
	close(release)
	time.Sleep(500 * time.Millisecond)
	if got := len(peer.Received()); got != 1 {
		t.Errorf("the message queued before was delivered %d times, want once", got)
	}
	// Exact again: exact has 6 of its 10 left, whichever replica of Redis
	// counts them.
	for i := range 7 {
		st, _ := chat(t.Context(), g.srv.URL, "exact")
		if want := map[bool]int{true: http.StatusOK, false: http.StatusTooManyRequests}[i < 6]; st != want {
			t.Errorf("exact request %d after the failover: %d, want %d", 5+i, st, want)
		}
	}
}

// redisServes reports whether g's Redis answers through g's own client.
func redisServes(t *testing.T, g *a2a) bool {
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	return g.app.state.redis.Ping(ctx).Err() == nil
}

// queuePriority is the priority stream that holds entries.
func queuePriority(t *testing.T, c *redis.Client) string {
	for _, p := range []string{"0", "1", "2", "3"} {
		if n, _ := c.XLen(t.Context(), "{gw:mbox}:q:"+p).Result(); n > 0 {
			return p
		}
	}
	return "0"
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestClusterNodeRestartUnderLoad: the gateway on a 3-master Cluster
// (nodes with an append-only file); the master holding the exact agent's
// limit restarts while chats flow. Requests in the window are 503 with
// Retry-After (on_failure closed), the approval decided before stays
// decided, and exact's limit goes on where it was.
func TestClusterNodeRestartUnderLoad(t *testing.T) {
	c := testredis.StartCluster(t)
	peer := newPeer(t)
	g := newStateGateway(t, clusterYAML(c), "closed", "cluster-restart", peer)
	code, body, _ := g.do(http.MethodPost, "/agent/request", "tok-alpha", mustJSON(t, map[string]any{
		"agent_id": "alpha", "session_id": "s-1", "request_type": "APPROVAL", "action": "create",
		"target_type": "design", "target_path": "docs/design/x.md", "content": "# X", "rationale": "Implementing user story US-123",
		"references": []string{}, "deviations": []any{}}))
	var decided map[string]any
	_ = json.Unmarshal(body, &decided)
	if code != http.StatusOK || decided["status"] != "approved" {
		t.Fatalf("approval: %d %s", code, body)
	}
	for i := range 4 {
		if st, _ := chat(t.Context(), g.srv.URL, "exact"); st != http.StatusOK {
			t.Fatalf("exact request %d before: %d", i, st)
		}
	}
	ctx, stop := context.WithCancel(context.Background())
	results := load(ctx, g.srv.URL, "loader", 4)
	time.Sleep(300 * time.Millisecond)
	// The masters of the loader's and exact's limits go down and up.
	nodes := []*testredis.Server{c.NodeOf(t, limitKey(t, c, "loader"))}
	if n := c.NodeOf(t, limitKey(t, c, "exact")); n != nodes[0] {
		nodes = append(nodes, n)
	}
	restarted := time.Now()
	for _, n := range nodes {
		n.Restart()
	}
	c.WaitOK(t)
	var recovered time.Duration
	for deadline := restarted.Add(failoverBound); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		if st, _ := chat(t.Context(), g.srv.URL, "loader"); st == http.StatusOK {
			recovered = time.Since(restarted)
			break
		}
	}
	time.Sleep(time.Second)
	stop()
	all := <-results
	time.Sleep(1500 * time.Millisecond) // the fallback's probe, as above
	if recovered == 0 {
		t.Fatalf("no chat served within %s of the restart", failoverBound)
	}
	var failed int
	var lastFail time.Duration
	for _, o := range all {
		switch {
		case o.status == http.StatusOK:
		case o.status == http.StatusServiceUnavailable && o.retry != "":
			failed++
			lastFail = max(lastFail, o.at.Sub(restarted))
		default:
			t.Errorf("a request at %s after the restart: %d (Retry-After %q)", o.at.Sub(restarted).Round(time.Millisecond), o.status, o.retry)
		}
	}
	t.Logf("FIGURES cluster restart of %d of 3 masters: %d requests, %d answered 503 (Retry-After), the last %s after the restart; chats served again after %s",
		len(nodes), len(all), failed, lastFail.Round(time.Millisecond), recovered.Round(time.Millisecond))
	id, _ := decided["request_id"].(string)
	if code, body, _ := g.do(http.MethodGet, "/agent/status/"+id, "tok-alpha", ""); code != http.StatusOK || !strings.Contains(string(body), "APPROVED") {
		t.Errorf("the approval decided before the restart: %d %s", code, body)
	}
	for i := range 7 {
		st, _ := chat(t.Context(), g.srv.URL, "exact")
		if want := map[bool]int{true: http.StatusOK, false: http.StatusTooManyRequests}[i < 6]; st != want {
			t.Errorf("exact request %d after the restart: %d, want %d", 5+i, st, want)
		}
	}
}

// limitKey is the key of agent's request limit, found on the cluster's
// masters.
func limitKey(t *testing.T, c *testredis.Cluster, agent string) string {
	t.Helper()
	for _, n := range c.Nodes {
		cl := redis.NewClient(&redis.Options{Addr: n.Addr()})
		keys, err := cl.Keys(t.Context(), "*rl*"+agent+"*").Result()
		_ = cl.Close()
		if err == nil && len(keys) > 0 {
			return keys[0]
		}
	}
	t.Fatalf("no limit key of %s on the cluster", agent)
	return ""
}
