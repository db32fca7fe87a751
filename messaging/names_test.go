package messaging

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/internal/testkit"
	"github.com/sacpgw/gateway/mailbox"
)

// TestRedactionOfMemberNames: a payload's member names are the agents'
// text like its values. An address used as a key is masked before the
// recipient, the requester or the history (GET /relay/messages) see it,
// counted in the audit, and refuses the message where its detector blocks.
func TestRedactionOfMemberNames(t *testing.T) {
	h := newHarness(t, harnessOpts{protocolExtra: "  redaction:\n    messages: true\n    block: [ssn]\n"})
	h.peers["planner"].Set(testkit.ReplyWith(func(req map[string]any) string {
		return `{"message_type":"response","sender_id":"planner","receiver_id":"orch","in_reply_to":"` + str(req["message_id"]) +
			`","action":"plan_complete","payload":{"carol@example.org":{"n":42},"dave@example.org":1}}`
	}))
	req := `{"message_type":"request","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_names","action":"plan","payload":{"customers":{"alice@example.com":{"limit":100000}}}}`
	w := h.send("orch", req)
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	got := string(h.peers["planner"].Received()[0].Body)
	if strings.Contains(got, "alice@") || !strings.Contains(got, `"customers":{"[REDACTED:email]":{"limit":100000}}`) {
		t.Errorf("recipient got %s", got)
	}
	if answer := w.Body.String(); strings.Contains(answer, "@example") || !strings.Contains(answer, `"[REDACTED:email]#2":1`) {
		t.Errorf("requester got %s", answer)
	}
	history := h.historyOf("orch", "workflow_id=wf_names")
	if history.Code != http.StatusOK || strings.Contains(history.Body.String(), "@example") || strings.Count(history.Body.String(), "[REDACTED:email]") != 3 {
		t.Errorf("history: %d %s", history.Code, history.Body)
	}
	for _, e := range h.thread(mailbox.KeyWorkflow, "wf_names") {
		if strings.Contains(string(e.Envelope), "@example") {
			t.Errorf("the thread holds an address: %s", e.Envelope)
		}
	}
	red, _ := testkit.SummaryOf(h.records(KindMessage)[0])["checks"].(map[string]any)["redaction"].(map[string]any)
	if fmt.Sprint(red["counts"]) != "map[email:1]" {
		t.Errorf("audit redaction %v", red)
	}
	e := decodeError(t, h.send("orch", `{"message_type":"notification","sender_id":"orch","receiver_id":"planner","workflow_id":"wf_names","action":"x","payload":{"123-45-6789":true}}`),
		http.StatusBadRequest, "content_filter")
	if strings.Contains(e.Error.Message, "123-45") {
		t.Errorf("blocked name echoed: %+v", e.Error)
	}
}
