package mcp

import (
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/config"
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
