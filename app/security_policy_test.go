package app

import (
	"encoding/json"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// copyRego copies the repository's policies into a directory the test may
// edit.
func copyRego(t *testing.T) string {
	t.Helper()
	dst := t.TempDir()
	err := filepath.WalkDir("../rego", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".rego") {
			return err
		}
		rel, _ := filepath.Rel("../rego", p)
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Join(dst, filepath.Dir(rel)), 0o755); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(dst, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return dst
}

// A Rego change that compiles but leaves data.gateway.chat.deny undefined
// used to be loaded: every chat was then 403 while /readyz said ready. It
// is now refused: chats are still decided by the last good policy, and
// /readyz says why.
func TestSecurityPolicyThatDoesNotEvaluateIsNotLoaded(t *testing.T) {
	dir := copyRego(t)
	g := newA2A(t, a2aOpts{policyDir: dir})
	chat := func() int {
		st, _, _ := g.do(http.MethodPost, "/v1/chat/completions", "tok-orch_1", `{"model":"mock-1","messages":[{"role":"user","content":"hi"}]}`)
		return st
	}
	if st := chat(); st != http.StatusOK {
		t.Fatalf("before: %d", st)
	}
	p := filepath.Join(dir, "gateway", "chat", "chat.rego")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	broken := strings.Replace(string(b), "package gateway.chat", "package gateway.chat_renamed", 1)
	if err := os.WriteFile(p, []byte(broken), 0o644); err != nil {
		t.Fatal(err)
	}
	var body string
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		_, b, _ := g.do(http.MethodGet, "/readyz", "", "")
		if body = string(b); strings.Contains(body, "last reload was rejected") {
			break
		}
	}
	if !strings.Contains(body, `"status":"ready"`) || !strings.Contains(body, "data.gateway.chat.deny") {
		t.Fatalf("readyz: %s", body)
	}
	if st := chat(); st != http.StatusOK {
		t.Fatalf("after the broken reload the chat is %d", st)
	}
	found := false
	for _, e := range g.entries("policy.reload") {
		if strings.Contains(string(e.Summary), `"ok":false`) {
			found = true
		}
	}
	if !found {
		t.Error("no policy.reload entry with ok:false")
	}
}

// Spawned agents were accepted under any name, "gateway" and markup
// included: names appear in the review page, the audit trail and as
// senders. One pattern holds for configured and spawned agents.
func TestSecuritySpawnNamesFollowOnePattern(t *testing.T) {
	g := newA2A(t, a2aOpts{})
	for _, name := range []string{"gateway", "human", "<script>x</script>", strings.Repeat("A", 64)} {
		body := `{"g":"SPAWN_AGENT","plan":[["define","NAME_Q",{"description":"x"}],["instantiate",` + jsonQuote(name) + `,{"tool":"NAME_Q","verb":"check"}]]}`
		st, out, _ := g.do(http.MethodPost, "/registry/spawn", "tok-orch_1", body)
		if st != http.StatusUnprocessableEntity || !strings.Contains(string(out), "INVALID_PARAMS") {
			t.Errorf("%q: %d %s", name, st, out)
		}
	}
}

func jsonQuote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// A spawn policy that does not decide in time is a fail-closed rejection
// (403, audited with fail_closed), not a 504 as if a provider had failed.
func TestSpawnPolicyTimeoutIsARejection(t *testing.T) {
	dir := copyRego(t)
	slow := `package gateway.spawn

decision := {"status": "approved", "reasons": ["quick"]} if {
	input.spawn.agent_name != "SLOW_AGENT"
} else := {"status": "approved", "reasons": ["slow"]} if {
	count([x | some x in numbers.range(1, 100000000); x % 7 == 0]) > 0
}
`
	if err := os.WriteFile(filepath.Join(dir, "gateway", "spawn", "spawn.rego"), []byte(slow), 0o644); err != nil {
		t.Fatal(err)
	}
	g := newA2A(t, a2aOpts{policyDir: dir, protocolExtra: "  timeouts:\n    validation: 200ms\n"})
	body := `{"g":"SPAWN_AGENT","plan":[["define","SLOW_Q",{"description":"x"}],["instantiate","SLOW_AGENT",{"tool":"SLOW_Q","verb":"check"}]]}`
	st, out, _ := g.do(http.MethodPost, "/registry/spawn", "tok-orch_1", body)
	if st != http.StatusForbidden || !strings.Contains(string(out), "policy_denied") || !strings.Contains(string(out), "fail closed") {
		t.Fatalf("a spawn policy that timed out: %d %s", st, out)
	}
	found := false
	for _, e := range g.entries("registry.spawn") {
		found = found || strings.Contains(string(e.Summary), `"fail_closed":true`)
	}
	if !found {
		t.Error("the fail-closed rejection was not audited")
	}
}
