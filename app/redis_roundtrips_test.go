package app

import (
	"context"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	sdk "github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/redis/go-redis/v9"

	"github.com/sacpgw/gateway/internal/testredis"
)

// roundTrips counts what a go-redis client sends: each command and each
// pipeline (or MULTI … EXEC) is one round trip to one node.
type roundTrips struct{ n atomic.Int64 }

func (*roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmd)
	}
}

func (c *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		c.n.Add(1)
		return next(ctx, cmds)
	}
}

// count hooks a counter on g's Redis client.
func count(g *a2a) *roundTrips {
	c := &roundTrips{}
	g.app.state.redis.AddHook(c)
	return c
}

// perRequest is the round trips of one do, averaged over n, less what the
// gateway sends by itself meanwhile (its idle rate, measured before).
func perRequest(t *testing.T, c *roundTrips, n int, do func(i int)) float64 {
	t.Helper()
	idleFrom, idle0 := time.Now(), c.n.Load()
	time.Sleep(time.Second)
	idleRate := float64(c.n.Load()-idle0) / time.Since(idleFrom).Seconds()
	do(-1) // warm: scripts loaded (EVALSHA, not EVAL), groups made
	from, n0 := time.Now(), c.n.Load()
	for i := range n {
		do(i)
	}
	return (float64(c.n.Load()-n0) - idleRate*time.Since(from).Seconds()) / float64(n)
}

// TestRedisRoundTripsPerRequest measures, with a counting hook on the
// gateway's own client, the Redis round trips of each kind of request on
// one node, and holds them to the budget docs/deploy.md states: a chat
// costs one (the rate check), plus two with a token limit (reserve and
// settle).
func TestRedisRoundTripsPerRequest(t *testing.T) {
	rd := testredis.Start(t)
	peer := newPeer(t)
	g := newStateGateway(t, rd.URL(), "closed", "rt", peer)
	c := count(g)
	chatBody := `{"model":"mock-1","messages":[{"role":"user","content":"hi"}]}`
	streamBody := `{"model":"mock-1","stream":true,"messages":[{"role":"user","content":"hi"}]}`
	post := func(path, agent, body string) func(int) {
		return func(int) {
			if st, b, _ := g.do(http.MethodPost, path, "tok-"+agent, body); st != http.StatusOK {
				t.Fatalf("%s as %s: %d %s", path, agent, st, b)
			}
		}
	}
	figures := map[string]float64{
		"chat (rate limit)":              perRequest(t, c, 20, post("/v1/chat/completions", "loader", chatBody)),
		"chat (rate and token limits)":   perRequest(t, c, 20, post("/v1/chat/completions", "metered", chatBody)),
		"stream (rate and token limits)": perRequest(t, c, 20, post("/v1/chat/completions", "metered", streamBody)),
		"relay message (accepted)": perRequest(t, c, 20, func(i int) {
			id := "rt-" + itoa(i+1)
			if st, resp := g.send("orch", `{"message_id":"`+id+`","message_type":"notification","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_rt","action":"task_assign","payload":{}}`); st != http.StatusAccepted {
				t.Fatalf("message: %d %v", st, resp)
			}
		}),
	}
	// A relay message's delivery (the worker's read, the audit, the ack)
	// happens after the answer; count it in a quiet window.
	peer.WaitFor(21)

	ts := newToolServer(t)
	m := newMCPReplica(t, ts, rd.URL(), "rt-mcp")
	mc := count(m)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := sdk.NewClient(&sdk.Implementation{Name: "agent", Version: "1"}, nil).Connect(ctx,
		&sdk.StreamableClientTransport{Endpoint: m.srv.URL + "/mcp/files", HTTPClient: &http.Client{Transport: bearer{"tok-coder", http.DefaultTransport}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	figures["MCP tools/call"] = perRequest(t, mc, 20, func(int) {
		if _, err := cs.CallTool(ctx, &sdk.CallToolParams{Name: "read_file", Arguments: map[string]any{"path": "a.txt"}}); err != nil {
			t.Fatal(err)
		}
	})

	// A Redis of its own: on rd, the first gateway's workflow engine (which
	// has no such workflow) may claim the run and fail it.
	f := newFlow(t, flowOpts{workflows: negotiationFlow, redisURL: testredis.Start(t).URL(), chain: "rt-flow"})
	f.up.script(func(user string) map[string]any { return sacpAnswer("success", map[string]any{}, "ok") })
	fc := count(f.a2a)
	run := perRequest(t, fc, 5, func(int) {
		if _, v, body := f.start("starter", "negotiate", `{"topic": "acme"}`); !strings.EqualFold(string(v.Status), "completed") {
			t.Fatalf("run %s: %s", v.Status, body)
		}
	})
	figures["workflow step (a 2-step run / 2)"] = run / 2

	for _, k := range slices.Sorted(maps.Keys(figures)) {
		t.Logf("FIGURES round trips per request, one node: %-34s %.1f", k, figures[k])
	}
	// The idle rate subtracted is an estimate (the queue's workers poll):
	// the bounds allow for its error.
	if v := figures["chat (rate limit)"]; v < 0.3 || v > 1.7 {
		t.Errorf("a chat under a rate limit costs %.1f round trips, want 1", v)
	}
	if v := figures["chat (rate and token limits)"]; v > 3.5 {
		t.Errorf("a chat under rate and token limits costs %.1f round trips, want at most 3", v)
	}
}
