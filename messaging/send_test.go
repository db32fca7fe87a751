package messaging

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/testkit"
	"github.com/sacpgw/gateway/mailbox"
	"github.com/sacpgw/gateway/policy"
	"github.com/sacpgw/gateway/registry"
)

func aclRequest(sender, receiver, action string) string {
	return `{"message_type":"request","sender_id":"` + sender + `","receiver_id":"` + receiver + `","workflow_id":"wf_x","action":"` + action + `","payload":{}}`
}

// TestSendRefusals: every refusal of POST /relay/messages is in OpenAI's
// error shape with its status, code and param; nothing reaches any
// recipient; each is audited as message.reject with the reason and the
// checks that ran, and counted as refused.
func TestSendRefusals(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	big := `{"message_type":"notification","sender_id":"small","receiver_id":"orch","workflow_id":"wf_x","action":"ping","payload":{"blob":"` + strings.Repeat("x", 2000) + `"}}`
	tests := []struct {
		name, agent, body string
		status            int
		code, param, msg  string
		// check is the audit check that refused it, when one did.
		check, verdict string
	}{
		{"not JSON", "orch", `{"message_type":`, 400, "invalid_request", "message_type", "Invalid envelope", "", ""},
		{"empty body", "orch", ``, 400, "invalid_request", "", "", "", ""},
		{"unknown field", "orch", `{"message_type":"request","sender_id":"orch","receiver_id":"planner","action":"x","extra":1}`, 400, "invalid_request", "extra", "", "", ""},
		{"bad priority", "orch", `{"message_type":"request","sender_id":"orch","receiver_id":"planner","action":"x","priority":"urgent"}`, 400, "invalid_request", "priority", "", "", ""},
		{"bad id characters", "orch", `{"message_type":"request","sender_id":"orch","receiver_id":"planner","action":"x","message_id":"a b"}`, 400, "invalid_request", "message_id", "", "", ""},
		{"request without recipient", "orch", `{"message_type":"request","sender_id":"orch","action":"x"}`, 400, "invalid_request", "receiver_id", "", "", ""},
		{"stale timestamp", "orch", `{"message_type":"request","sender_id":"orch","receiver_id":"planner","action":"x","timestamp":"2001-01-01T00:00:00Z"}`, 400, "invalid_request", "timestamp", "away from the gateway's clock", "", ""},
		{"timestamp in the future", "orch", `{"message_type":"request","sender_id":"orch","receiver_id":"planner","action":"x","timestamp":"2999-01-01T00:00:00Z"}`, 400, "invalid_request", "timestamp", "", "", ""},
		{"oversize body", "small", big, 413, "request_too_large", "", "", "", ""},
		{"spoofed sender", "planner", aclRequest("orch", "executor", "run"), 403, "policy_denied", "", `sender "orch" is not the authenticated agent "planner"`, "sender", "spoofed"},
		{"unknown recipient", "orch", aclRequest("orch", "nobody_here", "plan"), 404, "recipient_not_found", "receiver_id", "nobody_here", "recipient", "unknown"},
		{"unknown SAM recipient", "orch", `{"correlation_id":"c1","sender":{"agent_id":"orch"},"recipient":{"agent_id":"nobody_here"},"message_type":"REQUEST","payload":{"action":"plan"}}`, 404, "recipient_not_found", "recipient.agent_id", "", "recipient", "unknown"},
		{"recipient without endpoint", "orch", aclRequest("orch", "silent", "plan"), 422, "recipient_unreachable", "receiver_id", `"silent" has no endpoint`, "recipient", "no_endpoint"},
		{"SAM recipient without endpoint", "orch", `{"correlation_id":"c1","sender":{"agent_id":"orch"},"recipient":{"agent_id":"silent"},"message_type":"EVENT","payload":{"action":"plan"}}`, 422, "recipient_unreachable", "recipient.agent_id", "", "recipient", "no_endpoint"},
		{"action not granted", "planner", aclRequest("planner", "orch", "delete_everything"), 403, "policy_denied", "", "RBAC: ", "", ""},
		{"recipient not granted", "planner", aclRequest("planner", "executor", "status"), 403, "policy_denied", "", "RBAC: ", "", ""},
		{"agent without rules", "silent", aclRequest("silent", "orch", "ping"), 403, "policy_denied", "", "RBAC: ", "", ""},
		{"broadcast not granted", "planner", `{"message_type":"notification","sender_id":"planner","workflow_id":"wf_x","action":"status"}`, 403, "policy_denied", "", "RBAC: ", "", ""},
		{"message to itself", "orch", aclRequest("orch", "orch", "plan"), 403, "policy_denied", "", `Policy: agent "orch" may not send a message to itself`, "", ""},
		{"plan the recipient cannot run", "orch", `{"message_type":"request","sender_id":"orch","receiver_id":"planner","action":"x","payload":{"plan":[["search","H_API",{}]]}}`, 403, "policy_denied", "", `does not support verb "search"`, "", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := len(h.records(KindMessageReject))
			w := h.send(tc.agent, tc.body)
			e := decodeError(t, w, tc.status, tc.code)
			if !strings.Contains(e.Error.Message, tc.msg) {
				t.Errorf("message %q, want it to contain %q", e.Error.Message, tc.msg)
			}
			if got := param(e); got != tc.param {
				t.Errorf("param %q, want %q", got, tc.param)
			}
			rs := h.records(KindMessageReject)
			if len(rs) != before+1 {
				t.Fatalf("%d message.reject entries, want %d", len(rs), before+1)
			}
			sum := testkit.SummaryOf(rs[len(rs)-1])
			if sum["status"] != tc.status || sum["error_code"] != tc.code || sum["reason"] != e.Error.Message || rs[len(rs)-1].AgentID != tc.agent {
				t.Errorf("message.reject %+v", rs[len(rs)-1])
			}
			if tc.check != "" {
				if got := sum["checks"].(map[string]any)[tc.check]; got != tc.verdict {
					t.Errorf("checks.%s = %v, want %q", tc.check, got, tc.verdict)
				}
			}
		})
	}
	for id, p := range h.peers {
		if n := len(p.Received()); n != 0 {
			t.Errorf("%s received %d refused messages", id, n)
		}
	}
	if n := len(h.records(KindMessage)); n != 0 {
		t.Errorf("%d refused messages audited as accepted", n)
	}
	if st := h.svc.Stats(); st.Refused != int64(len(tests)) || st.Accepted != 0 {
		t.Errorf("stats %+v, want %d refused", st, len(tests))
	}
}

// TestRBACRefusalRecordsTheCheck: the casbin verdict and the policy's are
// in the reject entry, so an auditor sees which check refused.
func TestRBACRefusalRecordsTheCheck(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	decodeError(t, h.send("planner", aclRequest("planner", "orch", "delete_everything")), 403, "policy_denied")
	sum := h.trail.Last(KindMessageReject)
	rbac, _ := sum["checks"].(map[string]any)["rbac"].(map[string]any)
	if rbac == nil || rbac["allowed"] != false || str(rbac["reason"]) == "" {
		t.Errorf("rbac check %v", sum["checks"])
	}
	if sum["message_type"] != "request" || sum["recipient"] != "orch" || sum["action"] != "delete_everything" || sum["format"] != "acl" {
		t.Errorf("summary %v", sum)
	}
	decodeError(t, h.send("orch", aclRequest("orch", "orch", "plan")), 403, "policy_denied")
	pol, _ := h.trail.Last(KindMessageReject)["checks"].(map[string]any)["policy"].(map[string]any)
	if pol == nil || pol["deny"] != true || str(pol["decision_id"]) == "" {
		t.Errorf("policy check %v", pol)
	}
}

// TestDuplicateMessageID: a message_id its sender already used in the
// thread is 409 duplicate_message and delivered once; another thread, or
// another sender's message with the same id, is not a repeat.
func TestDuplicateMessageID(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.run()
	event := func(sender, receiver, wf string) string {
		return `{"message_id":"m_dup","message_type":"notification","sender_id":"` + sender + `","receiver_id":"` + receiver + `","workflow_id":"` + wf + `","action":"status"}`
	}
	if w := h.send("orch", event("orch", "planner", "wf_d")); w.Code != http.StatusAccepted {
		t.Fatalf("first: %d %s", w.Code, w.Body)
	}
	e := decodeError(t, h.send("orch", event("orch", "planner", "wf_d")), http.StatusConflict, "duplicate_message")
	if param(e) != "message_id" || !strings.Contains(e.Error.Message, `"m_dup"`) {
		t.Errorf("duplicate: %+v", e.Error)
	}
	if sum := h.trail.Last(KindMessageReject); sum["checks"].(map[string]any)["repeat"] != "seen" {
		t.Errorf("reject entry %v", sum)
	}
	if w := h.send("orch", event("orch", "planner", "wf_other")); w.Code != http.StatusAccepted {
		t.Errorf("same id in another workflow: %d %s", w.Code, w.Body)
	}
	if w := h.send("planner", event("planner", "orch", "wf_d")); w.Code != http.StatusAccepted {
		t.Errorf("same id from another sender: %d %s", w.Code, w.Body)
	}
	// Without a chosen id the gateway assigns a fresh one each time.
	for range 2 {
		if w := h.send("orch", `{"message_type":"notification","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_d","action":"status"}`); w.Code != http.StatusAccepted {
			t.Errorf("no message_id: %d %s", w.Code, w.Body)
		}
	}
	h.peers["planner"].WaitFor(4)
	h.peers["orch"].WaitFor(1)
	if got := h.thread(mailbox.KeyWorkflow, "wf_d"); len(got) != 4 {
		t.Errorf("thread holds %d messages, want 4", len(got))
	}
}

// TestRedaction: with protocol.redaction.messages, the payload's values
// are masked before they are relayed, recorded or answered, the audit
// keeps the hash of the bytes received and the counts, and a blocking
// detector's value refuses the message without echoing it.
func TestRedaction(t *testing.T) {
	h := newHarness(t, harnessOpts{protocolExtra: "  redaction:\n    messages: true\n    block: [ssn]\n"})
	h.peers["planner"].Set(testkit.ReplyWith(func(req map[string]any) string {
		return `{"message_type":"response","sender_id":"planner","receiver_id":"orch","in_reply_to":"` + str(req["message_id"]) + `","action":"plan_complete","payload":{"owner":"carol@example.org","n":42}}`
	}))
	req := `{"message_type":"request","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_red","action":"plan","payload":{"customer":{"email":"alice@example.com","limit":100000}}}`
	w := h.send("orch", req)
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	got := string(h.peers["planner"].Received()[0].Body)
	if strings.Contains(got, "alice@example.com") || !strings.Contains(got, `"email":"[REDACTED:email]"`) || !strings.Contains(got, `"limit":100000`) {
		t.Errorf("recipient got %s", got)
	}
	if p := jsonBody(t, w)["payload"].(map[string]any); p["owner"] != "[REDACTED:email]" || p["n"] != float64(42) {
		t.Errorf("requester got %v", p)
	}
	for _, e := range h.thread(mailbox.KeyWorkflow, "wf_red") {
		if strings.Contains(string(e.Envelope), "@example") {
			t.Errorf("the history holds a redacted value: %s", e.Envelope)
		}
	}
	rec := h.records(KindMessage)[0]
	red, _ := testkit.SummaryOf(rec)["checks"].(map[string]any)["redaction"].(map[string]any)
	if rec.PayloadSHA256 != sha256Hex([]byte(req)) || red["verdict"] != "pass" || fmt.Sprint(red["counts"]) != "map[email:1]" {
		t.Errorf("audit %+v", rec)
	}
	ssn := `{"message_type":"notification","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_red","action":"x","payload":{"ssn":"123-45-6789"}}`
	e := decodeError(t, h.send("orch", ssn), http.StatusBadRequest, "content_filter")
	if param(e) != "payload" || strings.Contains(e.Error.Message, "123-45") {
		t.Errorf("blocked value: %+v", e.Error)
	}
	// A blocked answer never reaches the requester: the gateway's ERROR does.
	h.peers["planner"].Set(testkit.ReplyWith(func(req map[string]any) string {
		return `{"message_type":"response","sender_id":"planner","receiver_id":"orch","in_reply_to":"` + str(req["message_id"]) + `","action":"plan_complete","payload":{"ssn":"123-45-6789"}}`
	}))
	w = h.send("orch", `{"message_type":"request","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_red","action":"plan"}`)
	if w.Code != http.StatusBadGateway || strings.Contains(w.Body.String(), "123-45") {
		t.Errorf("blocked answer: %d %s", w.Code, w.Body)
	}
}

// TestRedactionOffByDefault: without protocol.redaction.messages agents
// exchange what they sent, and the audit says redaction was not configured.
func TestRedactionOffByDefault(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	req := `{"message_type":"request","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_plain","action":"plan","payload":{"email":"alice@example.com"}}`
	if w := h.send("orch", req); w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if got := string(h.peers["planner"].Received()[0].Body); !strings.Contains(got, "alice@example.com") {
		t.Errorf("recipient got %s", got)
	}
	if c := testkit.SummaryOf(h.records(KindMessage)[0])["checks"].(map[string]any); c["redaction"] != "not_configured" || c["sender"] != "pass" || c["recipient"] != "pass" {
		t.Errorf("checks %v", c)
	}
}

// failingDecider is a policy engine that cannot decide (a timeout).
type failingDecider struct{}

func (failingDecider) MessagesDeny(context.Context, map[string]any) (policy.ChatDecision, error) {
	return policy.ChatDecision{}, context.DeadlineExceeded
}

// TestPolicyUndecidedFailsClosed: a policy that does not decide refuses
// the message (504), nothing is delivered.
func TestPolicyUndecidedFailsClosed(t *testing.T) {
	h := newHarness(t, harnessOpts{deps: func(d *Deps) { d.Policy = failingDecider{} }})
	e := decodeError(t, h.send("orch", aclRequest("orch", "planner", "plan")), http.StatusGatewayTimeout, "upstream_error")
	if !strings.Contains(e.Error.Message, "did not decide") {
		t.Errorf("%+v", e.Error)
	}
	if n := len(h.peers["planner"].Received()); n != 0 {
		t.Errorf("delivered %d", n)
	}
}

// brokenHistory is a history whose store is down.
type brokenHistory struct{ err error }

func (b brokenHistory) Append(context.Context, ...mailbox.Entry) error { return b.err }
func (b brokenHistory) List(context.Context, string, string, int) ([]mailbox.Entry, error) {
	return nil, b.err
}
func (b brokenHistory) Seen(context.Context, string, string, string, string) (bool, error) {
	return false, b.err
}
func (b brokenHistory) Retract(context.Context, ...mailbox.Entry) error { return b.err }
func (b brokenHistory) Suspend(context.Context, mailbox.Suspension) (mailbox.Suspension, bool, error) {
	return mailbox.Suspension{}, false, b.err
}
func (b brokenHistory) Suspended(context.Context, string, string) (mailbox.Suspension, bool, error) {
	return mailbox.Suspension{}, false, b.err
}
func (b brokenHistory) Resume(context.Context, string, string, string) (bool, error) {
	return false, b.err
}

// TestHistoryDown: a history that is down is 503 state_unavailable with
// Retry-After; nothing is delivered or audited as accepted.
func TestHistoryDown(t *testing.T) {
	down := fmt.Errorf("%w: redis: connection refused", apierror.ErrStateUnavailable)
	h := newHarness(t, harnessOpts{deps: func(d *Deps) { d.History = brokenHistory{down} }})
	h.run()
	for _, body := range []string{
		`{"message_id":"m1","message_type":"request","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_h","action":"plan"}`,
		`{"message_id":"m2","message_type":"notification","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_h","action":"plan"}`,
	} {
		w := h.send("orch", body)
		decodeError(t, w, http.StatusServiceUnavailable, "state_unavailable")
		if w.Header().Get("Retry-After") == "" {
			t.Errorf("no Retry-After")
		}
	}
	if n := len(h.records(KindMessage)); n != 0 {
		t.Errorf("%d messages audited as accepted", n)
	}
	if n, _ := h.svc.QueueLen(context.Background()); n != 0 || len(h.peers["planner"].Received()) != 0 {
		t.Errorf("queued %d, delivered %d", n, len(h.peers["planner"].Received()))
	}
	// A message without a thread needs no history.
	if w := h.send("orch", `{"message_type":"request","sender_id":"orch","receiver_id":"planner","action":"plan"}`); w.Code != http.StatusOK {
		t.Errorf("message without a thread: %d %s", w.Code, w.Body)
	}
	// The thread cannot be read either.
	decodeError(t, h.historyOf("orch", "workflow_id=wf_h"), http.StatusServiceUnavailable, "state_unavailable")
}

// TestHistoryFull: a thread at its capacity is 503 history_full; the
// message is neither queued nor delivered.
func TestHistoryFull(t *testing.T) {
	h := newHarness(t, harnessOpts{deps: func(d *Deps) {
		d.History = mailbox.NewMemoryHistory(mailbox.HistoryOptions{MaxPerThread: 2})
	}})
	event := `{"message_type":"notification","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_full","action":"status"}`
	for range 2 {
		if w := h.send("orch", event); w.Code != http.StatusAccepted {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	}
	e := decodeError(t, h.send("orch", event), http.StatusServiceUnavailable, "history_full")
	if !strings.Contains(e.Error.Message, "start a new workflow") {
		t.Errorf("%+v", e.Error)
	}
	decodeError(t, h.send("orch", `{"message_type":"request","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_full","action":"plan"}`), http.StatusServiceUnavailable, "history_full")
	if n, _ := h.svc.QueueLen(context.Background()); n != 2 {
		t.Errorf("%d queued, want the 2 accepted", n)
	}
	if n := len(h.peers["planner"].Received()); n != 0 {
		t.Errorf("the REQUEST was delivered %d times", n)
	}
}

// TestQueueFull: over queue_capacity a message is refused with 503
// queue_full and Retry-After, and the refusal is audited.
func TestQueueFull(t *testing.T) {
	h := newHarness(t, harnessOpts{messagingExtra: "  queue_capacity: 2\n"})
	for i := range 2 {
		if w := h.send("orch", fmt.Sprintf(`{"message_type":"notification","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_q%d","action":"status"}`, i)); w.Code != http.StatusAccepted {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	}
	w := h.send("orch", `{"message_type":"notification","sender_id":"orch","workflow_id":"wf_q","action":"status"}`)
	e := decodeError(t, w, http.StatusServiceUnavailable, "queue_full")
	if w.Header().Get("Retry-After") != "1" || !strings.Contains(e.Error.Message, "0 of 2 recipients") {
		t.Errorf("%v %+v", w.Header(), e.Error)
	}
	d := h.records(KindMessageDelivery)
	if len(d) != 1 || testkit.SummaryOf(d[0])["status"] != "not_queued" {
		t.Errorf("delivery entries %+v", d)
	}
}

// failingQueue refuses every push with an error other than full.
type failingQueue struct{ mailbox.Queue }

func (failingQueue) Push(context.Context, mailbox.Delivery) (mailbox.Delivery, error) {
	return mailbox.Delivery{}, errors.New("queue backend down")
}

// TestQueueDown: a queue that fails is a 500 in OpenAI's shape without
// the backend's words.
func TestQueueDown(t *testing.T) {
	h := newHarness(t, harnessOpts{deps: func(d *Deps) { d.Queue = failingQueue{d.Queue} }})
	e := decodeError(t, h.send("orch", `{"message_type":"notification","sender_id":"orch","receiver_id":"planner","action":"status"}`), http.StatusInternalServerError, "internal_error")
	if strings.Contains(e.Error.Message, "backend") {
		t.Errorf("internal detail leaked: %s", e.Error.Message)
	}
}

// brokenStore is a registry store that cannot be read.
type brokenStore struct{}

func (brokenStore) Add(context.Context, registry.Entry) error { return errors.New("store down") }
func (brokenStore) Remove(context.Context, string) error      { return errors.New("store down") }
func (brokenStore) SetLastUsed(context.Context, string, time.Time) error {
	return errors.New("store down")
}
func (brokenStore) PutPending(context.Context, string, string, time.Time) error {
	return errors.New("store down")
}
func (brokenStore) TakePending(context.Context, string, time.Time) (string, bool, error) {
	return "", false, errors.New("store down")
}
func (brokenStore) List(context.Context) ([]registry.Entry, error) {
	return nil, errors.New("store down")
}

// TestRegistryStoreDown: the configured agents still receive messages
// while the store of spawned agents is down.
func TestRegistryStoreDown(t *testing.T) {
	h := newHarness(t, harnessOpts{deps: func(d *Deps) {
		reg, err := registry.New(d.Config, brokenStore{})
		if err != nil {
			t.Fatal(err)
		}
		d.Registry = reg
	}})
	if w := h.send("orch", aclRequest("orch", "planner", "plan")); w.Code != http.StatusOK {
		t.Errorf("configured recipient: %d %s", w.Code, w.Body)
	}
	w := h.send("orch", `{"message_type":"notification","sender_id":"orch","workflow_id":"wf_b","action":"status"}`)
	if w.Code != http.StatusAccepted || fmt.Sprint(jsonBody(t, w)["recipients"]) != "[executor planner]" {
		t.Errorf("broadcast: %d %s", w.Code, w.Body)
	}
	// An unknown name cannot be told apart from a spawned one: the
	// gateway does not claim it does not exist.
	decodeError(t, h.send("orch", aclRequest("orch", "spawned_1", "plan")), http.StatusInternalServerError, "internal_error")
}

// TestAuditDownFailClosed: with fail_mode closed an accepted message whose
// entry cannot be written is 503 audit_unavailable; a queued one is not
// queued.
func TestAuditDownFailClosed(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.trail.SetFail(true)
	decodeError(t, h.send("orch", `{"message_type":"notification","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_a","action":"status"}`), http.StatusServiceUnavailable, "audit_unavailable")
	if n, _ := h.svc.QueueLen(context.Background()); n != 0 {
		t.Errorf("%d queued without an audit entry", n)
	}
	decodeError(t, h.send("orch", aclRequest("orch", "planner", "plan")), http.StatusServiceUnavailable, "audit_unavailable")
}

// TestAuditDownFailOpen: with fail_mode open the traffic goes on while
// the trail is down.
func TestAuditDownFailOpen(t *testing.T) {
	h := newHarness(t, harnessOpts{failOpen: true})
	h.trail.SetFail(true)
	if w := h.send("orch", aclRequest("orch", "planner", "plan")); w.Code != http.StatusOK {
		t.Errorf("%d %s", w.Code, w.Body)
	}
	if w := h.send("orch", `{"message_type":"notification","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_a","action":"status"}`); w.Code != http.StatusAccepted {
		t.Errorf("%d %s", w.Code, w.Body)
	}
}

// TestRetryAfterAuditOutageIsDelivered: a client whose message was
// refused with 503 audit_unavailable (nothing queued) retries it with the
// same message_id once the trail is back; the message must then be
// delivered, not refused as a repeat of one that "already arrived".
func TestRetryAfterAuditOutageIsDelivered(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.run()
	event := `{"message_id":"m_retry","message_type":"notification","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_retry","action":"status"}`
	h.trail.SetFail(true)
	decodeError(t, h.send("orch", event), http.StatusServiceUnavailable, "audit_unavailable")
	h.trail.SetFail(false)
	if w := h.send("orch", event); w.Code != http.StatusAccepted {
		t.Fatalf("retry after the outage: %d %s", w.Code, w.Body)
	}
	h.peers["planner"].WaitFor(1)
	// The thread lists the message once: the refused attempt left it.
	if got := ids(t, h.historyOf("orch", "workflow_id=wf_retry")); got != "m_retry" {
		t.Errorf("thread lists %q, want the message once", got)
	}
}

// TestRetryAfterQueueFullIsDelivered: 503 queue_full says "Retry later";
// a client that retries the same message (same message_id) once there is
// room must get it delivered.
func TestRetryAfterQueueFullIsDelivered(t *testing.T) {
	h := newHarness(t, harnessOpts{messagingExtra: "  queue_capacity: 1\n"})
	if w := h.send("orch", `{"message_type":"notification","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_f1","action":"status"}`); w.Code != http.StatusAccepted {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	event := `{"message_id":"m_full","message_type":"notification","sender_id":"orch","receiver_id":"executor","workflow_id":"wf_f2","action":"status"}`
	decodeError(t, h.send("orch", event), http.StatusServiceUnavailable, "queue_full")
	h.run()
	h.peers["planner"].WaitFor(1)
	if !eventually(func() bool { n, _ := h.svc.QueueLen(context.Background()); return n == 0 }) {
		t.Fatal("the queue did not drain")
	}
	if w := h.send("orch", event); w.Code != http.StatusAccepted {
		t.Fatalf("retry once there is room: %d %s", w.Code, w.Body)
	}
	h.peers["executor"].WaitFor(1)
	if got := ids(t, h.historyOf("orch", "workflow_id=wf_f2")); got != "m_full" {
		t.Errorf("thread lists %q, want the message once", got)
	}
}
