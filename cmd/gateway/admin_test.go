package main

import (
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/config"
)

// TestAgentsAndKeysCommands: against a gateway that gateway init wrote and
// serve runs, the admin API's clients create an agent, issue it a key the
// agent then calls a model with, list the key without printing it, revoke
// it, and delete the agent; a refusal is one sentence with the API's
// message and exit 1; config check names a run-time agent the file now
// also defines.
func TestAgentsAndKeysCommands(t *testing.T) {
	c := newCLI(t)
	code, out, errb := c.run("init", "gw")
	if code != exitOK {
		t.Fatalf("init: %d %s", code, errb)
	}
	admin := regexp.MustCompile(`(?m)^  admin +(gw-[A-Za-z0-9_-]{43})$`).FindStringSubmatch(out)
	if admin == nil {
		t.Fatalf("no admin token in:\n%s", out)
	}
	dir := filepath.Join(c.dir, "gw")
	c.env = append(c.env, "GATEWAY_CONFIG="+dir)
	addr := serveCLI(t, c)
	c.env = append(c.env, "GATEWAY_URL=http://"+addr, "GATEWAY_ADMIN_TOKEN="+admin[1])
	chat := func(key string) int {
		req, _ := http.NewRequest("POST", "http://"+addr+"/v1/chat/completions", strings.NewReader(`{"model":"mock-1","messages":[{"role":"user","content":"hello"}]}`))
		req.Header.Set("Authorization", "Bearer "+key)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	must := func(args ...string) string {
		t.Helper()
		code, out, errb := c.run(args...)
		if code != exitOK {
			t.Fatalf("gateway %v: exit %d: %s", args, code, errb)
		}
		return out
	}

	must("agents", "create", "cli-bot", "--set", "type=coder", "--set", "rate_limit=100/minute", "--set", `models=["mock-*"]`)
	if code, _, errb := c.run("agents", "create", "typo-bot", "--set", "rate_limt=1/hour"); code != exitFailed || !strings.Contains(errb, `did you mean "rate_limit"?`) || strings.Count(strings.TrimSpace(errb), "\n") != 0 {
		t.Errorf("an unknown field: exit %d %q, want 1 and one sentence with a suggestion", code, errb)
	}
	if out := must("agents", "list"); !regexp.MustCompile(`(?m)^cli-bot +- +coder +runtime +active$`).MatchString(out) || !strings.Contains(out, "claude-3") {
		t.Errorf("agents list:\n%s", out)
	}
	code, key, errb := c.run("keys", "issue", "cli-bot", "--expires-in", "720h")
	key = strings.TrimSpace(key)
	if code != exitOK || !strings.HasPrefix(key, "gw-key-") || !strings.Contains(errb, "shown this once") {
		t.Fatalf("keys issue: %d %q %q", code, key, errb)
	}
	if st := chat(key); st != http.StatusOK {
		t.Fatalf("chat with the issued key: %d", st)
	}
	list := must("keys", "list", "cli-bot")
	id := regexp.MustCompile(`key_[0-9a-f]+`).FindString(list)
	if id == "" || strings.Contains(list, key) {
		t.Fatalf("keys list:\n%s", list)
	}

	// The file takes the run-time agent's name: config check says so.
	agents, _ := os.ReadFile(filepath.Join(dir, config.AgentsFile))
	clash := string(agents) + "  cli-bot:\n    token_sha256: \"" + strings.Repeat("ab", 32) + "\"\n"
	if err := os.WriteFile(filepath.Join(dir, config.AgentsFile), []byte(clash), 0o600); err != nil {
		t.Fatal(err)
	}
	if code, _, errb := c.run("config", "check", "--config", dir); code != exitFailed || !strings.Contains(errb, `agent "cli-bot" is also an agent created through the admin API`) {
		t.Errorf("config check with a clash: exit %d %q", code, errb)
	}
	if err := os.WriteFile(filepath.Join(dir, config.AgentsFile), agents, 0o600); err != nil {
		t.Fatal(err)
	}
	// The serving gateway reloads agents.yaml when it changes: wait until it
	// holds the restored file again (cli-bot a run-time agent), or a slow
	// reload of the clash would answer the next steps.
	runtimeBot := regexp.MustCompile(`(?m)^cli-bot +- +coder +runtime +active$`)
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		if runtimeBot.MatchString(must("agents", "list")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the gateway did not reload the restored agents.yaml within 20s")
		}
	}

	must("keys", "revoke", "cli-bot", id)
	if st := chat(key); st != http.StatusUnauthorized {
		t.Errorf("chat with the revoked key: %d, want 401", st)
	}
	must("agents", "delete", "cli-bot")
	if code, _, errb := c.run("keys", "list", "cli-bot"); code != exitFailed || !strings.Contains(errb, "not found. (HTTP 404)") {
		t.Errorf("keys of a deleted agent: %d %q", code, errb)
	}
	if code, _, _ := c.run("agents", "list", "--token", "wrong"); code != exitFailed {
		t.Errorf("a wrong token: exit %d, want 1", code)
	}
}
