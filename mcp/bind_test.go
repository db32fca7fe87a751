package mcp

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sacpgw/gateway/internal/escalation"
	"github.com/sacpgw/gateway/policy"
)

// approvalTest is a replica whose policy escalates every call, a person
// (approve) who approves the last escalation, and the server behind it.
type approvalTest struct {
	*replica
	up     *fakeServer
	opener *fakeOpener
	sess   string
}

func newApprovalTest(t *testing.T) *approvalTest {
	up := &fakeServer{tools: `[{"name":"read_file","inputSchema":{"type":"object"}}]`}
	upSrv := httptest.NewServer(up)
	t.Cleanup(upSrv.Close)
	opener := &fakeOpener{}
	rp := newReplica(t, upSrv.URL, fakePolicy{policy.MCPDecision{Decision: policy.MCPEscalate, Reason: "a person decides"}},
		opener, NewMemoryGrants(), NewMemorySessions())
	return &approvalTest{replica: rp, up: up, opener: opener, sess: rp.initialize("a1")}
}

// call sends a tools/call of read_file with params' arguments and _meta
// (a JSON text of its members after the name) and returns its error code.
func (at *approvalTest) call(params string) (int, string) {
	at.t.Helper()
	_, body, _ := at.send(http.MethodPost, "a1", at.sess, `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"read_file",`+params+`}}`)
	return code(at.t, body), body
}

// approve approves the last escalation as a person would.
func (at *approvalTest) approve() review {
	at.t.Helper()
	id, req := at.opener.last()
	if err := at.door.Resolve(context.Background(), escalation.Decided{ID: id, Type: req.Type, AgentID: req.AgentID, Approved: true, Content: req.Content}); err != nil {
		at.t.Fatal(err)
	}
	r, err := readReview(req.Content)
	if err != nil {
		at.t.Fatal(err)
	}
	return r
}

// ran are the tools/call bodies the server received.
func (at *approvalTest) ran() []string {
	at.up.mu.Lock()
	defer at.up.mu.Unlock()
	var calls []string
	for _, b := range at.up.got {
		if strings.Contains(b, `"tools/call"`) {
			calls = append(calls, b)
		}
	}
	return calls
}

// TestApprovalCannotBeSpentOnAnotherCall: once a person approved a call,
// a call the server would receive differently does not pass on that
// approval: numbers RFC 8785 would round (so two calls share a hash) are
// refused before anyone is asked, and a _meta added after the approval is
// another call.
func TestApprovalCannotBeSpentOnAnotherCall(t *testing.T) {
	cases := []struct {
		note, approved, sent string
	}{
		{"an integer past 2^53", `"arguments":{"n":9007199254740992}`, `"arguments":{"n":9007199254740993}`},
		{"a decimal a double rounds", `"arguments":{"amount":0.1}`, `"arguments":{"amount":0.10000000000000000001}`},
		{"a _meta added after the approval", `"arguments":{"path":"a"}`, `"arguments":{"path":"a"},"_meta":{"run_as":"root"}`},
		{"a _meta changed after the approval", `"arguments":{"path":"a"},"_meta":{"progressToken":1}`, `"arguments":{"path":"a"},"_meta":{"progressToken":1,"x":2}`},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			at := newApprovalTest(t)
			if got, body := at.call(tc.approved); got == codeEscalated {
				at.approve()
			} else if got != codeInvalidParams {
				t.Fatalf("the first call: %s", body)
			}
			got, body := at.call(tc.sent)
			if got == 0 || len(at.ran()) != 0 {
				t.Fatalf("the other call ran on the approval: %s (the server got %q)", body, at.ran())
			}
			// The approval, if any, is still there for the call it approved.
			if got, body := at.call(tc.approved); got == 0 && len(at.ran()) != 1 {
				t.Errorf("the approved call: %s, the server got %q", body, at.ran())
			}
		})
	}
}

// TestApprovedBytesAreForwarded: the person is shown the call exactly as
// the server receives it (arguments and _meta redacted, in RFC 8785 form),
// and the approved call forwards exactly those bytes.
func TestApprovedBytesAreForwarded(t *testing.T) {
	at := newApprovalTest(t)
	params := `"arguments":{"z":1E2,"amount":0.1,"n":-9007199254740991,"s":"caf\u00e9"},"_meta":{"progressToken":"p1"}`
	if got, body := at.call(params); got != codeEscalated {
		t.Fatalf("not escalated: %s", body)
	}
	r := at.approve()
	const wantArgs, wantMeta = `{"amount":0.1,"n":-9007199254740991,"s":"café","z":100}`, `{"progressToken":"p1"}`
	if string(r.Arguments) != wantArgs || string(r.Meta) != wantMeta {
		t.Errorf("the person was shown %s and _meta %s", r.Arguments, r.Meta)
	}
	if got, body := at.call(params); got != 0 {
		t.Fatalf("the approved call: %s", body)
	}
	ran := at.ran()
	if len(ran) != 1 {
		t.Fatalf("the server got %q", ran)
	}
	var m struct {
		Params struct {
			Arguments jsontext.Value `json:"arguments"`
			Meta      jsontext.Value `json:"_meta"`
		} `json:"params"`
	}
	if err := json.Unmarshal([]byte(ran[0]), &m); err != nil {
		t.Fatal(err)
	}
	if string(m.Params.Arguments) != wantArgs || string(m.Params.Meta) != wantMeta {
		t.Errorf("the server got %s", ran[0])
	}
}

// TestNumbersThatWouldChangeAreRefused: a call whose canonical form would
// show the person (and send the server) another number than the agent
// wrote is refused, and no person is asked.
func TestNumbersThatWouldChangeAreRefused(t *testing.T) {
	at := newApprovalTest(t)
	for _, params := range []string{
		`"arguments":{"id":12345678901234567891}`,
		`"arguments":{"n":9007199254740992}`,
		`"arguments":{"n":-9007199254740993}`,
		`"arguments":{"a":[{"amount":0.10000000000000000001}]}`,
		`"arguments":{"big":1e400}`,
		`"arguments":{"x":1},"_meta":{"progressToken":9007199254740993}`,
	} {
		if got, body := at.call(params); got != codeInvalidParams || !strings.Contains(body, "RFC 8785") {
			t.Errorf("%s: %s", params, body)
		}
	}
	if len(at.opener.reqs) != 0 || len(at.ran()) != 0 {
		t.Errorf("%d reviews opened, %d calls ran", len(at.opener.reqs), len(at.ran()))
	}
}
