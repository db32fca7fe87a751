package app

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSpawnedAgentLives: an approved spawn gets a token, shown once, and a
// prompt; the new agent sends with that token to the agent that spawned it
// (and to nobody else), still after the gateway restarted on the same
// files (memory backend: the state dir keeps it), until an admin retires it.
func TestSpawnedAgentLives(t *testing.T) {
	g := newA2A(t, a2aOpts{})
	status, body, _ := g.do(http.MethodPost, "/registry/spawn", "tok-orch_1", `{"g":"SPAWN_AGENT","plan":[["define","VISA_Q",{"description":"Visa rules","inputs":["nationality"],"outputs":["visa_required"]}],["instantiate","VISA_AGENT",{"tool":"VISA_Q","verb":"check"}]]}`)
	if status != http.StatusCreated {
		t.Fatalf("spawn: %d %s", status, body)
	}
	var spawned struct {
		Token  string `json:"token"`
		Prompt string `json:"prompt"`
	}
	if err := json.Unmarshal(body, &spawned); err != nil || !strings.HasPrefix(spawned.Token, "gw-spawn-") || !strings.Contains(spawned.Prompt, "VISA_AGENT") {
		t.Fatalf("spawn answer %s: want a token and the agent's prompt", body)
	}
	send := func(g *a2a, to string) (int, []byte) {
		status, body, _ := g.do(http.MethodPost, "/relay/messages", spawned.Token,
			`{"message_type":"notification","sender_id":"VISA_AGENT","receiver_id":"`+to+`","workflow_id":"wf_visa","action":"visa_ready","payload":{"visa_required":false}}`)
		return status, body
	}
	if status, body := send(g, "orch_1"); status != http.StatusAccepted {
		t.Fatalf("the spawned agent to its spawner: %d %s", status, body)
	}
	g.peers["orch_1"].WaitFor(1)
	if status, body := send(g, "planner_1"); status != http.StatusForbidden {
		t.Errorf("the spawned agent to another agent: %d %s, want 403", status, body)
	}
	// The token is on no audit entry: only the spawn's answer showed it.
	files, _ := filepath.Glob(filepath.Join(g.auditDir, "*.jsonl"))
	if len(files) == 0 {
		t.Fatalf("no audit segment in %s to check", g.auditDir)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), spawned.Token) {
			t.Errorf("%s carries the spawned agent's token", f)
		}
	}

	g.stop()
	g2 := newA2A(t, a2aOpts{dir: g.dir, peers: g.peers, auditDir: g.auditDir})
	if status, body := send(g2, "orch_1"); status != http.StatusAccepted {
		t.Fatalf("after the restart: %d %s", status, body)
	}
	if status, _, _ := g2.do(http.MethodDelete, "/registry/agents/VISA_AGENT", "tok-reviewer", ""); status != http.StatusForbidden {
		t.Errorf("a reviewer retires: %d, want 403", status)
	}
	if status, body, _ := g2.do(http.MethodDelete, "/registry/agents/VISA_AGENT", "tok-admin", ""); status != http.StatusNoContent {
		t.Fatalf("the admin retires: %d %s", status, body)
	}
	if status, _ := send(g2, "orch_1"); status != http.StatusUnauthorized {
		t.Errorf("a retired agent's token: %d, want 401", status)
	}
}

// A spawn's endpoint on loopback is refused at once (422), before any
// person is asked, in every form that names the address: inet_aton's
// short, decimal, hex and octal forms, a trailing dot, an IPv4-mapped or
// bracketed IPv6 literal, and a zoned IPv6 literal. Each gets the same
// answer as the canonical form.
func TestSpawnEndpointLiteralFormsAreRefused(t *testing.T) {
	g := newA2A(t, a2aOpts{publicOnly: true})
	spawn := func(i int, endpoint string) (int, string) {
		name := "LIT_AGENT_" + itoa(i)
		body := `{"g":"SPAWN_AGENT","plan":[["define","LIT_Q_` + itoa(i) + `",{"description":"x"}],["instantiate","` + name +
			`",{"tool":"LIT_Q_` + itoa(i) + `","verb":"check","endpoint":` + jsonQuote(endpoint) + `}]]}`
		status, out, _ := g.do(http.MethodPost, "/registry/spawn", "tok-orch_1", body)
		return status, string(out)
	}
	wantStatus, want := spawn(0, "http://127.0.0.1:9000/in")
	if wantStatus != http.StatusUnprocessableEntity {
		t.Fatalf("the canonical loopback endpoint: %d %s, want 422", wantStatus, want)
	}
	for i, endpoint := range []string{
		"http://127.1:9000/in", "http://2130706433:9000/in", "http://0x7f000001:9000/in", "http://0177.0.0.1:9000/in",
		"http://127.0.0.1.:9000/in", "http://[::1]/in", "http://[::ffff:127.0.0.1]:9000/in",
		"http://[fe80::1%25eth0]:9000/in", "http://[2606:4700::1111%25eth0]:9000/in", "http://127.0.0.999:9000/in",
	} {
		status, out := spawn(i+1, endpoint)
		if status != wantStatus || out != want {
			t.Errorf("%s: %d %s, want the canonical form's %d %s", endpoint, status, out, wantStatus, want)
		}
	}
}
