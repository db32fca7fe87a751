package mcp

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/policy"
	"github.com/sacpgw/gateway/redact"
)

// recorder keeps the bodies a fake server received.
type recorder struct {
	next http.Handler
	mu   sync.Mutex
	seen []string
}

func (rc *recorder) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	rc.mu.Lock()
	rc.seen = append(rc.seen, string(body))
	rc.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body))
	rc.next.ServeHTTP(w, r)
}

func (rc *recorder) bodies() string {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	return strings.Join(rc.seen, "\n")
}

// newRedactingDoor is newDoorTest's door with protocol.redaction on
// (email, blocking where block says), its server's bodies recorded.
func newRedactingDoor(t *testing.T, block ...string) (*doorTest, *recorder) {
	up := &fakeServer{tools: `[{"name":"read_file","inputSchema":{"type":"object"}}]`}
	rec := &recorder{next: up}
	upSrv := httptest.NewServer(rec)
	t.Cleanup(upSrv.Close)
	agent := &roster.Agent{ID: "a1", MaxRequestSize: 1 << 20, MCPTools: map[string][]string{"files": {"read_*"}}}
	cfg := &config.Config{Agents: map[string]*roster.Agent{"a1": agent}}
	cfg.Gateway.MCP.Servers = []config.MCPServer{{Name: "files", URL: upSrv.URL, Timeout: config.Duration(5e9)}}
	cfg.Protocol.Redaction = redact.Config{Detectors: []string{"email"}, Block: block}
	d, err := New(Deps{Config: cfg, Policy: fakePolicy{policy.MCPDecision{Decision: policy.MCPAllow}}, Limiter: limit.NewMemory(), Log: discard()})
	if err != nil {
		t.Fatal(err)
	}
	dt := serveDoor(t, d, agent, up)
	return dt, rec
}

// An address used as a member name in a tool call's arguments, or in what
// the server answers, is masked on the way (the server and the agent see
// "[REDACTED:email]"), and blocks the call or the answer where email
// blocks.
func TestMemberNamesRedactedBothWays(t *testing.T) {
	const call = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"read_file","arguments":{"alice@example.com":"x","path":"/a"}}}`
	answer := func(w http.ResponseWriter, id string) {
		_, _ = io.WriteString(w, `{"jsonrpc":"2.0","id":`+id+`,"result":{"content":[{"type":"text","text":"ok"}],"structuredContent":{"bob@example.com":1,"carol@example.com":2}}}`)
	}
	dt, rec := newRedactingDoor(t)
	dt.up.answer = answer
	status, body, _ := dt.post(call)
	if status != http.StatusOK || code(t, body) != 0 {
		t.Fatalf("call: %d %s", status, body)
	}
	if sent := rec.bodies(); strings.Contains(sent, "alice@") || !strings.Contains(sent, `"arguments":{"[REDACTED:email]":"x","path":"/a"}`) {
		t.Errorf("the server received %s", sent)
	}
	if strings.Contains(body, "@example.com") || !strings.Contains(body, `"structuredContent":{"[REDACTED:email]":1,"[REDACTED:email]#2":2}`) {
		t.Errorf("the agent received %s", body)
	}

	blocking, rec := newRedactingDoor(t, "email")
	status, body, _ = blocking.post(call)
	if code(t, body) != codeBlocked || strings.Contains(body, "alice@") || strings.Contains(rec.bodies(), "tools/call") {
		t.Errorf("blocked call: %d %s; server saw %s", status, body, rec.bodies())
	}
	blocking.up.answer = answer
	_, body, _ = blocking.post(`{"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"read_file","arguments":{"path":"/a"}}}`)
	if code(t, body) != codeBlocked || strings.Contains(body, "@example.com") {
		t.Errorf("blocked answer: %s", body)
	}
}
