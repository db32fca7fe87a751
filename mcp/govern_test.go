package mcp

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/testkit"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/policy"
)

// memTrail is an audit trail in memory.
type memTrail struct {
	mu  sync.Mutex
	got []audit.Record
}

func (m *memTrail) Append(_ context.Context, r audit.Record) (audit.Entry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.got = append(m.got, r)
	return audit.Entry{}, nil
}

func (m *memTrail) kind(k string) []audit.Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []audit.Record
	for _, r := range m.got {
		if r.Kind == k {
			out = append(out, r)
		}
	}
	return out
}

// governTest is a door in front of a fake server, agent a1 (mcp_tools
// ["read_*"], rate rate), redacting e-mail addresses (blocking them when
// block), writing to trail.
func newGovernTest(t *testing.T, block bool, rate config.Rate) (*doorTest, *memTrail) {
	up := &fakeServer{tools: `[{"name":"read_file","inputSchema":{"type":"object"}}]`}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	agent := &roster.Agent{ID: "a1", MaxRequestSize: 1 << 20, MCPTools: map[string][]string{"files": {"read_*"}}, RateLimit: rate}
	cfg := &config.Config{Agents: map[string]*roster.Agent{"a1": agent}}
	cfg.Gateway.MCP.Servers = []config.MCPServer{{Name: "files", URL: upSrv.URL, Timeout: config.Duration(5 * time.Second)}}
	cfg.Protocol.Redaction.Detectors = []string{"email"}
	if block {
		cfg.Protocol.Redaction.Block = []string{"email"}
	}
	trail := &memTrail{}
	d, err := New(Deps{Config: cfg, Policy: fakePolicy{policy.MCPDecision{Decision: policy.MCPAllow}}, Limiter: limit.NewMemory(), Log: discard(),
		Audit: &door.Recorder{Log: trail, FailClosed: true, Logger: discard()}})
	if err != nil {
		t.Fatal(err)
	}
	dt := serveDoor(t, d, agent, up)
	return dt, trail
}

// agentMessages are the kinds of message an agent sends besides
// tools/call arguments, each carrying an e-mail address where a secret
// could ride: isRequest for those the server answers.
var agentMessages = []struct {
	note, body string
	isRequest  bool
}{
	{"a cancelled notification's reason", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":1,"reason":"ask eve@example.com"}}`, false},
	{"a progress notification's message", `{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1,"message":"sent to eve@example.com"}}`, false},
	{"the answer to the server's sampling request", `{"jsonrpc":"2.0","id":"s-1","result":{"role":"assistant","content":{"type":"text","text":"mail eve@example.com"},"model":"m"}}`, false},
	{"a resources/read uri", `{"jsonrpc":"2.0","id":2,"method":"resources/read","params":{"uri":"mailto:eve@example.com"}}`, true},
	{"prompts/get arguments", `{"jsonrpc":"2.0","id":3,"method":"prompts/get","params":{"name":"greet","arguments":{"to":"eve@example.com"}}}`, true},
	{"a cursor", `{"jsonrpc":"2.0","id":4,"method":"resources/list","params":{"cursor":"eve@example.com"}}`, true},
	{"a _meta", `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"read_file","arguments":{},"_meta":{"who":"eve@example.com"}}}`, true},
	{"a ping's _meta", `{"jsonrpc":"2.0","id":6,"method":"ping","params":{"_meta":{"who":"eve@example.com"}}}`, true},
}

// received is what the server got of the agent's (the gateway's own
// session for reading tool lists aside), one message a line.
func received(f *fakeServer) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var got []string
	for _, b := range f.got {
		if !strings.Contains(b, `"notifications/initialized"`) {
			got = append(got, b)
		}
	}
	return strings.Join(got, "\n")
}

// TestEveryAgentMessageIsRedacted: whatever an agent sends, the server
// gets it with the address masked.
func TestEveryAgentMessageIsRedacted(t *testing.T) {
	for _, tc := range agentMessages {
		t.Run(tc.note, func(t *testing.T) {
			dt, _ := newGovernTest(t, false, config.Rate{})
			status, body, _ := dt.post(tc.body)
			if (tc.isRequest && status != http.StatusOK) || (!tc.isRequest && status != http.StatusAccepted) {
				t.Fatalf("%d %s", status, body)
			}
			got := received(dt.up)
			if strings.Contains(got, "eve@example.com") || !strings.Contains(got, "[REDACTED:email]") {
				t.Errorf("the server got %s", got)
			}
		})
	}
}

// TestEveryAgentMessageIsBlocked: with block: [email], whatever an agent
// sends with an address is refused (-32063) and the server gets nothing
// of it (an answer to the server's request becomes an error, so that the
// server does not wait); the refusal is in the audit trail.
func TestEveryAgentMessageIsBlocked(t *testing.T) {
	for _, tc := range agentMessages {
		t.Run(tc.note, func(t *testing.T) {
			dt, trail := newGovernTest(t, true, config.Rate{})
			status, body, _ := dt.post(tc.body)
			got := received(dt.up)
			if strings.Contains(got, "eve@example.com") {
				t.Errorf("the server got %s", got)
			}
			if strings.HasPrefix(tc.body, `{"jsonrpc":"2.0","id":"s-1","result"`) {
				// An answer to the server's request: the server gets an
				// error in its place (it must not wait), the POST is taken.
				if status != http.StatusAccepted || !strings.Contains(got, `"id":"s-1","error":{"code":-32063`) {
					t.Errorf("%d; the server got %s", status, got)
				}
			} else {
				if c := code(t, body); c != codeBlocked || (!tc.isRequest && status != http.StatusBadRequest) {
					t.Errorf("%d %s, want the error %d", status, body, codeBlocked)
				}
				if got != "" {
					t.Errorf("the server got %s", got)
				}
			}
			kind := KindCall
			if !tc.isRequest {
				kind = KindMessage
			}
			recs := trail.kind(kind)
			if len(recs) != 1 || testkit.SummaryOf(recs[0])["blocked"] != "email" {
				t.Errorf("audit %+v", recs)
			}
		})
	}
}

// TestNotificationsAreMetered: notifications spend the agent's rate_limit
// like its calls: past it, they are refused (429, Retry-After) and not
// passed on, and a call is refused too.
func TestNotificationsAreMetered(t *testing.T) {
	dt, trail := newGovernTest(t, false, config.Rate{N: 5, Period: time.Hour})
	// initialize spent one.
	passed, limited := 0, 0
	for range 50 {
		status, body, _ := dt.post(`{"jsonrpc":"2.0","method":"notifications/progress","params":{"progressToken":"p","progress":1}}`)
		switch status {
		case http.StatusAccepted:
			passed++
		case http.StatusTooManyRequests:
			limited++
			if code(t, body) != codeRateLimited {
				t.Fatalf("refusal %s", body)
			}
		default:
			t.Fatalf("%d %s", status, body)
		}
	}
	if passed != 4 || limited != 46 {
		t.Errorf("%d passed, %d limited; want 4 and 46", passed, limited)
	}
	dt.up.mu.Lock()
	got := len(dt.up.got)
	dt.up.mu.Unlock()
	if got != 4 {
		t.Errorf("the server got %d notifications", got)
	}
	if _, body, _ := dt.post(readCall); code(t, body) != codeRateLimited {
		t.Errorf("a call past the limit: %s", body)
	}
	if n := len(trail.kind(KindMessage)); n != 50 {
		t.Errorf("%d mcp.message records for 50 notifications (the guard in front of the trail summarizes them)", n)
	}
}

// TestRefusedInitializeIsAudited: an initialize the gateway refuses (its
// clientInfo carries a blocked value, or the agent is past its limit) is
// in the trail as an mcp.call entry saying why, before the refusal is
// answered; no session is opened.
func TestRefusedInitializeIsAudited(t *testing.T) {
	const blockedInit = `{"jsonrpc":"2.0","id":9,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"eve@example.com","version":"1"}}}`
	const plainInit = `{"jsonrpc":"2.0","id":9,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`
	for _, tc := range []struct {
		note     string
		block    bool
		rate     config.Rate
		body     string
		status   int
		decision string
	}{
		{"blocked", true, config.Rate{}, blockedInit, http.StatusBadRequest, "blocked"},
		{"limited", false, config.Rate{N: 1, Period: time.Hour}, plainInit, http.StatusTooManyRequests, "limited"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			dt, trail := newGovernTest(t, tc.block, tc.rate) // its own initialize passed (and spent the one request)
			before := len(trail.kind(KindCall))
			dt.sess = "" // a new session: initialize goes alone
			status, body, h := dt.post(tc.body)
			if status != tc.status || h.Get("Mcp-Session-Id") != "" {
				t.Fatalf("%d %s (session %q), want %d and no session", status, body, h.Get("Mcp-Session-Id"), tc.status)
			}
			recs := trail.kind(KindCall)
			if len(recs) != before+1 {
				t.Fatalf("%d mcp.call entries after the refused initialize, want %d", len(recs), before+1)
			}
			sum := testkit.SummaryOf(recs[len(recs)-1])
			if sum["method"] != "initialize" || sum["decision"] != tc.decision || sum["server"] != "files" {
				t.Errorf("entry %+v", sum)
			}
			if strings.Contains(fmt.Sprint(sum), "eve@example.com") {
				t.Errorf("the entry holds the blocked value: %+v", sum)
			}
		})
	}
}
