package approval

import (
	"encoding/json"
	"slices"
	"testing"
)

// FuzzDecodeAgentRequest: the decoder never panics, and whatever it
// accepts has a known request_type and action (a REPORT may leave action to
// the request it reports on) and survives a JSON round trip unchanged.
func FuzzDecodeAgentRequest(f *testing.F) {
	for _, s := range []string{
		`{"agent_id":"claude-3","session_id":"sess-123","request_type":"APPROVAL","action":"create","target_type":"design","target_path":"docs/design/new-feature.md","content":"# New Feature Design\n...","rationale":"Implementing user story US-123","references":["arch-001","req-045"],"deviations":[]}`,
		`{"agent_id":"copilot-2","request_type":"QUERY","content":"What are the current authentication requirements?"}`,
		`{"agent_id":"claude-3","request_type":"REPORT","request_id":"req-1","completed":true,"changes_made":{"content_sha256":"sha256:0000000000000000000000000000000000000000000000000000000000000000"}}`,
		`{"agent_id":"claude-3","request_type":"REPORT","request_id":"req-1","completed":false,"changes_made":["a.md"]}`,
		`{"agent_id":"a","request_type":"VALIDATE","action":"delete","timestamp":"2025-11-02T09:00:00Z","deviations":[{"rule":"x"}]}`,
		`{"agent_id":"a","agent_id":"b"}`,
		`{"a":{"b":[{"c":1,"c":2}]}}`,
		`[]`, `null`, `{}`, "\xff",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := DecodeAgentRequest(body)
		if err != nil {
			if req != nil {
				t.Fatal("a request and an error")
			}
			return
		}
		if !slices.Contains(requestTypes, req.RequestType) {
			t.Fatalf("accepted request_type %q", req.RequestType)
		}
		if !slices.Contains(actions, req.Action) && (req.RequestType != TypeReport || req.Action != "") {
			t.Fatalf("accepted action %q for %s", req.Action, req.RequestType)
		}
		if req.AgentID == "" || (req.RequestType == TypeReport && req.RequestID == "") {
			t.Fatalf("accepted without agent_id or request_id: %+v", req)
		}
		if req.ChangesMade != nil && req.ChangesMade.ContentSHA256 != "" && len(req.ChangesMade.ContentSHA256) != 64 {
			t.Fatalf("digest %q", req.ChangesMade.ContentSHA256)
		}
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		again, err := DecodeAgentRequest(b)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", b, err)
		}
		b2, _ := json.Marshal(again)
		if string(b) != string(b2) {
			t.Fatalf("round trip changed the request:\n%s\n%s", b, b2)
		}
	})
}
