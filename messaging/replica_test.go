package messaging

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/testkit"
	"github.com/sacpgw/gateway/mailbox"
)

// TestDuplicateRace: 16 identical messages (one message_id) posted at
// once, spread over two replicas where the state is shared, are accepted
// exactly once: the repeat check is the history's append, atomic with it.
// The other 15 are 409 duplicate_message, audited and counted as refused;
// the recipient gets the message once. On both state backends, for a
// queued message and a relayed REQUEST.
func TestDuplicateRace(t *testing.T) {
	bodies := []struct{ name, body string }{
		{"queued", `{"message_id":"m_race","message_type":"notification","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_race","action":"status"}`},
		{"relayed", `{"message_id":"m_race","correlation_id":"c_race","sender":{"agent_id":"orch"},"recipient":{"agent_id":"planner"},"message_type":"REQUEST","payload":{"action":"plan"}}`},
	}
	for _, b := range backends {
		for _, m := range bodies {
			t.Run(b.name+"/"+m.name, func(t *testing.T) {
				h := newHarness(t, harnessOpts{redis: b.redis, wrapHistory: func(h mailbox.History) mailbox.History { return slowAppend{h} }})
				replicas := []*Service{h.svc}
				if b.redis {
					replicas = append(replicas, h.replica())
				}
				const n = 16
				codes := make([]int, n)
				start := make(chan struct{})
				var wg sync.WaitGroup
				for i := range n {
					wg.Go(func() {
						r, _ := h.request(http.MethodPost, Route, "orch", m.body)
						w := httptest.NewRecorder()
						<-start
						replicas[i%len(replicas)].Send(w, r)
						codes[i] = w.Code
					})
				}
				close(start)
				wg.Wait()
				ok, dup := 0, 0
				for _, c := range codes {
					switch c {
					case http.StatusOK, http.StatusAccepted:
						ok++
					case http.StatusConflict:
						dup++
					}
				}
				if ok != 1 || dup != n-1 {
					t.Fatalf("answers %v: %d accepted, %d duplicates; want 1 and %d", codes, ok, dup, n-1)
				}
				var accepted, refused int64
				for _, svc := range replicas {
					st := svc.Stats()
					accepted, refused = accepted+st.Accepted, refused+st.Refused
				}
				if accepted != 1 || refused != n-1 {
					t.Errorf("counted %d accepted, %d refused", accepted, refused)
				}
				if a, r := len(h.records(KindMessage)), len(h.records(KindMessageReject)); a != 1 || r != n-1 {
					t.Errorf("audited %d accepted, %d refused", a, r)
				}
				h.run()
				h.peers["planner"].WaitFor(1)
				time.Sleep(50 * time.Millisecond)
				if got := len(h.peers["planner"].Received()); got != 1 {
					t.Errorf("the recipient got the message %d times", got)
				}
				kind, id := mailbox.KeyWorkflow, "wf_race"
				if m.name == "relayed" {
					kind, id = mailbox.KeyCorrelation, "c_race"
				}
				sent := 0
				for _, e := range h.thread(kind, id) {
					if e.MessageID == "m_race" {
						sent++
					}
				}
				if sent != 1 {
					t.Errorf("the thread holds the message %d times", sent)
				}
			})
		}
	}
}

// slowAppend is a history whose appends take a while, as a loaded store's
// do: every racing message passes the early repeat check before the first
// is stored, so only the append's own check can keep the repeats out.
type slowAppend struct{ mailbox.History }

func (s slowAppend) Append(ctx context.Context, es ...mailbox.Entry) error {
	time.Sleep(20 * time.Millisecond)
	return s.History.Append(ctx, es...)
}

// adminGet is GET /admin/messages?query with an admin's token.
func adminGet(h *harness, query string) *httptest.ResponseRecorder {
	r, _ := h.request(http.MethodGet, "/admin/messages?"+query, "", "")
	r.Header.Set("Authorization", "Bearer tok-admin")
	w := httptest.NewRecorder()
	h.svc.AdminHistory(people{"tok-admin": "admin:admin"}).ServeHTTP(w, r)
	return w
}

// TestDeadLetters: a queued delivery the gateway gives up on leaves the
// queue for the dead letters, which GET /admin/messages?dead_letters=1
// lists, newest first: one whose every attempt failed (after its ERROR and
// escalation), and one handed out max_deliveries times without being
// acknowledged (its outcome could never be recorded; the count survives
// the reclaims). On both state backends.
func TestDeadLetters(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			h := newHarness(t, harnessOpts{redis: b.redis, maxDeliveries: 2, claimIdle: 150 * time.Millisecond})
			// Never acknowledged: its deliveries cannot be audited.
			w := h.send("orch", `{"message_id":"m_unacked","message_type":"notification","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_dl","action":"status"}`)
			if w.Code != http.StatusAccepted {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			unacked := str(jsonBody(t, w)["deliveries"].([]any)[0].(map[string]any)["delivery_id"])
			h.trail.SetFail(true)
			h.run()
			h.peers["planner"].WaitFor(2)
			var dead []mailbox.DeadLetter
			if !eventually(func() bool { dead, _ = h.queue.DeadLetters(t.Context(), 0); return len(dead) == 1 }) {
				t.Fatalf("dead letters %+v", dead)
			}
			h.trail.SetFail(false)
			time.Sleep(400 * time.Millisecond) // past another ClaimIdle: it is not handed out again
			if n := len(h.peers["planner"].Received()); n != 2 {
				t.Errorf("handed out %d times, want max_deliveries = 2", n)
			}

			// Every attempt fails.
			h.peers["executor"].Set(answerStatus(http.StatusServiceUnavailable))
			w = h.send("orch", `{"message_id":"m_down","message_type":"notification","sender_id":"orch","receiver_id":"executor","workflow_id":"wf_dl","action":"task_assign"}`)
			if w.Code != http.StatusAccepted {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			failed := str(jsonBody(t, w)["deliveries"].([]any)[0].(map[string]any)["delivery_id"])
			h.waitRecords(KindMessageEscalation, 1)
			if !eventually(func() bool { dead, _ = h.queue.DeadLetters(t.Context(), 0); return len(dead) == 2 }) {
				t.Fatalf("dead letters %+v", dead)
			}
			if !eventually(func() bool { n, _ := h.queue.Len(t.Context()); return n == 0 }) {
				t.Error("dead letters still count in the queue")
			}

			w = adminGet(h, "dead_letters=1")
			if w.Code != http.StatusOK {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			list := jsonBody(t, w)
			data, _ := list["data"].([]any)
			if list["object"] != "list" || len(data) != 2 || list["has_more"] != false {
				t.Fatalf("answer %s", w.Body)
			}
			newest, oldest := data[0].(map[string]any), data[1].(map[string]any)
			if newest["delivery_id"] != failed || newest["message_id"] != "m_down" || newest["recipient"] != "executor" ||
				newest["reason"] != "delivery_failed: bad_status after 3 attempt(s)" || newest["deliveries"] != float64(1) {
				t.Errorf("newest %v", newest)
			}
			env, _ := newest["envelope"].(map[string]any)
			if env["message_id"] != "m_down" || str(newest["payload_sha256"]) == "" {
				t.Errorf("newest's envelope %v", newest)
			}
			if oldest["delivery_id"] != unacked || oldest["reason"] != "handed out 2 times without being acknowledged" || oldest["deliveries"] != float64(2) {
				t.Errorf("oldest %v", oldest)
			}
			if reads := h.records(KindMessageRead); len(reads) != 1 || testkit.SummaryOf(reads[0])["dead_letters"] != 2 || testkit.SummaryOf(reads[0])["reader"] != "admin:admin" {
				t.Errorf("message.read %+v", reads)
			}
			// Paged like a thread.
			page := jsonBody(t, adminGet(h, "dead_letters=true&limit=1"))
			if len(page["data"].([]any)) != 1 || page["has_more"] != true || page["next_cursor"] != "1" {
				t.Errorf("first page %v", page)
			}
			page = jsonBody(t, adminGet(h, "dead_letters=1&limit=1&cursor=1"))
			if d := page["data"].([]any); len(d) != 1 || d[0].(map[string]any)["delivery_id"] != unacked || page["has_more"] != false {
				t.Errorf("second page %v", page)
			}
		})
	}
}

// TestDeadLettersQuery: the dead-letter view takes exactly dead_letters=1
// (or true), no thread beside it, and a person's token.
func TestDeadLettersQuery(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	tests := []struct {
		query, token string
		status       int
		code         string
	}{
		{"dead_letters=yes", "tok-admin", 400, "invalid_request"},
		{"dead_letters=", "tok-admin", 400, "invalid_request"},
		{"dead_letters=1&workflow_id=wf_1", "tok-admin", 400, "invalid_request"},
		{"dead_letters=1&limit=0", "tok-admin", 400, "invalid_request"},
		{"dead_letters=1", "", 401, "invalid_api_key"},
	}
	for _, tc := range tests {
		t.Run(tc.query+" "+tc.token, func(t *testing.T) {
			r, _ := h.request(http.MethodGet, "/admin/messages?"+tc.query, "", "")
			if tc.token != "" {
				r.Header.Set("Authorization", "Bearer "+tc.token)
			}
			w := httptest.NewRecorder()
			h.svc.AdminHistory(people{"tok-admin": "admin:admin"}).ServeHTTP(w, r)
			decodeError(t, w, tc.status, tc.code)
		})
	}
	w := adminGet(h, "dead_letters=1")
	if w.Code != http.StatusOK || strings.TrimSpace(w.Body.String()) != `{"object":"list","data":[],"has_more":false}` {
		t.Errorf("empty: %d %s", w.Code, w.Body)
	}
	if n := len(h.records(KindMessageRead)); n != 1 {
		t.Errorf("%d message.read entries, want 1 (the authorized read)", n)
	}
}

// TestAnswerRepeatsMessageID: a recipient answering two REQUESTs of one
// thread with the same message_id has the second answer refused by the
// history's append like any repeat: the requester gets the gateway's ERROR,
// and the thread lists the first answer only. On both state backends.
func TestAnswerRepeatsMessageID(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			h := newHarness(t, harnessOpts{redis: b.redis})
			h.peers["planner"].Set(testkit.ReplyWith(func(req map[string]any) string {
				return `{"message_id":"resp_fixed","message_type":"response","sender_id":"planner","receiver_id":"orch","in_reply_to":"` + str(req["message_id"]) + `","action":"plan_complete"}`
			}))
			req := `{"message_type":"request","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_rr","action":"plan"}`
			if w := h.send("orch", req); w.Code != http.StatusOK {
				t.Fatalf("first: %d %s", w.Code, w.Body)
			}
			w := h.send("orch", req)
			if w.Code != http.StatusBadGateway || strings.Contains(w.Body.String(), "resp_fixed") {
				t.Fatalf("second: %d %s", w.Code, w.Body)
			}
			if d := h.records(KindMessageDelivery); len(d) != 1 || testkit.SummaryOf(d[0])["cause"] != "bad_answer" {
				t.Errorf("message.delivery %+v", d)
			}
			n := 0
			for _, e := range h.thread(mailbox.KeyWorkflow, "wf_rr") {
				if e.MessageID == "resp_fixed" {
					n++
				}
			}
			if n != 1 {
				t.Errorf("the thread lists the repeated answer %d times", n)
			}
		})
	}
}

// TestAnswerTypeChecked: an answer that claims another type for its sender
// (or its addressee) than the registry's is not released to the requester.
func TestAnswerTypeChecked(t *testing.T) {
	tests := []struct{ name, answer string }{
		{"sender_type", `{"message_type":"response","sender_id":"planner","sender_type":"orchestrator","receiver_id":"orch","in_reply_to":"%s","action":"x"}`},
		{"receiver_type", `{"message_type":"response","sender_id":"planner","receiver_id":"orch","receiver_type":"planner","in_reply_to":"%s","action":"x"}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOpts{})
			h.peers["planner"].Set(testkit.ReplyWith(func(req map[string]any) string {
				return strings.Replace(tc.answer, "%s", str(req["message_id"]), 1)
			}))
			if w := h.send("orch", `{"message_type":"request","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_at","action":"plan"}`); w.Code != http.StatusBadGateway {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
		})
	}
	// The right types pass.
	h := newHarness(t, harnessOpts{})
	h.peers["planner"].Set(testkit.ReplyWith(func(req map[string]any) string {
		return `{"message_type":"response","sender_id":"planner","sender_type":"planner","receiver_id":"orch","receiver_type":"orchestrator","in_reply_to":"` + str(req["message_id"]) + `","action":"x"}`
	}))
	if w := h.send("orch", `{"message_type":"request","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_at","action":"plan"}`); w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
}
