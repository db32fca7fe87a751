package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/escalation"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/internal/testredis"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/policy"
)

// newRedis starts a redis-server for t (skipping t, loudly, without one)
// and returns it with a client that honours contexts but whose own
// timeouts are long and which never retries: a deadline a test sees is
// the store's own, not the client's.
func newRedis(t *testing.T) (*testredis.Server, *redis.Client) {
	t.Helper()
	rd := testredis.Start(t)
	return rd, redisClient(t, rd)
}

// redisClient is another client of rd: another replica's.
func redisClient(t *testing.T, rd *testredis.Server) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: rd.Addr(), ContextTimeoutEnabled: true, MaxRetries: -1,
		DialTimeout: 10 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second})
	c.AddHook(testredis.SlotCheck(t))
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// fakeClock is the memory stores' clock in the contract tests.
type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) pass(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// rig is one store under a contract test.
type rig[T any] struct {
	store T
	// pass lets d go by for the store: its fake clock moved, or a real
	// sleep for Redis (whose clock cannot be moved).
	pass func(d time.Duration)
	// idle is the sessions' idle expiry.
	idle time.Duration
}

// backend is one implementation under a contract test: setup prepares
// what its subtests share (a redis-server) and returns how to open a
// fresh, empty store for one of them.
type backend[T any] struct {
	name  string
	setup func(t *testing.T) func(t *testing.T) rig[T]
}

// prefixes keeps the Redis stores of the subtests apart on one server.
var prefixes atomic.Int64

func testPrefix() string { return fmt.Sprintf("{test%d}:", prefixes.Add(1)) }

// redisIdle is the Redis sessions' idle expiry in the contract test:
// long enough for the margins below to hold on a loaded machine, short
// enough to wait out.
const redisIdle = time.Second

func grantBackends() []backend[Grants] {
	return []backend[Grants]{
		{"memory", func(*testing.T) func(*testing.T) rig[Grants] {
			return func(*testing.T) rig[Grants] {
				c := &fakeClock{t: time.Unix(1e9, 0)}
				g := NewMemoryGrants()
				g.now = c.now
				return rig[Grants]{store: g, pass: c.pass}
			}
		}},
		{"redis", func(t *testing.T) func(*testing.T) rig[Grants] {
			_, client := newRedis(t)
			return func(*testing.T) rig[Grants] {
				return rig[Grants]{store: NewRedisGrants(client, testPrefix(), time.Second), pass: time.Sleep}
			}
		}},
	}
}

func sessionBackends() []backend[Sessions] {
	return []backend[Sessions]{
		{"memory", func(*testing.T) func(*testing.T) rig[Sessions] {
			return func(*testing.T) rig[Sessions] {
				c := &fakeClock{t: time.Unix(1e9, 0)}
				m := NewMemorySessions()
				m.now = c.now
				return rig[Sessions]{store: m, pass: c.pass, idle: sessionIdle}
			}
		}},
		{"redis", func(t *testing.T) func(*testing.T) rig[Sessions] {
			_, client := newRedis(t)
			return func(*testing.T) rig[Sessions] {
				s := NewRedisSessions(client, RedisSessionsOptions{Prefix: testPrefix(), Timeout: time.Second, Idle: redisIdle})
				return rig[Sessions]{store: s, pass: time.Sleep, idle: redisIdle}
			}
		}},
	}
}

// TestMCPGrantsContract: every Grants lets a granted call through once,
// not after it expired, and to exactly one of many racing takers.
func TestMCPGrantsContract(t *testing.T) {
	ctx := context.Background()
	key := func(n int) string { return grantKey("coder", "files", "delete_file", fmt.Sprintf("%064d", n), "") }
	for _, b := range grantBackends() {
		t.Run(b.name, func(t *testing.T) {
			open := b.setup(t)
			t.Run("once", func(t *testing.T) {
				r := open(t)
				if err := r.store.Grant(ctx, key(1), "esc-1", time.Hour); err != nil {
					t.Fatal(err)
				}
				if _, ok, err := r.store.Take(ctx, key(2)); ok || err != nil {
					t.Errorf("another call took the grant: %v %v", ok, err)
				}
				if id, ok, err := r.store.Take(ctx, key(1)); !ok || err != nil || id != "esc-1" {
					t.Fatalf("take: %q %v %v", id, ok, err)
				}
				if id, ok, err := r.store.Take(ctx, key(1)); ok || err != nil {
					t.Errorf("the grant passed twice (%q, %v)", id, err)
				}
				// A second approval grants a second call.
				if err := r.store.Grant(ctx, key(1), "esc-2", time.Hour); err != nil {
					t.Fatal(err)
				}
				if id, ok, err := r.store.Take(ctx, key(1)); !ok || err != nil || id != "esc-2" {
					t.Errorf("take after a second approval: %q %v %v", id, ok, err)
				}
			})
			t.Run("expiry", func(t *testing.T) {
				r := open(t)
				const ttl = 400 * time.Millisecond
				for _, k := range []string{key(1), key(2)} {
					if err := r.store.Grant(ctx, k, "esc", ttl); err != nil {
						t.Fatal(err)
					}
				}
				r.pass(ttl / 4)
				if _, ok, err := r.store.Take(ctx, key(1)); !ok || err != nil {
					t.Errorf("a grant within its TTL: %v %v", ok, err)
				}
				r.pass(ttl)
				if _, ok, err := r.store.Take(ctx, key(2)); ok || err != nil {
					t.Errorf("an expired grant passed (%v)", err)
				}
			})
			t.Run("racing takes", func(t *testing.T) {
				r := open(t)
				for round := range 5 {
					if err := r.store.Grant(ctx, key(round), "esc", time.Hour); err != nil {
						t.Fatal(err)
					}
					var wins, fails atomic.Int32
					start := make(chan struct{})
					var wg sync.WaitGroup
					for range 20 {
						wg.Go(func() {
							<-start
							_, ok, err := r.store.Take(ctx, key(round))
							if err != nil {
								fails.Add(1)
							}
							if ok {
								wins.Add(1)
							}
						})
					}
					close(start)
					wg.Wait()
					if wins.Load() != 1 || fails.Load() != 0 {
						t.Fatalf("round %d: %d of 20 racing takes won (%d errors), want exactly 1", round, wins.Load(), fails.Load())
					}
				}
			})
		})
	}
}

// TestMCPSessionsContract: every Sessions keeps a session with its agent
// until it is deleted or unused for its idle time (a use starts that time
// again), and bounds each agent's sessions by ending its least recently
// used.
func TestMCPSessionsContract(t *testing.T) {
	ctx := context.Background()
	session := func(agent string) Session {
		return Session{ID: newSessionID(), Agent: agent, Server: "files", Upstream: "up-" + agent, Protocol: "2025-06-18", Target: "http://files/mcp"}
	}
	for _, b := range sessionBackends() {
		t.Run(b.name, func(t *testing.T) {
			open := b.setup(t)
			t.Run("put, get, delete", func(t *testing.T) {
				r := open(t)
				s, other := session("coder"), session("intern")
				for _, x := range []Session{s, other} {
					if err := r.store.Put(ctx, x); err != nil {
						t.Fatal(err)
					}
				}
				// The agent comes back with the session: the door compares it
				// with the caller's.
				if got, ok, err := r.store.Get(ctx, s.ID); !ok || err != nil || !reflect.DeepEqual(got, s) {
					t.Fatalf("get: %+v %v %v, want %+v", got, ok, err, s)
				}
				if got, ok, err := r.store.Get(ctx, other.ID); !ok || err != nil || got.Agent != "intern" {
					t.Fatalf("get the other agent's: %+v %v %v", got, ok, err)
				}
				if _, ok, err := r.store.Get(ctx, newSessionID()); ok || err != nil {
					t.Errorf("a session never put: %v %v", ok, err)
				}
				if err := r.store.Delete(ctx, s.ID); err != nil {
					t.Fatal(err)
				}
				if _, ok, err := r.store.Get(ctx, s.ID); ok || err != nil {
					t.Errorf("a deleted session: %v %v", ok, err)
				}
				if err := r.store.Delete(ctx, s.ID); err != nil {
					t.Errorf("deleting twice: %v", err)
				}
				if _, ok, _ := r.store.Get(ctx, other.ID); !ok {
					t.Error("deleting a session ended another")
				}
			})
			t.Run("idle expiry", func(t *testing.T) {
				r := open(t)
				s := session("coder")
				if err := r.store.Put(ctx, s); err != nil {
					t.Fatal(err)
				}
				r.pass(r.idle / 2)
				if _, ok, err := r.store.Get(ctx, s.ID); !ok || err != nil {
					t.Fatalf("a session used within its idle time: %v %v", ok, err)
				}
				// Past idle since the Put, within it since the Get.
				r.pass(r.idle * 3 / 4)
				if _, ok, err := r.store.Get(ctx, s.ID); !ok || err != nil {
					t.Fatalf("a use did not keep the session: %v %v", ok, err)
				}
				r.pass(r.idle * 5 / 4)
				if _, ok, err := r.store.Get(ctx, s.ID); ok || err != nil {
					t.Errorf("an idle session did not expire (%v)", err)
				}
			})
			t.Run("per-agent bound", func(t *testing.T) {
				r := open(t)
				put := func(s Session) {
					t.Helper()
					r.pass(time.Millisecond)
					if err := r.store.Put(ctx, s); err != nil {
						t.Fatal(err)
					}
				}
				var ids []string
				for range sessionsPerAgent {
					s := session("coder")
					put(s)
					ids = append(ids, s.ID)
				}
				other := session("intern")
				put(other)
				r.pass(time.Millisecond)
				if _, ok, err := r.store.Get(ctx, ids[0]); !ok || err != nil {
					t.Fatalf("the first session is gone before the bound: %v %v", ok, err)
				}
				// ids[0] was just used: ids[1] is now the least recently used.
				newest := session("coder")
				put(newest)
				if _, ok, err := r.store.Get(ctx, ids[1]); ok || err != nil {
					t.Errorf("the least recently used session outlived the bound (%v)", err)
				}
				live := 0
				for _, id := range append([]string{ids[0], newest.ID}, ids[2:]...) {
					if _, ok, err := r.store.Get(ctx, id); ok && err == nil {
						live++
					}
				}
				if live != sessionsPerAgent {
					t.Errorf("%d of the agent's sessions live, want %d: the used and the new one and all but the least recently used", live, sessionsPerAgent)
				}
				if _, ok, _ := r.store.Get(ctx, other.ID); !ok {
					t.Error("another agent's session was ended by this agent's bound")
				}
			})
		})
	}
}

// TestMCPRedisSessionsKeys: the Redis sessions name only keys of the
// gateway's making, refuse a value that is not the session asked for (a
// door must not guess whose it is), and leave nothing behind once an
// agent's sessions expired.
func TestMCPRedisSessionsKeys(t *testing.T) {
	ctx := context.Background()
	_, client := newRedis(t)
	s := NewRedisSessions(client, RedisSessionsOptions{Prefix: "{gw:mcp}:", Timeout: time.Second, Idle: 300 * time.Millisecond})
	if err := s.Put(ctx, Session{ID: "mine", Agent: "coder"}); err == nil {
		t.Error("a session under an id the gateway does not mint was stored")
	}
	if _, ok, err := s.Get(ctx, "x:*"); ok || err != nil {
		t.Errorf("an id of the agent's making: %v %v", ok, err)
	}
	a, b := newSessionID(), newSessionID()
	for _, id := range []string{a, b} {
		if err := s.Put(ctx, Session{ID: id, Agent: "coder", Server: "files"}); err != nil {
			t.Fatal(err)
		}
	}
	for key, want := range map[string]string{"{gw:mcp}:sess:" + a: "string", "{gw:mcp}:agent:coder": "zset"} {
		if typ, _ := client.Type(ctx, key).Result(); typ != want {
			t.Errorf("key %s is a %q, want a %s", key, typ, want)
		}
	}
	if n, _ := client.ZCard(ctx, "{gw:mcp}:agent:coder").Result(); n != 2 {
		t.Errorf("the agent's set has %d members, want 2", n)
	}
	if err := s.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	if n, _ := client.ZCard(ctx, "{gw:mcp}:agent:coder").Result(); n != 1 {
		t.Errorf("after a Delete the agent's set has %d members, want 1", n)
	}
	client.Set(ctx, "{gw:mcp}:sess:"+a, `{"id":"`+b+`","agent":"intern"}`, time.Minute)
	if got, ok, err := s.Get(ctx, a); err == nil || ok {
		t.Errorf("a key holding another session: %+v %v %v", got, ok, err)
	}
	client.Set(ctx, "{gw:mcp}:sess:"+a, `not json`, time.Minute)
	if _, ok, err := s.Get(ctx, a); err == nil || ok {
		t.Errorf("a key holding no session: %v %v", ok, err)
	}
	client.Del(ctx, "{gw:mcp}:sess:"+a)
	time.Sleep(600 * time.Millisecond)
	if keys, _ := client.Keys(ctx, "{gw:mcp}:*").Result(); len(keys) != 0 {
		t.Errorf("keys left after every session expired: %v", keys)
	}
}

// TestMCPRedisStateDown: with Redis stopped, or hung (it takes the
// command and never answers), every call fails with an error within the
// store's deadline; no Take reports a grant and no Get a session. Once
// Redis is back, the stores work again.
func TestMCPRedisStateDown(t *testing.T) {
	ctx := context.Background()
	rd, client := newRedis(t)
	const timeout = 300 * time.Millisecond
	g := NewRedisGrants(client, "", timeout)
	s := NewRedisSessions(client, RedisSessionsOptions{Timeout: timeout})
	sess := Session{ID: newSessionID(), Agent: "coder", Server: "files"}
	key := grantKey("coder", "files", "delete_file", strings.Repeat("0", 64), "")
	if err := s.Put(ctx, sess); err != nil {
		t.Fatal(err)
	}
	if err := g.Grant(ctx, key, "esc-1", time.Hour); err != nil {
		t.Fatal(err)
	}
	calls := map[string]func() error{
		"grant": func() error { return g.Grant(ctx, key, "esc-2", time.Hour) },
		"take": func() error {
			_, ok, err := g.Take(ctx, key)
			if ok {
				return errors.New("a grant was taken from a Redis that is down")
			}
			return err
		},
		"put": func() error { return s.Put(ctx, Session{ID: newSessionID(), Agent: "coder"}) },
		"get": func() error {
			_, ok, err := s.Get(ctx, sess.ID)
			if ok {
				return errors.New("a session was read from a Redis that is down")
			}
			return err
		},
		"delete": func() error { return s.Delete(ctx, sess.ID) },
	}
	for _, down := range []struct {
		name      string
		stop, bak func()
	}{
		{"hung", rd.Pause, rd.Resume},
		{"stopped", rd.Stop, rd.Restart},
	} {
		t.Run(down.name, func(t *testing.T) {
			down.stop()
			for name, call := range calls {
				start := time.Now()
				err := call()
				if took := time.Since(start); took > timeout+700*time.Millisecond {
					t.Errorf("%s took %v, past the deadline of %v", name, took, timeout)
				}
				if err == nil {
					t.Errorf("%s succeeded with Redis %s", name, down.name)
				}
			}
			down.bak()
			// A Take that timed out may have been run by Redis once it came
			// back (the command was sent): the grant is lost, never doubled.
			if err := g.Grant(ctx, key, "esc-3", time.Hour); err != nil {
				t.Fatalf("grant once Redis is back: %v", err)
			}
			if id, ok, err := g.Take(ctx, key); !ok || err != nil || id != "esc-3" {
				t.Errorf("take once Redis is back: %q %v %v", id, ok, err)
			}
		})
	}
}

// fakeOpener opens escalations in memory: it keeps what a person would
// review, so a test can approve it.
type fakeOpener struct {
	mu   sync.Mutex
	reqs []escalation.Request
}

func (o *fakeOpener) Open(_ context.Context, r escalation.Request) (escalation.Opened, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.reqs = append(o.reqs, r)
	return escalation.Opened{ID: fmt.Sprintf("esc-%d", len(o.reqs))}, nil
}

func (o *fakeOpener) last() (id string, r escalation.Request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return fmt.Sprintf("esc-%d", len(o.reqs)), o.reqs[len(o.reqs)-1]
}

// replica is one gateway's door in front of the fake server at upURL, on
// the stores given: agents a1 and a2 (mcp_tools ["read_*"] on "files"),
// the agent of a request named by its X-Agent header.
type replica struct {
	t    *testing.T
	door *Door
	srv  *httptest.Server
}

func newReplica(t *testing.T, upURL string, p Decider, o escalation.Opener, g Grants, s Sessions) *replica {
	t.Helper()
	agents := map[string]*roster.Agent{}
	for _, id := range []string{"a1", "a2"} {
		agents[id] = &roster.Agent{ID: id, MaxRequestSize: 1 << 20, MCPTools: map[string][]string{"files": {"read_*"}}}
	}
	cfg := &config.Config{Agents: agents}
	cfg.Gateway.MCP.Servers = []config.MCPServer{{Name: "files", URL: upURL, Timeout: config.Duration(5 * time.Second)}}
	cfg.Protocol.Timeouts.Escalation = config.Duration(time.Hour)
	d, err := New(Deps{Config: cfg, Policy: p, Opener: o, Grants: g, Sessions: s, Limiter: limit.NewMemory(), Log: discard()})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		agent := agents[r.Header.Get("X-Agent")]
		if agent == nil {
			agent = agents["a1"]
		}
		r = scope.Attach(r, &scope.Exchange{RequestID: "req-1", Agent: agent})
		r.SetPathValue("server", strings.TrimPrefix(r.URL.Path, "/mcp/"))
		d.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return &replica{t: t, door: d, srv: srv}
}

// send is one request of agent to the replica, in session (none: "").
func (rp *replica) send(method, agent, session, body string) (int, string, http.Header) {
	rp.t.Helper()
	req, _ := http.NewRequest(method, rp.srv.URL+"/mcp/files", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("X-Agent", agent)
	if session != "" {
		req.Header.Set("Mcp-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		rp.t.Fatal(err)
	}
	defer resp.Body.Close()
	out, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(out), resp.Header
}

func (rp *replica) initialize(agent string) string {
	rp.t.Helper()
	status, body, h := rp.send(http.MethodPost, agent, "", `{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`)
	if status != http.StatusOK || h.Get("Mcp-Session-Id") == "" {
		rp.t.Fatalf("initialize: %d %s", status, body)
	}
	return h.Get("Mcp-Session-Id")
}

// ran is the number of tools/call the server ran.
func (f *fakeServer) ran() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls
}

const readCall = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"a"}}}`

// TestMCPDoorsShareRedis: two doors on one Redis are one gateway to the
// agent: a session initialized through one goes on through the other (and
// stays its agent's), an approval resolved on one lets the call through
// the other, once, and a session ended through one is ended for both.
func TestMCPDoorsShareRedis(t *testing.T) {
	rd, _ := newRedis(t)
	up := &fakeServer{tools: `[{"name":"read_file","inputSchema":{"type":"object"}}]`}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	escalate := fakePolicy{policy.MCPDecision{Decision: policy.MCPEscalate, Reason: "a person decides"}}
	opener := &fakeOpener{}
	// Each replica has its own client and stores, as each gateway process.
	var rs [2]*replica
	for i := range rs {
		c := redisClient(t, rd)
		rs[i] = newReplica(t, upSrv.URL, escalate, opener, NewRedisGrants(c, "", time.Second), NewRedisSessions(c, RedisSessionsOptions{Timeout: time.Second}))
	}
	a, b := rs[0], rs[1]
	sess := a.initialize("a1")

	if status, body, _ := b.send(http.MethodPost, "a2", sess, readCall); status != http.StatusNotFound {
		t.Errorf("another agent with a1's session on the other replica: %d %s", status, body)
	}
	_, body, _ := b.send(http.MethodPost, "a1", sess, readCall)
	if got := code(t, body); got != codeEscalated {
		t.Fatalf("the call through B in A's session: code %d, want an escalation: %s", got, body)
	}
	id, req := opener.last()
	if err := a.door.Resolve(context.Background(), escalation.Decided{ID: id, Type: req.Type, AgentID: req.AgentID, Approved: true, Content: req.Content}); err != nil {
		t.Fatal(err)
	}
	_, body, _ = b.send(http.MethodPost, "a1", sess, readCall)
	if got := code(t, body); got != 0 || up.ran() != 1 {
		t.Fatalf("the approved call through B: code %d, %d calls: %s", got, up.ran(), body)
	}
	for _, rp := range rs {
		if _, body, _ = rp.send(http.MethodPost, "a1", sess, readCall); code(t, body) != codeEscalated {
			t.Errorf("the approval let a second call through: %s", body)
		}
	}
	if up.ran() != 1 {
		t.Errorf("the server ran %d calls, want 1", up.ran())
	}

	if status, body, _ := b.send(http.MethodDelete, "a1", sess, ""); status != http.StatusNoContent {
		t.Fatalf("DELETE through B: %d %s", status, body)
	}
	if status, body, _ := a.send(http.MethodPost, "a1", sess, `{"jsonrpc":"2.0","id":2,"method":"ping"}`); status != http.StatusNotFound {
		t.Errorf("a session ended through B, used through A: %d %s", status, body)
	}
}

// TestMCPRedisDownRefuses: a door whose Redis hangs refuses, within the
// deadline, a call whose approval it cannot read (-32065, the server never
// called) and a request whose session it cannot read (503): a state it
// cannot reach is never taken for an approval or a session.
func TestMCPRedisDownRefuses(t *testing.T) {
	rd, c := newRedis(t)
	up := &fakeServer{tools: `[{"name":"read_file","inputSchema":{"type":"object"}}]`}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	escalate := fakePolicy{policy.MCPDecision{Decision: policy.MCPEscalate}}
	opener := &fakeOpener{}
	const timeout = 300 * time.Millisecond
	grants := newReplica(t, upSrv.URL, escalate, opener, NewRedisGrants(c, "", timeout), NewMemorySessions())
	sessions := newReplica(t, upSrv.URL, escalate, opener, NewMemoryGrants(), NewRedisSessions(c, RedisSessionsOptions{Timeout: timeout}))
	gs, ss := grants.initialize("a1"), sessions.initialize("a1")
	if _, body, _ := grants.send(http.MethodPost, "a1", gs, readCall); code(t, body) != codeEscalated {
		t.Fatalf("not escalated: %s", body)
	}
	id, req := opener.last()
	if err := grants.door.Resolve(context.Background(), escalation.Decided{ID: id, AgentID: "a1", Approved: true, Content: req.Content}); err != nil {
		t.Fatal(err)
	}
	rd.Pause()
	defer rd.Resume()
	start := time.Now()
	if _, body, _ := grants.send(http.MethodPost, "a1", gs, readCall); code(t, body) != codeUnavailable || up.ran() != 0 {
		t.Errorf("an approval that cannot be read: %s (%d calls)", body, up.ran())
	}
	status, body, _ := sessions.send(http.MethodPost, "a1", ss, readCall)
	var m struct {
		Error struct{ Code int } `json:"error"`
	}
	_ = json.Unmarshal([]byte(body), &m)
	if status != http.StatusServiceUnavailable || m.Error.Code != codeUnavailable {
		t.Errorf("a session that cannot be read: %d %s", status, body)
	}
	if took := time.Since(start); took > 2*timeout+time.Second {
		t.Errorf("two refusals took %v with a deadline of %v each", took, timeout)
	}
}
