package messaging

import (
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/testkit"
)

// TestTTLExpiresQueuedMessages: a queued message whose metadata.ttl_ms
// passes before a worker gets to it is not handed over; its delivery entry
// says expired, and one within its ttl is delivered. A ttl outside 1 ms to
// a day is refused with 400 naming it.
func TestTTLExpiresQueuedMessages(t *testing.T) {
	var offset atomic.Int64 // the clock, moved by the test
	now := func() time.Time { return time.Now().Add(time.Duration(offset.Load())) }
	h := newHarness(t, harnessOpts{now: now})
	event := func(wf, metadata string) string {
		return `{"message_type":"notification","sender_id":"orch","receiver_id":"planner","workflow_id":"` + wf + `","action":"ping","payload":{},"metadata":` + metadata + `}`
	}
	// Queued before any worker runs, then the clock passes the ttl.
	if w := h.send("orch", event("wf_ttl_1", `{"ttl_ms":1000}`)); w.Code != http.StatusAccepted {
		t.Fatalf("queue: %d %s", w.Code, w.Body)
	}
	if w := h.send("orch", event("wf_ttl_2", `{"ttl_ms":600000}`)); w.Code != http.StatusAccepted {
		t.Fatalf("queue: %d %s", w.Code, w.Body)
	}
	offset.Store(int64(5 * time.Second))
	h.run()
	recs := h.waitRecords(KindMessageDelivery, 2)
	byWF := map[string]string{}
	for _, r := range recs {
		byWF[r.RequestID] = testkit.SummaryOf(r)["status"].(string)
	}
	h.peers["planner"].WaitFor(1)
	time.Sleep(50 * time.Millisecond)
	if got := h.peers["planner"].Received(); len(got) != 1 || !strings.Contains(string(got[0].Body), "wf_ttl_2") {
		t.Fatalf("the recipient got %d messages, want only the one within its ttl", len(got))
	}
	statuses := []string{}
	for _, r := range recs {
		statuses = append(statuses, testkit.SummaryOf(r)["status"].(string))
	}
	if !(len(recs) == 2 && strings.Contains(strings.Join(statuses, ","), "expired") && strings.Contains(strings.Join(statuses, ","), "delivered")) {
		t.Fatalf("delivery entries %v (%v)", statuses, byWF)
	}
	if h.svc.Stats().Expired != 1 {
		t.Errorf("expired count %d", h.svc.Stats().Expired)
	}
	for _, bad := range []string{`{"ttl_ms":0}`, `{"ttl_ms":86400001}`, `{"ttl_ms":1.5}`, `{"ttl_ms":"60"}`} {
		if w := h.send("orch", event("wf_ttl_bad", bad)); w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "metadata.ttl_ms") {
			t.Errorf("%s: %d %s", bad, w.Code, w.Body)
		}
	}
}
