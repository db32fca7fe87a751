package messaging

import (
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/testkit"

	"github.com/sacpgw/gateway/mailbox"
)

// TestTestModeIsADryRun (seed 001 §5, test_mode "for dry-run or
// simulation"): a compact SACP message with ctx.test_mode true passes every
// check a real one does and is audited, but reaches nobody and leaves no
// trace in its thread, so the same message_id can then be sent for real. A
// look-alike flag name is refused rather than guessed, and a dry run of an
// invalid plan is refused as the real send would be.
func TestTestModeIsADryRun(t *testing.T) {
	h := newHarness(t, harnessOpts{registry: testRegistry})
	h.run()
	plan := func(ctx string) string {
		return `{"message_id":"m_dry","message_type":"notification","sender_id":"orch","receiver_id":"executor","workflow_id":"wf_dry","action":"run_plan","payload":{"g":"hotels","ctx":` + ctx + `,"plan":[["search","H_API",{"c":"Paris"}]]}}`
	}
	before := len(h.peers["executor"].Received())
	w := h.send("orch", plan(`{"lang":"en","test_mode":true}`))
	var got map[string]any
	if w.Code != http.StatusOK || json.Unmarshal(w.Body.Bytes(), &got) != nil {
		t.Fatalf("dry run: %d %s", w.Code, w.Body)
	}
	if got["status"] != "VALID" || got["test_mode"] != true || got["delivered"] != false || got["message_id"] != "m_dry" ||
		!slices.Equal(anyStrings(got["would_deliver_to"]), []string{"executor"}) {
		t.Errorf("dry run answer %s", w.Body)
	}
	recs := h.records(KindMessage)
	if len(recs) == 0 || testkit.SummaryOf(recs[len(recs)-1])["test_mode"] != true || testkit.SummaryOf(recs[len(recs)-1])["delivered"] != false {
		t.Fatalf("dry run not audited as one: %v", recs)
	}
	if len(h.thread(mailbox.KeyWorkflow, "wf_dry")) != 0 {
		t.Error("a dry run was kept in its thread")
	}
	time.Sleep(100 * time.Millisecond) // a delivery, were one queued, would have reached the peer
	if n := len(h.peers["executor"].Received()); n != before {
		t.Fatalf("a dry run reached the recipient (%d deliveries)", n-before)
	}

	// The same message, for real, is not a repeat of the rehearsal.
	if w := h.send("orch", plan(`{"lang":"en","test_mode":false}`)); w.Code != http.StatusAccepted {
		t.Fatalf("real send after the dry run: %d %s", w.Code, w.Body)
	}
	h.peers["executor"].WaitFor(before + 1)

	for _, tc := range []struct {
		name, body, field string
		status            int
	}{
		{"a look-alike flag", plan(`{"Test_Mode":true}`), "payload.ctx.Test_Mode", http.StatusBadRequest},
		// compact SACP's own reading refuses this one first, in its ERR shape.
		{"a look-alike ctx", strings.Replace(plan(`{"test_mode":true}`), `"ctx"`, `"CTX"`, 1), `"path":"CTX"`, http.StatusUnprocessableEntity},
		{"a flag that is not a boolean", plan(`{"test_mode":"yes"}`), "payload.ctx.test_mode", http.StatusBadRequest},
	} {
		t.Run(tc.name, func(t *testing.T) {
			w := h.send("orch", strings.Replace(tc.body, "m_dry", "m_"+strings.ReplaceAll(tc.name, " ", "_"), 1))
			if w.Code != tc.status || !strings.Contains(w.Body.String(), tc.field) {
				t.Errorf("%d %s, want %d naming %s", w.Code, w.Body, tc.status, tc.field)
			}
		})
	}
	bad := strings.Replace(plan(`{"test_mode":true}`), `"search"`, `"fly"`, 1)
	if w := h.send("orch", strings.Replace(bad, "m_dry", "m_dry_bad", 1)); w.Code != http.StatusUnprocessableEntity || !strings.Contains(w.Body.String(), "UNKNOWN_VERB") {
		t.Errorf("dry run of an invalid plan: %d %s", w.Code, w.Body)
	}
}

func anyStrings(v any) []string {
	var out []string
	for _, x := range v.([]any) {
		out = append(out, x.(string))
	}
	return out
}
