package mcp

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/policy"
)

// TestBusyDoorKeepsItsConnections: calls in flight at once reuse the
// door's connections to their server in the next round rather than
// dialing new ones. With Go's default of two idle connections per host, 16
// agents calling at once made the door (and the server) open and close a
// TCP connection for nearly every call: a tenth of the door's CPU under
// load, and as much again on the server's side.
func TestBusyDoorKeepsItsConnections(t *testing.T) {
	const clients, rounds = 16, 6
	up := &fakeServer{tools: `[{"name":"read_file","inputSchema":{"type":"object"}}]`}
	// Each request takes a while (outside the fake's lock), so that a
	// round's calls are in flight at once.
	upSrv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(20 * time.Millisecond)
		up.ServeHTTP(w, r)
	}))
	var dials atomic.Int64
	upSrv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			dials.Add(1)
		}
	}
	upSrv.Start()
	t.Cleanup(upSrv.Close)
	agent := &roster.Agent{ID: "a1", MaxRequestSize: 1 << 20, MCPTools: map[string][]string{"files": {"read_*"}}}
	cfg := &config.Config{Agents: map[string]*roster.Agent{"a1": agent}}
	cfg.Gateway.MCP.Servers = []config.MCPServer{{Name: "files", URL: upSrv.URL, Timeout: config.Duration(5e9)}}
	d, err := New(Deps{Config: cfg, Policy: fakePolicy{policy.MCPDecision{Decision: policy.MCPAllow}}, Limiter: limit.NewMemory(), Log: discard()})
	if err != nil {
		t.Fatal(err)
	}
	dt := serveDoor(t, d, agent, up)
	for range rounds {
		var wg sync.WaitGroup
		for range clients {
			wg.Go(func() {
				if _, body, _ := dt.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{}}}`); code(t, body) != 0 {
					t.Errorf("call refused: %s", body)
				}
			})
		}
		wg.Wait()
	}
	// One connection per call in flight at once, and a few for the
	// session and the tool list: not one per call.
	if n := dials.Load(); n > clients+4 {
		t.Errorf("the door dialed its server %d times for %d calls in rounds of %d; want at most %d", n, clients*rounds, clients, clients+4)
	}
}

// TestCallsAtOnceShareFsyncs: the door brackets each POST as an exchange
// of the audit trail (Recorder.Begin), so the trail's group commit holds a
// batch open for the calls in progress and 16 agents' mcp.call and
// mcp.result entries share a few fsyncs rather than costing one each: an
// fsync costs the gateway CPU whatever it carries. Every entry is still
// durable before its call goes on (fail_mode closed).
func TestCallsAtOnceShareFsyncs(t *testing.T) {
	const clients = 16
	up := &fakeServer{tools: `[{"name":"read_file","inputSchema":{"type":"object"}}]`}
	var arrived sync.WaitGroup
	arrived.Add(clients)
	release := make(chan struct{})
	go func() { arrived.Wait(); close(release) }()
	upSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get(hdrSession) != "" {
			body, _ := io.ReadAll(r.Body)
			r.Body = io.NopCloser(bytes.NewReader(body))
			if bytes.Contains(body, []byte(`"tools/call"`)) {
				// The calls answer together, as a busy server's do.
				arrived.Done()
				<-release
			}
		}
		up.ServeHTTP(w, r)
	}))
	t.Cleanup(upSrv.Close)
	trail, err := audit.Open(audit.Config{Dir: t.TempDir(), Chain: "mcp-test", CommitDelay: 100 * time.Millisecond, Logger: discard()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = trail.Close() })
	agent := &roster.Agent{ID: "a1", MaxRequestSize: 1 << 20, MCPTools: map[string][]string{"files": {"read_*"}}}
	cfg := &config.Config{Agents: map[string]*roster.Agent{"a1": agent}}
	cfg.Gateway.MCP.Servers = []config.MCPServer{{Name: "files", URL: upSrv.URL, Timeout: config.Duration(5e9)}}
	d, err := New(Deps{Config: cfg, Policy: fakePolicy{policy.MCPDecision{Decision: policy.MCPAllow}}, Limiter: limit.NewMemory(), Log: discard(),
		Audit: &door.Recorder{Log: trail, FailClosed: true, Logger: discard()}})
	if err != nil {
		t.Fatal(err)
	}
	dt := serveDoor(t, d, agent, up)
	before := trail.Stats()
	var wg sync.WaitGroup
	for i := range clients {
		// The agents' calls come a little apart, as a fleet's do: each
		// alone would find the writer idle and cost an fsync of its own.
		time.Sleep(time.Duration(i%2) * 5 * time.Millisecond)
		wg.Go(func() {
			if _, body, _ := dt.post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{}}}`); code(t, body) != 0 {
				t.Errorf("call refused: %s", body)
			}
		})
	}
	wg.Wait()
	st := trail.Stats()
	entries, fsyncs := st.Entries-before.Entries, st.Fsyncs-before.Fsyncs
	if entries != 2*clients {
		t.Fatalf("%d entries for %d calls, want an mcp.call and an mcp.result each", entries, clients)
	}
	if fsyncs > 6 {
		t.Errorf("%d fsyncs for %d entries of %d calls at once; want them to share a few", fsyncs, entries, clients)
	}
}
