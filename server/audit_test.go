package server_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sacpgw/gateway/audit"
)

type entry struct {
	Seq           int64          `json:"seq"`
	Kind          string         `json:"kind"`
	AgentID       string         `json:"agent_id"`
	SessionID     string         `json:"session_id"`
	RequestID     string         `json:"request_id"`
	PayloadSHA256 string         `json:"payload_sha256"`
	Summary       map[string]any `json:"summary"`
}

// entries reads the chain's segments (the audit writer has acknowledged
// every entry before the gateway answered, so they are on disk).
func (s *stack) entries() ([]entry, string) {
	s.t.Helper()
	files, _ := filepath.Glob(filepath.Join(s.auditDir, "*.jsonl"))
	var out []entry
	var raw strings.Builder
	for _, f := range files {
		if strings.Contains(f, "checkpoints") {
			continue
		}
		fh, err := os.Open(f)
		if err != nil {
			s.t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(nil, 4<<20)
		for sc.Scan() {
			raw.WriteString(sc.Text() + "\n")
			var e entry
			if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
				s.t.Fatalf("audit line is not JSON: %v", err)
			}
			out = append(out, e)
		}
		fh.Close()
	}
	return out, raw.String()
}

func TestAuditEntriesForARequest(t *testing.T) {
	_, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, completion("audited answer"))
	})
	st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1"})
	body := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"audit me"}]}`
	resp := st.post("/v1/chat/completions", "tok-alpha", body, "X-Session-Id", "sess-9", "X-Correlation-Id", "corr-7")
	answer := readAll(t, resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d: %s", resp.StatusCode, answer)
	}
	st.post("/v1/chat/completions", "tok-nobody", body)                                                  // auth.failure
	st.post("/v1/chat/completions", "tok-restricted", strings.Replace(body, "gpt-4o-mini", "gpt-4o", 1)) // refused model
	entries, raw := st.entries()
	kinds := []string{}
	for _, e := range entries {
		kinds = append(kinds, e.Kind)
	}
	if strings.Join(kinds, ",") != "llm.request,llm.response,auth.failure,llm.request" {
		t.Fatalf("kinds = %v", kinds)
	}
	req, res := entries[0], entries[1]
	if req.AgentID != "alpha" || req.SessionID != "sess-9" || req.RequestID != resp.Header.Get("X-Request-Id") || req.Summary["correlation_id"] != "corr-7" {
		t.Errorf("request entry = %+v", req)
	}
	if req.PayloadSHA256 != sha(body) {
		t.Errorf("request payload hash %s is not the hash of the bytes sent", req.PayloadSHA256)
	}
	if res.PayloadSHA256 != sha(answer) {
		t.Errorf("response payload hash %s is not the hash of the bytes received", res.PayloadSHA256)
	}
	checks, _ := res.Summary["checks"].(map[string]any)
	policyCheck := checks["policy"].(map[string]any)
	if checks["auth"].(map[string]any)["verdict"] != "pass" || checks["limits"].(map[string]any)["verdict"] != "pass" ||
		policyCheck["verdict"] != "allow" || policyCheck["decision_id"] == "" || policyCheck["revision"] == "" ||
		checks["rbac"].(map[string]any)["verdict"] != "not_evaluated" {
		t.Errorf("checks = %v", checks)
	}
	if tok, _ := res.Summary["tokens"].(map[string]any); tok["total"] != float64(12) {
		t.Errorf("tokens = %v", res.Summary["tokens"])
	}
	if entries[3].Summary["error_code"] != "model_not_found" || entries[3].AgentID != "restricted" {
		t.Errorf("refusal entry = %+v", entries[3])
	}
	for _, secret := range []string{"tok-alpha", "tok-nobody", upstreamKey} {
		if strings.Contains(raw, secret) {
			t.Errorf("audit trail contains a credential %q", secret)
		}
	}
	st.audit.Close()
	rep, err := audit.Verify(st.auditDir, nil)
	if err != nil {
		t.Fatalf("verify: %v", err)
	}
	if rep.Entries != 4 {
		t.Errorf("verified %d entries", rep.Entries)
	}
}

func TestAuditStreamEntry(t *testing.T) {
	st := newStack(t, stackOpts{})
	resp := st.post("/v1/chat/completions", "tok-alpha", `{"model":"mock-1","stream":true,"messages":[{"role":"user","content":"s"}]}`)
	sent := readAll(t, resp.Body)
	if !strings.HasSuffix(sent, "data: [DONE]\n\n") {
		t.Fatalf("stream = %q", sent)
	}
	deadline := time.Now().Add(2 * time.Second)
	var entries []entry
	for time.Now().Before(deadline) {
		if entries, _ = st.entries(); len(entries) == 2 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(entries) != 2 || entries[1].Kind != "llm.response" || entries[1].PayloadSHA256 != sha(sent) {
		t.Fatalf("stream entries = %+v (want the response hash to cover every byte sent)", entries)
	}
}

func TestAuditFailClosed(t *testing.T) {
	st := newStack(t, stackOpts{brokenAudit: true})
	_, err := st.client("tok-alpha").Chat.Completions.New(context.Background(), userParams("mock-1", "x"))
	if e := apiErr(t, err); e.StatusCode != http.StatusServiceUnavailable || e.Code != "audit_unavailable" {
		t.Fatalf("closed fail mode with a dead audit trail: %d %s", e.StatusCode, e.Code)
	}
	stream := st.post("/v1/chat/completions", "tok-alpha", `{"model":"mock-1","stream":true,"messages":[{"role":"user","content":"s"}]}`)
	if stream.StatusCode != http.StatusServiceUnavailable {
		t.Fatalf("stream with a dead audit trail: %d", stream.StatusCode)
	}
	// The process keeps serving what does not need the trail.
	if resp, err := http.Get(st.srv.URL + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz: %v", err)
	}
}

func TestAuditFailOpenServes(t *testing.T) {
	st := newStack(t, stackOpts{brokenAudit: true, failMode: "open"})
	got, err := st.client("tok-alpha").Chat.Completions.New(context.Background(), userParams("mock-1", "x"))
	if err != nil || got.Choices[0].Message.Content == "" {
		t.Fatalf("open fail mode must serve: %v", err)
	}
}
