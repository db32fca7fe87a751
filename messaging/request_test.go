package messaging

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/testkit"
	"github.com/sacpgw/gateway/mailbox"
)

// TestRequestRelayed: a REQUEST is posted to the recipient's endpoint with
// the envelope, the sender and the request id (never the sender's
// credentials), and the recipient's RESPONSE is the answer; both are
// audited with the hashes of their bytes and kept in the thread.
func TestRequestRelayed(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	answer := ""
	h.peers["planner"].Set(testkit.ReplyWith(func(req map[string]any) string {
		answer = `{"message_type":"response","sender_id":"planner","receiver_id":"orch","in_reply_to":"` + str(req["message_id"]) + `","workflow_id":"wf_1","action":"plan_complete","payload":{"tasks":["a","b"]}}`
		return answer
	}))
	req := `{"message_id":"m_req","message_type":"request","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_1","action":"plan_workflow","priority":"high","payload":{"goal":"trip"}}`
	r, ex := h.request(http.MethodPost, "/relay/messages", "orch", req)
	r.Header.Set("Authorization", "Bearer tok-orch")
	w := httptest.NewRecorder()
	h.svc.Send(w, r)
	if w.Code != http.StatusOK || w.Header().Get("X-Escalation-Id") != "" {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	resp := jsonBody(t, w)
	if resp["message_type"] != "response" || resp["sender_id"] != "planner" || resp["in_reply_to"] != "m_req" || resp["workflow_id"] != "wf_1" {
		t.Errorf("answer %v", resp)
	}
	got := h.peers["planner"].Received()
	if len(got) != 1 {
		t.Fatalf("recipient got %d messages", len(got))
	}
	delivered := decode(t, got[0].Body)
	if delivered["message_id"] != "m_req" || delivered["sender_id"] != "orch" || delivered["action"] != "plan_workflow" || str(delivered["timestamp"]) == "" {
		t.Errorf("recipient got %s", got[0].Body)
	}
	hd := got[0].Header
	if hd.Get("X-Gateway-Sender") != "orch" || hd.Get("X-Request-Id") != ex.RequestID || hd.Get("Authorization") != "" || !strings.HasPrefix(hd.Get("Content-Type"), "application/json") {
		t.Errorf("recipient headers %v", hd)
	}
	// Audit: the request with the hash of the bytes received and of the
	// bytes relayed, the response with the hash of the recipient's bytes.
	reqRec := h.records(KindMessage)
	if len(reqRec) != 1 || reqRec[0].PayloadSHA256 != sha256Hex([]byte(req)) || testkit.SummaryOf(reqRec[0])["relayed_sha256"] != sha256Hex(got[0].Body) ||
		reqRec[0].AgentID != "orch" || reqRec[0].RequestID != ex.RequestID || testkit.SummaryOf(reqRec[0])["priority"] != "high" {
		t.Errorf("message.request %+v", reqRec)
	}
	respRec := h.records(KindMessageResponse)
	if len(respRec) != 1 || respRec[0].PayloadSHA256 != sha256Hex([]byte(answer)) || respRec[0].AgentID != "planner" ||
		testkit.SummaryOf(respRec[0])["request_message_id"] != "m_req" || testkit.SummaryOf(respRec[0])["attempts"] != 1 {
		t.Errorf("message.response %+v", respRec)
	}
	thread := h.thread(mailbox.KeyWorkflow, "wf_1")
	if len(thread) != 2 || thread[0].MessageID != "m_req" || thread[1].Sender != "planner" || thread[1].Recipients[0] != "orch" || thread[1].Origin != "agent" {
		t.Errorf("thread %+v", thread)
	}
	if st := h.svc.Stats(); st.Accepted != 1 || st.Delivered != 1 || st.Failed != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestRequestSAM: the SAM envelope; an empty 2xx answer is an ACK
// from the recipient, in the request's correlation.
func TestRequestSAM(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	w := h.send("orch", `{"correlation_id":"corr_1","sender":{"agent_id":"orch"},"recipient":{"agent_id":"executor"},"message_type":"REQUEST","payload":{"action":"search_hotels"},"metadata":{"timeout_ms":1500,"priority":"critical"}}`)
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	ack := jsonBody(t, w)
	if ack["message_type"] != "ACK" || ack["correlation_id"] != "corr_1" || ack["sender"].(map[string]any)["agent_id"] != "executor" {
		t.Errorf("ack %v", ack)
	}
	if n := len(h.thread(mailbox.KeyCorrelation, "corr_1")); n != 2 {
		t.Errorf("thread holds %d", n)
	}
}

// TestRequestRecipientAnswers: how the gateway treats what a recipient
// answers: a 5xx or a refused connection is retried, anything else that
// is not an envelope from the recipient to the requester is a failed
// delivery (502 in OpenAI's shape, the gateway's ERROR beside it, one
// sentence whatever happened, and an escalation).
func TestRequestRecipientAnswers(t *testing.T) {
	reply := func(req map[string]any, sender, to, inReplyTo string) string {
		if inReplyTo == "" {
			inReplyTo = str(req["message_id"])
		}
		return `{"message_type":"response","sender_id":"` + sender + `","receiver_id":"` + to + `","in_reply_to":"` + inReplyTo + `","action":"done"}`
	}
	tests := []struct {
		name string
		// handler answers attempt n (1-based).
		handler  func(n int, w http.ResponseWriter, req map[string]any)
		status   int
		attempts int
		cause    string
	}{
		{"response", func(_ int, w http.ResponseWriter, req map[string]any) {
			_, _ = w.Write([]byte(reply(req, "executor", "orch", "")))
		}, 200, 1, ""},
		{"no content is an ack", func(_ int, w http.ResponseWriter, _ map[string]any) { w.WriteHeader(http.StatusNoContent) }, 200, 1, ""},
		{"5xx then a response", func(n int, w http.ResponseWriter, req map[string]any) {
			if n < 3 {
				w.WriteHeader(http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte(reply(req, "executor", "orch", "")))
		}, 200, 3, ""},
		{"5xx every time", func(_ int, w http.ResponseWriter, _ map[string]any) {
			w.WriteHeader(http.StatusInternalServerError)
			_, _ = w.Write([]byte("stack trace: secret.internal:5432"))
		}, 502, 3, "bad_status"},
		{"4xx is not retried", func(_ int, w http.ResponseWriter, _ map[string]any) { w.WriteHeader(http.StatusForbidden) }, 502, 1, "bad_status"},
		{"redirect is not followed", func(_ int, w http.ResponseWriter, _ map[string]any) {
			w.Header().Set("Location", "http://169.254.169.254/latest/meta-data")
			w.WriteHeader(http.StatusFound)
		}, 502, 1, "redirect_refused"},
		{"not an envelope", func(_ int, w http.ResponseWriter, _ map[string]any) { _, _ = w.Write([]byte("<html>ok</html>")) }, 502, 1, "bad_answer"},
		{"answer over 4 MB", func(_ int, w http.ResponseWriter, _ map[string]any) {
			_, _ = w.Write([]byte(strings.Repeat(" ", maxAnswer+1)))
		}, 502, 1, "bad_answer"},
		{"answer from another agent", func(_ int, w http.ResponseWriter, req map[string]any) {
			_, _ = w.Write([]byte(reply(req, "planner", "orch", "")))
		}, 502, 1, "bad_answer"},
		{"answer to another agent", func(_ int, w http.ResponseWriter, req map[string]any) {
			_, _ = w.Write([]byte(reply(req, "executor", "planner", "")))
		}, 502, 1, "bad_answer"},
		{"answer to another request", func(_ int, w http.ResponseWriter, req map[string]any) {
			_, _ = w.Write([]byte(reply(req, "executor", "orch", "m_other")))
		}, 502, 1, "bad_answer"},
		{"an event is no answer", func(_ int, w http.ResponseWriter, _ map[string]any) {
			_, _ = w.Write([]byte(`{"message_type":"notification","sender_id":"executor","receiver_id":"orch","action":"done"}`))
		}, 502, 1, "bad_answer"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOpts{})
			var n atomic.Int32
			h.peers["executor"].Set(func(w http.ResponseWriter, _ *http.Request, body []byte) {
				var req map[string]any
				_ = json.Unmarshal(body, &req)
				tc.handler(int(n.Add(1)), w, req)
			})
			w := h.send("orch", `{"message_id":"m_1","message_type":"request","sender_id":"orch","receiver_id":"executor","workflow_id":"wf_a","action":"run"}`)
			if got := len(h.peers["executor"].Received()); got != tc.attempts {
				t.Errorf("%d attempts, want %d", got, tc.attempts)
			}
			if tc.status == http.StatusOK {
				if w.Code != http.StatusOK || jsonBody(t, w)["in_reply_to"] != "m_1" {
					t.Fatalf("%d %s", w.Code, w.Body)
				}
				if a := testkit.SummaryOf(h.records(KindMessageResponse)[0])["attempts"]; a != tc.attempts {
					t.Errorf("audited attempts %v", a)
				}
				return
			}
			checkFailedRequest(t, h, w, tc.status, "DELIVERY_FAILED", "The gateway could not deliver m_1 to executor.")
			if strings.Contains(w.Body.String(), "secret.internal") || strings.Contains(w.Body.String(), "169.254") {
				t.Errorf("the recipient's answer leaked to the sender: %s", w.Body)
			}
			d := h.records(KindMessageDelivery)
			if len(d) != 1 || testkit.SummaryOf(d[0])["cause"] != tc.cause || testkit.SummaryOf(d[0])["attempts"] != tc.attempts || testkit.SummaryOf(d[0])["status"] != "failed" {
				t.Errorf("message.delivery %+v", d)
			}
		})
	}
}

// checkFailedRequest checks the answer to a REQUEST that was not
// delivered: OpenAI's error shape, the gateway's ERROR envelope to the
// sender, the escalation, and the ERROR in the thread.
func checkFailedRequest(t *testing.T, h *harness, w *httptest.ResponseRecorder, status int, code, message string) {
	t.Helper()
	e := decodeError(t, w, status, "upstream_error")
	if e.Error.Message != message || e.Error.Type != "upstream_error" {
		t.Errorf("error %+v, want %q", e.Error, message)
	}
	out := jsonBody(t, w)
	env, _ := out["envelope"].(map[string]any)
	if env["message_type"] != "error" || env["sender_id"] != GatewayID || env["receiver_id"] != "orch" || env["in_reply_to"] != "m_1" ||
		env["payload"].(map[string]any)["error_code"] != code || env["error"] != message {
		t.Errorf("envelope %v", env)
	}
	esc, _ := out["escalation"].(map[string]any)
	if esc == nil || esc["request_id"] != "esc_1" || esc["human_review_url"] != "https://gw.example/review/esc_1" || !strings.Contains(str(esc["reason"]), "delivery of m_1 to executor failed") {
		t.Errorf("escalation %v", out["escalation"])
	}
	opened := h.esc.requests()
	if len(opened) != 1 || opened[0].AgentID != "orch" || opened[0].Type != "MESSAGE" || !strings.Contains(opened[0].Content, `"in_reply_to": "m_1"`) {
		t.Errorf("escalations %+v", opened)
	}
	thread := h.thread(mailbox.KeyWorkflow, "wf_a")
	if len(thread) != 2 || thread[1].Origin != "gateway" || thread[1].Type != "error" || thread[1].InReplyTo != "m_1" {
		t.Errorf("thread %+v", thread)
	}
	if st := h.svc.Stats(); st.Failed != 1 || st.Escalated != 1 || st.Delivered != 0 {
		t.Errorf("stats %+v", st)
	}
}

// TestRequestTimeout: a recipient that does not answer within
// metadata.timeout_ms is 504 with the gateway's TIMEOUT ERROR.
func TestRequestTimeout(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.peers["executor"].Set(func(w http.ResponseWriter, r *http.Request, _ []byte) {
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	})
	start := time.Now()
	w := h.send("orch", `{"message_id":"m_1","message_type":"request","sender_id":"orch","receiver_id":"executor","workflow_id":"wf_a","action":"run","metadata":{"timeout_ms":100}}`)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("answered after %s, the timeout is 100ms", d)
	}
	checkFailedRequest(t, h, w, http.StatusGatewayTimeout, "TIMEOUT", "executor did not answer m_1 within its timeout.")
	if c := testkit.SummaryOf(h.records(KindMessageDelivery)[0])["cause"]; c != "timeout" {
		t.Errorf("cause %v", c)
	}
}

// TestRequestRecipientDown: a refused connection is retried; the failure
// reads the same sentence as any other.
func TestRequestRecipientDown(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.peers["executor"].Srv.Close()
	w := h.send("orch", `{"message_id":"m_1","message_type":"request","sender_id":"orch","receiver_id":"executor","workflow_id":"wf_a","action":"run"}`)
	checkFailedRequest(t, h, w, http.StatusBadGateway, "DELIVERY_FAILED", "The gateway could not deliver m_1 to executor.")
	if d := testkit.SummaryOf(h.records(KindMessageDelivery)[0]); d["cause"] != "unreachable" || d["attempts"] != 3 {
		t.Errorf("delivery %v", d)
	}
}

// TestRequestToPrivateAddressRefused: without allowed_networks the gateway
// does not dial loopback endpoints: nothing reaches them, and the sender
// reads the same sentence as for any other failure.
func TestRequestToPrivateAddressRefused(t *testing.T) {
	h := newHarness(t, harnessOpts{publicOnly: true})
	w := h.send("orch", `{"message_id":"m_1","message_type":"request","sender_id":"orch","receiver_id":"executor","workflow_id":"wf_a","action":"run"}`)
	checkFailedRequest(t, h, w, http.StatusBadGateway, "DELIVERY_FAILED", "The gateway could not deliver m_1 to executor.")
	if n := len(h.peers["executor"].Received()); n != 0 {
		t.Errorf("the loopback endpoint was called %d times", n)
	}
	if d := testkit.SummaryOf(h.records(KindMessageDelivery)[0]); d["cause"] != "destination_not_allowed" || d["attempts"] != 1 {
		t.Errorf("delivery %v", d)
	}
}

// TestRequestAnsweredWithFatalError: a recipient's fatal ERROR is the
// answer, and the escalation it opened is named in X-Escalation-Id.
func TestRequestAnsweredWithFatalError(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.peers["executor"].Set(testkit.ReplyWith(func(req map[string]any) string {
		return `{"correlation_id":"corr_other","sender":{"agent_id":"executor"},"recipient":{"agent_id":"orch"},"message_type":"ERROR","error":{"code":"BOOKING_FAILED","message":"card declined","severity":"FATAL"},"metadata":{"in_reply_to":"` + str(req["message_id"]) + `"}}`
	}))
	w := h.send("orch", `{"message_id":"s_1","correlation_id":"corr_e","sender":{"agent_id":"orch"},"recipient":{"agent_id":"executor"},"message_type":"REQUEST","payload":{"action":"book"}}`)
	if w.Code != http.StatusOK || w.Header().Get("X-Escalation-Id") != "esc_1" {
		t.Fatalf("%d %v %s", w.Code, w.Header(), w.Body)
	}
	if out := jsonBody(t, w); out["message_type"] != "ERROR" || out["correlation_id"] != "corr_e" {
		t.Errorf("answer %v", out)
	}
	opened := h.esc.requests()
	if len(opened) != 1 || opened[0].AgentID != "orch" || !strings.Contains(opened[0].Reason, "FATAL error BOOKING_FAILED: card declined") {
		t.Errorf("escalations %+v", opened)
	}
	// The reply is kept in the request's thread, not the one it named.
	if n := len(h.thread(mailbox.KeyCorrelation, "corr_e")); n != 2 {
		t.Errorf("request thread holds %d", n)
	}
	if n := len(h.thread(mailbox.KeyCorrelation, "corr_other")); n != 0 {
		t.Errorf("the reply moved itself into another thread")
	}
}
