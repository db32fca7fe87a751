package app

import (
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"
)

// The gateway used to POST to whatever an agent's endpoint named, loopback
// and metadata included, and its error texts ("refused with 307",
// connection errors) let a caller scan ports. In a default install the
// endpoints of this test (on loopback) are refused at dial time: nothing
// reaches them, and the caller reads one sentence whatever the failure.
func TestSecurityEndpointsOnPrivateAddressesAreNotCalled(t *testing.T) {
	g := newA2A(t, a2aOpts{publicOnly: true})
	status, resp := g.send("orch_1", `{"message_type":"request","sender_id":"orch_1","receiver_id":"planner_1","workflow_id":"wf_ssrf","action":"plan_workflow","payload":{}}`)
	msg := str(resp["error"].(map[string]any)["message"])
	if status != http.StatusBadGateway || strings.Contains(msg, "127.0.0.1") || strings.Contains(msg, "refused") || strings.Contains(msg, "dial") {
		t.Fatalf("%d %q", status, msg)
	}
	time.Sleep(50 * time.Millisecond)
	if n := len(g.peers["planner_1"].Received()); n != 0 {
		t.Fatalf("the loopback endpoint received %d requests", n)
	}
	found := false
	for _, e := range g.entries("message.delivery") {
		if strings.Contains(string(e.Summary), `"cause":"destination_not_allowed"`) {
			found = true
		}
	}
	if !found {
		t.Error("the audit entry does not say the destination was refused")
	}
}

var msgID = regexp.MustCompile(`[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}`)

// Different failures of a recipient give the caller the same sentence.
func TestSecurityDeliveryErrorsRevealNothing(t *testing.T) {
	g := newA2A(t, a2aOpts{})
	answers := map[string]func(http.ResponseWriter, *http.Request, []byte){
		"redirect": func(w http.ResponseWriter, r *http.Request, _ []byte) {
			http.Redirect(w, r, "http://169.254.169.254/latest", http.StatusTemporaryRedirect)
		},
		"500":     func(w http.ResponseWriter, _ *http.Request, _ []byte) { w.WriteHeader(http.StatusInternalServerError) },
		"garbage": func(w http.ResponseWriter, _ *http.Request, _ []byte) { _, _ = w.Write([]byte("SSH-2.0-OpenSSH_9.6")) },
	}
	seen := map[string]string{}
	i := 0
	for name, h := range answers {
		g.peers["planner_1"].Set(h)
		i++
		_, resp := g.send("orch_1", `{"message_type":"request","sender_id":"orch_1","receiver_id":"planner_1","workflow_id":"wf_oracle_`+itoa(i)+`","action":"plan_workflow","payload":{}}`)
		msg := str(resp["error"].(map[string]any)["message"])
		// Message ids differ; the rest of the sentence must not.
		seen[name] = msgID.ReplaceAllString(msg, "<id>")
		if s := seen[name]; strings.Contains(s, "SSH") || strings.Contains(s, "500") || strings.Contains(s, "307") {
			t.Errorf("%s: the caller reads the recipient's answer: %q", name, msg)
		}
	}
	if seen["redirect"] != seen["500"] || seen["500"] != seen["garbage"] {
		t.Errorf("failures are told apart: %v", seen)
	}
}

// The approval webhook goes through the same check: a webhook on loopback
// is not called in a default install, and is once allowed_networks lists it.
func TestSecurityWebhookOnLoopbackIsNotCalled(t *testing.T) {
	for _, publicOnly := range []bool{true, false} {
		hook := newPeer(t)
		g := newA2A(t, a2aOpts{publicOnly: publicOnly, messagingExtra: "approval:\n  webhook: " + hook.Srv.URL + "/hook\n"})
		status, body, _ := g.do(http.MethodPost, "/registry/spawn", "tok-orch_1", `{"g":"SPAWN_AGENT","plan":[["define","HOOK_Q",{"description":"x"}],["instantiate","HOOK_AGENT",{"tool":"HOOK_Q","verb":"check","endpoint":"https://hook-agent.example.org/in"}]]}`)
		if status != http.StatusAccepted {
			t.Fatalf("spawn: %d %s", status, body)
		}
		time.Sleep(300 * time.Millisecond)
		if got := len(hook.Received()); publicOnly != (got == 0) {
			t.Errorf("publicOnly=%v: the webhook received %d posts", publicOnly, got)
		}
	}
}
