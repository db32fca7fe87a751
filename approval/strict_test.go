package approval

import (
	"errors"
	"testing"

	"github.com/sacpgw/gateway/internal/apierror"
)

// The policy must judge the same request the stored bytes show: a key
// that differs from a field only by case, or a key named twice, is a 400
// naming the key, never read one way by the gateway and another by an
// auditor.
func TestDecodeAgentRequestOneReading(t *testing.T) {
	cases := []struct{ note, body, param string }{
		{"content and Content", `{"agent_id":"a","request_type":"APPROVAL","action":"create","content":"harmless","Content":"rm -rf /"}`, "Content"},
		{"only a case variant", `{"agent_id":"a","request_type":"APPROVAL","action":"create","Content":"rm -rf /"}`, "Content"},
		{"duplicate content", `{"agent_id":"a","request_type":"APPROVAL","action":"create","content":"harmless","content":"rm -rf /"}`, "content"},
		{"nested case variant", `{"agent_id":"a","request_type":"REPORT","changes_made":{"Files":["x"]}}`, "Files"},
	}
	for _, tc := range cases {
		_, err := DecodeAgentRequest([]byte(tc.body))
		var e *apierror.Error
		if !errors.As(err, &e) || e.Status != 400 || e.Param != tc.param {
			t.Errorf("%s: got %v, want 400 naming %q", tc.note, err, tc.param)
		}
	}
	if _, err := DecodeAgentRequest([]byte(`{"agent_id":"a","request_type":"APPROVAL","action":"create","content":"fine"}`)); err != nil {
		t.Fatalf("a plain request is refused: %v", err)
	}
}
