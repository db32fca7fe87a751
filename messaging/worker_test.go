package messaging

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/testkit"

	"github.com/sacpgw/gateway/mailbox"
)

// TestEventQueuedAndDelivered: a notification is acknowledged 202 before
// it is handed over; a worker then posts it to the recipient and audits
// the delivery.
func TestEventQueuedAndDelivered(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	event := `{"message_id":"m_ev","message_type":"notification","sender_id":"planner","receiver_id":"orch","workflow_id":"wf_ev","action":"status","payload":{"done":3}}`
	w := h.send("planner", event)
	if w.Code != http.StatusAccepted {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if out := jsonBody(t, w); out["status"] != "queued" || out["message_id"] != "m_ev" || fmt.Sprint(out["recipients"]) != "[orch]" {
		t.Errorf("answer %v", out)
	}
	if n, err := h.svc.QueueLen(context.Background()); n != 1 || err != nil {
		t.Errorf("queue length %d %v", n, err)
	}
	if n := len(h.peers["orch"].Received()); n != 0 {
		t.Fatalf("delivered before any worker ran")
	}
	h.run()
	got := h.peers["orch"].WaitFor(1)
	if m := decode(t, got[0].Body); m["message_id"] != "m_ev" || m["action"] != "status" || got[0].Header.Get("X-Gateway-Sender") != "planner" {
		t.Errorf("recipient got %s %v", got[0].Body, got[0].Header)
	}
	d := h.waitRecords(KindMessageDelivery, 1)[0]
	if testkit.SummaryOf(d)["status"] != "delivered" || testkit.SummaryOf(d)["recipient"] != "orch" || testkit.SummaryOf(d)["attempts"] != 1 || d.AgentID != "planner" || d.PayloadSHA256 != sha256Hex(got[0].Body) {
		t.Errorf("message.delivery %+v", d)
	}
	if !eventually(func() bool { n, _ := h.svc.QueueLen(context.Background()); return n == 0 }) {
		t.Error("the delivery was not acknowledged")
	}
	if st := h.svc.Stats(); st.Accepted != 1 || st.Delivered != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestBroadcast: a null recipient reaches every agent with an endpoint
// but the sender; with nobody to receive it the answer says so.
func TestBroadcast(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.run()
	w := h.send("orch", `{"message_type":"notification","sender_id":"orch","workflow_id":"wf_bc","action":"workflow_complete"}`)
	if w.Code != http.StatusAccepted || fmt.Sprint(jsonBody(t, w)["recipients"]) != "[executor planner]" {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	h.peers["planner"].WaitFor(1)
	h.peers["executor"].WaitFor(1)
	if n := len(h.peers["orch"].Received()); n != 0 {
		t.Errorf("the sender received its own broadcast")
	}
	thread := h.thread(mailbox.KeyWorkflow, "wf_bc")
	if len(thread) != 1 || !thread[0].Broadcast || fmt.Sprint(thread[0].Recipients) != "[executor planner]" {
		t.Errorf("thread %+v", thread)
	}
	if to := testkit.SummaryOf(h.records(KindMessage)[0])["broadcast_to"]; fmt.Sprint(to) != "[executor planner]" {
		t.Errorf("broadcast_to %v", to)
	}
	// An agent in the recipients sees the broadcast in its history.
	if w := h.historyOf("planner", "workflow_id=wf_bc"); w.Code != http.StatusOK {
		t.Errorf("recipient's history: %d %s", w.Code, w.Body)
	}
}

// TestBroadcastWithoutRecipients: a broadcast that no agent with an
// endpoint receives is accepted and recorded, handed to no one.
func TestBroadcastWithoutRecipients(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	// Only the sender has an endpoint.
	h.cfg.Agents["planner"].Endpoint, h.cfg.Agents["executor"].Endpoint = "", ""
	apply, err := h.reg.Prepare(h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	apply()
	w := h.send("orch", `{"message_type":"notification","sender_id":"orch","workflow_id":"wf_none","action":"workflow_complete"}`)
	if out := jsonBody(t, w); w.Code != http.StatusAccepted || out["status"] != "no_recipients" || fmt.Sprint(out["recipients"]) != "[]" {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if n, _ := h.svc.QueueLen(context.Background()); n != 0 {
		t.Errorf("%d queued", n)
	}
	if n := len(h.thread(mailbox.KeyWorkflow, "wf_none")); n != 1 {
		t.Errorf("thread holds %d", n)
	}
}

// TestPriorityOrder: queued messages are handed over most urgent first,
// FIFO within a priority.
func TestPriorityOrder(t *testing.T) {
	h := newHarness(t, harnessOpts{workers: 1})
	for i, p := range []string{"low", "medium", "high", "critical", "high", "medium"} {
		w := h.send("orch", fmt.Sprintf(`{"message_id":"m%d_%s","message_type":"notification","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_p","action":"status","priority":"%s"}`, i, p, p))
		if w.Code != http.StatusAccepted {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	}
	h.run()
	got := h.peers["planner"].WaitFor(6)
	var order []string
	for _, r := range got {
		order = append(order, str(decode(t, r.Body)["message_id"]))
	}
	if want := "m3_critical m2_high m4_high m1_medium m5_medium m0_low"; strings.Join(order, " ") != want {
		t.Errorf("order %v, want %s", order, want)
	}
}

// TestQueuedDeliveryDeadEnd: a queued message whose recipient keeps
// failing is tried max_retry_attempts times; then the gateway's ERROR
// (DELIVERY_FAILED, to the sender, replying to the message) joins the
// thread and a person is asked to decide, with the message and the ERROR.
func TestQueuedDeliveryDeadEnd(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.peers["executor"].Set(answerStatus(http.StatusServiceUnavailable))
	h.run()
	w := h.send("orch", `{"message_id":"m_down","message_type":"notification","sender_id":"orch","receiver_id":"executor","workflow_id":"wf_down","action":"task_assign"}`)
	if w.Code != http.StatusAccepted {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	h.waitRecords(KindMessageEscalation, 1)
	if n := len(h.peers["executor"].Received()); n != 3 {
		t.Errorf("%d attempts, want max_retry_attempts = 3", n)
	}
	thread := h.thread(mailbox.KeyWorkflow, "wf_down")
	if len(thread) != 2 || thread[1].Sender != GatewayID || thread[1].Origin != "gateway" || thread[1].InReplyTo != "m_down" || fmt.Sprint(thread[1].Recipients) != "[orch]" {
		t.Fatalf("thread %+v", thread)
	}
	if env := string(thread[1].Envelope); !strings.Contains(env, "DELIVERY_FAILED") || !strings.Contains(env, "The gateway could not deliver m_down to executor.") {
		t.Errorf("ERROR envelope %s", env)
	}
	d := h.records(KindMessageDelivery)
	if len(d) != 1 || testkit.SummaryOf(d[0])["status"] != "failed" || testkit.SummaryOf(d[0])["attempts"] != 3 || testkit.SummaryOf(d[0])["cause"] != "bad_status" {
		t.Errorf("message.delivery %+v", d)
	}
	// The gateway's ERROR is audited with the hash of its bytes.
	var gwErr bool
	for _, r := range h.records(KindMessage) {
		gwErr = gwErr || (testkit.SummaryOf(r)["origin"] == "gateway" && r.PayloadSHA256 == thread[1].PayloadSHA256 && r.PayloadSHA256 == sha256Hex(thread[1].Envelope))
	}
	if !gwErr {
		t.Errorf("the gateway's ERROR is not audited with its hash: %+v", h.records(KindMessage))
	}
	opened := h.esc.requests()
	if len(opened) != 1 || opened[0].AgentID != "orch" || !strings.Contains(opened[0].Reason, "after 3 attempt(s)") ||
		!strings.Contains(opened[0].Content, `"message"`) || !strings.Contains(opened[0].Content, "DELIVERY_FAILED") {
		t.Errorf("escalations %+v", opened)
	}
	if e := testkit.SummaryOf(h.records(KindMessageEscalation)[0]); e["opened"] != true || e["escalation_id"] != "esc_1" || e["waiting_agent"] != "orch" {
		t.Errorf("message.escalation %v", e)
	}
	// The sender sees the gateway's ERROR in its history.
	if w := h.historyOf("orch", "workflow_id=wf_down"); w.Code != http.StatusOK || len(jsonBody(t, w)["data"].([]any)) != 2 {
		t.Errorf("sender's history %d %s", w.Code, w.Body)
	}
	if !eventually(func() bool { n, _ := h.svc.QueueLen(context.Background()); return n == 0 }) {
		t.Error("the failed delivery was not acknowledged")
	}
	if st := h.svc.Stats(); st.Failed != 1 || st.Escalated != 1 {
		t.Errorf("stats %+v", st)
	}
}

// TestQueuedDeliveryRecovers: a recipient that fails once gets the
// message on the next attempt, and the delivery counts both.
func TestQueuedDeliveryRecovers(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	var n atomic.Int32
	h.peers["executor"].Set(func(w http.ResponseWriter, _ *http.Request, _ []byte) {
		if n.Add(1) == 1 {
			w.WriteHeader(http.StatusBadGateway)
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	h.run()
	if w := h.send("orch", `{"message_type":"notification","sender_id":"orch","receiver_id":"executor","workflow_id":"wf_r","action":"task_assign"}`); w.Code != http.StatusAccepted {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	d := h.waitRecords(KindMessageDelivery, 1)[0]
	if testkit.SummaryOf(d)["status"] != "delivered" || testkit.SummaryOf(d)["attempts"] != 2 {
		t.Errorf("message.delivery %+v", d)
	}
	if len(h.esc.requests()) != 0 {
		t.Error("a recovered delivery was escalated")
	}
}

// TestQueuedAttemptTimeoutRetried: messaging.timeout bounds each delivery
// attempt of a queued message; an attempt that times out is one failed
// attempt of max_retry_attempts, as a 5xx is, and the next one may
// succeed.
func TestQueuedAttemptTimeoutRetried(t *testing.T) {
	h := newHarness(t, harnessOpts{timeout: "100ms"})
	var n atomic.Int32
	h.peers["executor"].Set(func(w http.ResponseWriter, r *http.Request, _ []byte) {
		if n.Add(1) == 1 {
			select {
			case <-r.Context().Done():
			case <-time.After(5 * time.Second):
			}
			return
		}
		w.WriteHeader(http.StatusAccepted)
	})
	h.run()
	if w := h.send("orch", `{"message_type":"notification","sender_id":"orch","receiver_id":"executor","workflow_id":"wf_t","action":"task_assign"}`); w.Code != http.StatusAccepted {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	d := h.waitRecords(KindMessageDelivery, 1)[0]
	if testkit.SummaryOf(d)["status"] != "delivered" || testkit.SummaryOf(d)["attempts"] != 2 {
		t.Errorf("message.delivery %v, want delivered on the 2nd attempt", testkit.SummaryOf(d))
	}
}

// TestQueuedRecipientGone: a message queued for an agent that no longer
// has an endpoint (a reload removed it) fails at once and goes to a
// person; nothing is posted anywhere.
func TestQueuedRecipientGone(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	if w := h.send("orch", `{"message_id":"m_gone","correlation_id":"c_gone","sender":{"agent_id":"orch"},"recipient":{"agent_id":"executor"},"message_type":"EVENT","payload":{"action":"task_assign"}}`); w.Code != http.StatusAccepted {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	h.cfg.Agents["executor"].Endpoint = ""
	apply, err := h.reg.Prepare(h.cfg)
	if err != nil {
		t.Fatal(err)
	}
	apply()
	h.run()
	h.waitRecords(KindMessageEscalation, 1)
	d := h.records(KindMessageDelivery)
	if len(d) != 1 || testkit.SummaryOf(d[0])["status"] != "failed" || testkit.SummaryOf(d[0])["attempts"] != 0 {
		t.Errorf("message.delivery %+v", d)
	}
	thread := h.thread(mailbox.KeyCorrelation, "c_gone")
	if len(thread) != 2 || thread[1].Type != "error" || thread[1].Format != "sam" {
		t.Errorf("thread %+v", thread)
	}
	if n := len(h.peers["executor"].Received()); n != 0 {
		t.Errorf("posted %d times", n)
	}
}

// TestQueuedFromGatewayNoLoop: a failed delivery of a message the gateway
// or a reviewer wrote gets no ERROR about itself.
func TestQueuedFromGatewayNoLoop(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.peers["orch"].Set(answerStatus(http.StatusInternalServerError))
	h.run()
	env := `{"message_id":"m_h","message_type":"response","sender_id":"human","receiver_id":"orch","workflow_id":"wf_loop","in_reply_to":"m_x","action":"human_decision"}`
	if _, err := h.queue.Push(context.Background(), mailbox.Delivery{MessageID: "m_h", Sender: HumanID, Recipient: "orch", Body: []byte(env)}); err != nil {
		t.Fatal(err)
	}
	d := h.waitRecords(KindMessageDelivery, 1)[0]
	if testkit.SummaryOf(d)["status"] != "failed" {
		t.Errorf("delivery %v", testkit.SummaryOf(d))
	}
	if !eventually(func() bool { n, _ := h.svc.QueueLen(context.Background()); return n == 0 }) {
		t.Fatal("not acknowledged")
	}
	if n := len(h.thread(mailbox.KeyWorkflow, "wf_loop")); n != 0 || len(h.esc.requests()) != 0 {
		t.Errorf("an ERROR about the gateway's own message: thread %d, escalations %d", n, len(h.esc.requests()))
	}
}

// TestQueuedBodyNotAnEnvelope: a queued delivery that is not an envelope
// (a corrupt queue entry) is dropped after its attempts, with no ERROR.
func TestQueuedBodyNotAnEnvelope(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	h.peers["planner"].Set(answerStatus(http.StatusBadRequest))
	h.run()
	if _, err := h.queue.Push(context.Background(), mailbox.Delivery{MessageID: "m_bad", Sender: "orch", Recipient: "planner", Body: []byte("not json")}); err != nil {
		t.Fatal(err)
	}
	if !eventually(func() bool { n, _ := h.svc.QueueLen(context.Background()); return n == 0 && h.svc.Stats().Failed == 1 }) {
		t.Fatal("the corrupt delivery was not dropped")
	}
	if len(h.esc.requests()) != 0 || len(h.records(KindMessage)) != 0 {
		t.Errorf("an ERROR was written about an entry that is no message: %v", h.trail.Kinds())
	}
	if !strings.Contains(h.logs.String(), "not an envelope") {
		t.Errorf("log %s", h.logs.String())
	}
}

// TestQueuedDeliveryNotAuditedIsNotAcknowledged: a delivery whose outcome
// cannot be audited is left in the queue (with Redis another consumer
// takes it over), never acknowledged as done.
func TestQueuedDeliveryNotAuditedIsNotAcknowledged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		status int
	}{{"delivered", http.StatusAccepted}, {"failed", http.StatusBadRequest}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, harnessOpts{})
			if w := h.send("orch", `{"message_type":"notification","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_na","action":"status"}`); w.Code != http.StatusAccepted {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			h.peers["planner"].Set(answerStatus(tc.status))
			h.trail.SetFail(true)
			h.run()
			h.peers["planner"].WaitFor(1)
			if !eventually(func() bool { return strings.Contains(h.logs.String(), "it will be retried") }) {
				t.Fatalf("log %s", h.logs.String())
			}
			if n, _ := h.svc.QueueLen(context.Background()); n != 1 {
				t.Errorf("queue length %d: the unaudited delivery was acknowledged", n)
			}
		})
	}
}

// TestQueuedDeliveryNotAuditedIsRetried: with the memory queue too, a
// delivery left unacknowledged because its outcome could not be audited
// is handed out again once ClaimIdle passes; with the trail back it is
// delivered and recorded as reclaimed.
func TestQueuedDeliveryNotAuditedIsRetried(t *testing.T) {
	h := newHarness(t, harnessOpts{claimIdle: 100 * time.Millisecond})
	if w := h.send("orch", `{"message_type":"notification","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_rt","action":"status"}`); w.Code != http.StatusAccepted {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	h.trail.SetFail(true)
	h.run()
	h.peers["planner"].WaitFor(1)
	if !eventually(func() bool { return strings.Contains(h.logs.String(), "it will be retried") }) {
		t.Fatalf("log %s", h.logs.String())
	}
	h.trail.SetFail(false)
	d := h.waitRecords(KindMessageDelivery, 1)[0]
	if testkit.SummaryOf(d)["status"] != "delivered" || testkit.SummaryOf(d)["reclaimed"] != true {
		t.Errorf("message.delivery %v, want delivered, reclaimed", testkit.SummaryOf(d))
	}
	if got := len(h.peers["planner"].Received()); got != 2 {
		t.Errorf("the recipient got it %d times, want 2 (the unrecorded attempt, the retry)", got)
	}
	if !eventually(func() bool { n, _ := h.svc.QueueLen(context.Background()); return n == 0 }) {
		t.Error("the delivery was not acknowledged once recorded")
	}
}

// flakyQueue fails its first Pop, as a queue backend that is briefly
// down does.
type flakyQueue struct {
	mailbox.Queue
	once   sync.Once
	failed chan struct{}
}

func (q *flakyQueue) Pop(ctx context.Context) (mailbox.Delivery, error) {
	first := false
	q.once.Do(func() { first = true })
	if first {
		close(q.failed)
		return mailbox.Delivery{}, errors.New("queue backend down")
	}
	return q.Queue.Pop(ctx)
}

// TestWorkersSurviveQueueOutage: a failing queue is logged and waited
// out; the workers stop promptly when asked.
func TestWorkersSurviveQueueOutage(t *testing.T) {
	q := &flakyQueue{failed: make(chan struct{})}
	h := newHarness(t, harnessOpts{workers: 1, deps: func(d *Deps) { q.Queue = d.Queue; d.Queue = q }})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		h.svc.Run(ctx)
		close(done)
	}()
	<-q.failed
	if !eventually(func() bool { return strings.Contains(h.logs.String(), "message queue unavailable") }) {
		t.Errorf("log %s", h.logs.String())
	}
	cancel()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
		t.Fatal("Run did not return after its context ended")
	}
}

// TestShutdownLeavesDeliveryInFlight: a delivery in flight when the
// workers stop is neither audited as failed nor escalated (another
// consumer may take it over).
func TestShutdownLeavesDeliveryInFlight(t *testing.T) {
	h := newHarness(t, harnessOpts{})
	arrived := make(chan struct{}, 1)
	h.peers["planner"].Set(func(w http.ResponseWriter, r *http.Request, _ []byte) {
		arrived <- struct{}{}
		<-r.Context().Done()
	})
	if w := h.send("orch", `{"message_type":"notification","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_sd","action":"status"}`); w.Code != http.StatusAccepted {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		h.svc.Run(ctx)
		close(done)
	}()
	<-arrived
	cancel()
	<-done
	if n := len(h.records(KindMessageDelivery)); n != 0 || len(h.esc.requests()) != 0 {
		t.Errorf("kinds %v after shutdown", h.trail.Kinds())
	}
	if n, _ := h.svc.QueueLen(context.Background()); n != 1 {
		t.Errorf("queue length %d, want the delivery left in flight", n)
	}
}
