package messaging

import (
	"fmt"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/testkit"
)

// seedAgents are the two agents of the SAM example, registered by what
// they are (vendor, compliance), not by the role they take in it; roles
// is appended to each ("" for none).
func seedAgents(vendorRoles, complianceRoles string) string {
	return `  vendor_onboarding_agent:
    type: vendor
    endpoint: "%endpoint:vendor_onboarding_agent%"
` + vendorRoles + `    messages:
      - to: [compliance_agent]
        actions: [validate_vendor]
  compliance_agent:
    type: compliance
    endpoint: "%endpoint:compliance_agent%"
` + complianceRoles + `    messages:
      - to: [vendor_onboarding_agent]
        actions: ["*"]
`
}

var seedPeers = []string{"vendor_onboarding_agent", "compliance_agent"}

// seedSAM is the SAM example of the agent communication patterns (its
// placeholders filled in), and the time it was sent: the gateway's clock
// is set there so that its timestamp is current.
func seedSAM(t *testing.T) (string, func() time.Time) {
	t.Helper()
	b, err := os.ReadFile("testdata/seed003_sam_request.json")
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2025, 11, 23, 10, 0, 1, 0, time.UTC)
	return string(b), func() time.Time { return at }
}

// TestSeed003_1_2_SAMRoles: SAM roles belong to the conversation (the
// example's sender is the initiator, its recipient the validator), so an
// agent registered as a vendor may send it once it declares the role
// initiator, and the compliance agent receive it once it declares
// validator. Without the roles, the same envelope is a spoof, refused as
// before.
func TestSeed003_1_2_SAMRoles(t *testing.T) {
	env, now := seedSAM(t)
	t.Run("without roles", func(t *testing.T) {
		h := newHarness(t, harnessOpts{agents: seedAgents("", ""), peers: seedPeers, now: now})
		e := decodeError(t, h.send("vendor_onboarding_agent", env), http.StatusForbidden, "policy_denied")
		if param(e) != "sender.role" || !strings.Contains(e.Error.Message, `sender.role "initiator" is not the registered type "vendor"`) {
			t.Errorf("%q (param %q)", e.Error.Message, param(e))
		}
		assertRefused(t, h, "sender", "role_spoofed")
	})
	t.Run("with roles", func(t *testing.T) {
		h := newHarness(t, harnessOpts{agents: seedAgents("    roles: [initiator]\n", "    roles: [validator]\n"), peers: seedPeers, now: now})
		w := h.send("vendor_onboarding_agent", env)
		if w.Code != http.StatusOK {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		if ack := jsonBody(t, w); ack["message_type"] != "ACK" || ack["correlation_id"] != "corr-uuid-5678" {
			t.Errorf("ack %v", ack)
		}
		got := h.peers["compliance_agent"].Received()
		if len(got) != 1 || !strings.Contains(string(got[0].Body), `"role":"initiator"`) || !strings.Contains(string(got[0].Body), `"role":"validator"`) {
			t.Fatalf("compliance agent got %d messages", len(got))
		}
	})
	t.Run("recipient without the role", func(t *testing.T) {
		h := newHarness(t, harnessOpts{agents: seedAgents("    roles: [initiator]\n", ""), peers: seedPeers, now: now})
		e := decodeError(t, h.send("vendor_onboarding_agent", env), http.StatusForbidden, "policy_denied")
		if param(e) != "recipient.role" {
			t.Errorf("%q (param %q)", e.Error.Message, param(e))
		}
		assertRefused(t, h, "recipient", "type_mismatch")
	})
}

// TestRolesNoSpoof: declaring roles lets an agent claim those and its
// type, nothing else; the recipient's answer is held to its own roles.
func TestRolesNoSpoof(t *testing.T) {
	env, now := seedSAM(t)
	h := newHarness(t, harnessOpts{agents: seedAgents("    roles: [initiator]\n", "    roles: [validator]\n"), peers: seedPeers, now: now})
	for _, role := range []string{"validator", "approver", "Initiator", "orchestrator"} {
		t.Run(role, func(t *testing.T) {
			body := strings.Replace(env, `"role": "initiator"`, `"role": "`+role+`"`, 1)
			e := decodeError(t, h.send("vendor_onboarding_agent", body), http.StatusForbidden, "policy_denied")
			if param(e) != "sender.role" || !strings.Contains(e.Error.Message, `nor one of its roles "initiator"`) {
				t.Errorf("%q (param %q)", e.Error.Message, param(e))
			}
			assertRefused(t, h, "sender", "role_spoofed")
		})
	}
	if n := len(h.peers["compliance_agent"].Received()); n != 0 {
		t.Fatalf("compliance agent received %d refused messages", n)
	}
	t.Run("the registered type still passes", func(t *testing.T) {
		body := strings.Replace(env, `"role": "initiator"`, `"role": "vendor"`, 1)
		if w := h.send("vendor_onboarding_agent", body); w.Code != http.StatusOK {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	})
	t.Run("an answer claiming an undeclared role fails", func(t *testing.T) {
		h.peers["compliance_agent"].Set(testkit.ReplyWith(func(req map[string]any) string {
			return `{"message_id":"r-1","correlation_id":"corr-uuid-5678","sender":{"agent_id":"compliance_agent","role":"approver"},"recipient":{"agent_id":"vendor_onboarding_agent","role":"initiator"},"message_type":"RESPONSE","metadata":{"in_reply_to":"` + fmt.Sprint(req["message_id"]) + `"}}`
		}))
		body := strings.Replace(env, `"msg-uuid-1234"`, `"msg-uuid-4"`, 1)
		if w := h.send("vendor_onboarding_agent", body); w.Code != http.StatusBadGateway {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	})
	t.Run("an answer in the declared roles passes", func(t *testing.T) {
		h.peers["compliance_agent"].Set(testkit.ReplyWith(func(req map[string]any) string {
			return `{"message_id":"r-2","correlation_id":"corr-uuid-5678","sender":{"agent_id":"compliance_agent","role":"validator"},"recipient":{"agent_id":"vendor_onboarding_agent","role":"initiator"},"message_type":"RESPONSE","metadata":{"in_reply_to":"` + fmt.Sprint(req["message_id"]) + `"}}`
		}))
		body := strings.Replace(env, `"msg-uuid-1234"`, `"msg-uuid-5"`, 1)
		w := h.send("vendor_onboarding_agent", body)
		if w.Code != http.StatusOK || jsonBody(t, w)["message_id"] != "r-2" {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
	})
}

// assertRefused: the last message.reject entry records the check's verdict.
func assertRefused(t *testing.T, h *harness, check, verdict string) {
	t.Helper()
	rs := h.records(KindMessageReject)
	if len(rs) == 0 {
		t.Fatal("no message.reject entry")
	}
	if got := fmt.Sprint(testkit.SummaryOf(rs[len(rs)-1])["checks"].(map[string]any)[check]); got != verdict {
		t.Errorf("checks.%s = %v, want %s", check, got, verdict)
	}
}
