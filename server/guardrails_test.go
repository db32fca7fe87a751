package server_test

import (
	"strings"
	"testing"
)

// TestFailureWithSensitiveData: SACP's redaction guardrail (seed 000 §9.1)
// withholds the message of a failure whose data holds something sensitive
// (what a redaction detector finds), and keeps the message of a failure
// that carries only an error code.
func TestFailureWithSensitiveData(t *testing.T) {
	cases := []struct {
		note, answer, message string
		withheld              bool
	}{
		{"an e-mail address in data", `{"thought":"t","status":"failure","data":{"amount":0,"contact":"jane.doe@example.com"},"message":"could not reach jane.doe at her address"}`, "could not reach jane.doe", true},
		{"an error code only", `{"thought":"t","status":"failure","data":{"amount":0,"code":"TIMEOUT","retryable":true},"message":"the invoice service timed out"}`, "the invoice service timed out", false},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			up := &scripted{answers: []string{tc.answer}}
			_, us := newUpstream(t, up.handler)
			st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1"})
			content, _, _ := protoCall(t, st)
			obj := decodeSACP(t, content)
			msg, _ := obj["message"].(string)
			if obj["status"] != "failure" || strings.Contains(msg, tc.message) != !tc.withheld {
				t.Errorf("withheld=%v wanted, got %s", tc.withheld, content)
			}
			if tc.withheld && !strings.Contains(msg, "[REDACTED:guardrail]") {
				t.Errorf("message %q does not say why it is withheld", msg)
			}
		})
	}
}
