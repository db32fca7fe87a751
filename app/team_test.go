package app

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/testredis"
	"github.com/sacpgw/gateway/usagepage"
)

// teamAgents are agents.yaml for the team tests: three agents of team ds
// (no limits of their own), one of team frozen, one in no team.
const teamAgents = `agents:
  ds-1: {type: coder, team: ds, token_sha256: "` + "%ds-1%" + `"}
  ds-2: {type: coder, team: ds, token_sha256: "` + "%ds-2%" + `"}
  ds-3: {type: coder, team: ds, token_sha256: "` + "%ds-3%" + `"}
  fz-1: {type: coder, team: frozen, token_sha256: "` + "%fz-1%" + `"}
  solo: {type: coder, token_sha256: "` + "%solo%" + `"}
`

// teamsYAML: ds shares 10 requests an hour; frozen has no limits (a
// policy refuses it).
const teamsYAML = `teams:
  ds:
    description: the analysts' agents
    rate_limit: 10/hour
  frozen: {}
`

// newTeamGateway is a gateway on the shared state target (a Redis URL,
// or "" for the memory backend in stateDir) with the teams above and a
// chat rule that refuses team frozen by input.agent.team.
func newTeamGateway(t *testing.T, target, stateDir string) *a2a {
	t.Helper()
	dir, auditDir, files := teamFiles(t, target, stateDir)
	g := serveApp(t, dir, auditDir, files)
	checkSlots(t, g.app)
	return g
}

// teamFiles writes the rule and returns the config dir, the audit dir
// and the config files of newTeamGateway.
func teamFiles(t *testing.T, target, stateDir string) (dir, auditDir string, files map[string]string) {
	t.Helper()
	dir = t.TempDir()
	auditDir = filepath.Join(dir, "audit")
	pdir := filepath.Join(dir, "rego")
	if err := os.CopyFS(pdir, os.DirFS(policyDir(a2aOpts{}))); err != nil {
		t.Fatal(err)
	}
	rule := "package gateway.rules.chat.team_freeze\n\ndeny contains \"team frozen may not call models\" if input.agent.team == \"frozen\"\n"
	if err := os.MkdirAll(filepath.Join(pdir, "gateway", "rules", "chat", "team_freeze"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(pdir, "gateway", "rules", "chat", "team_freeze", "team_freeze.rego"), []byte(rule), 0o600); err != nil {
		t.Fatal(err)
	}
	state := "state:\n  backend: memory\n  dir: " + stateDir + "\n"
	if target != "" {
		state = "state:\n  backend: redis\n" + redisYAML(target) + "  on_failure: closed\n  timeout: 2s\n"
	}
	gw := `listen: "127.0.0.1:0"
admin:
  token_sha256: "` + roster.HashTokenHex("tok-admin") + `"
upstreams:
  - {name: mock, type: mock, models: ["*"]}
policy:
  dir: ` + pdir + `
audit:
  dir: ` + auditDir + `
` + state
	agents := teamAgents
	for _, id := range []string{"ds-1", "ds-2", "ds-3", "fz-1", "solo"} {
		agents = strings.Replace(agents, "%"+id+"%", roster.HashTokenHex("tok-"+id), 1)
	}
	return dir, auditDir, map[string]string{
		config.GatewayFile:  gw,
		config.AgentsFile:   agents,
		config.ProtocolFile: "protocol:\n  version: \"1.0\"\n",
		config.TeamsFile:    teamsYAML,
	}
}

// chatBody sends one chat as agent and returns the status and the error
// message, if any.
func teamChat(t *testing.T, base, agent string) (int, string) {
	t.Helper()
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, base+"/v1/chat/completions",
		strings.NewReader(`{"model":"mock-1","messages":[{"role":"user","content":"hi"}]}`))
	req.Header.Set("Authorization", "Bearer tok-"+agent)
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var e struct {
		Error struct{ Message string } `json:"error"`
	}
	_ = json.Unmarshal(b, &e)
	return resp.StatusCode, e.Error.Message
}

// TestTeamRateLimitAcrossReplicas: the agents of one team share its
// rate_limit on every replica: 40 chats from three agents of team ds,
// spread over two gateways on one Redis, against 10 an hour: exactly 10
// pass, every refusal names the team's limit; an agent in no team is not
// counted against it. Rego sees the team: a rule on input.agent.team
// refuses team frozen's agent.
func TestTeamRateLimitAcrossReplicas(t *testing.T) {
	target := testredis.Start(t).URL()
	gs := []*a2a{newTeamGateway(t, target, ""), newTeamGateway(t, target, "")}
	const total, limit = 40, 10
	var ok, limited atomic.Int32
	var wg sync.WaitGroup
	for i := range total {
		wg.Go(func() {
			st, msg := teamChat(t, gs[i%2].srv.URL, []string{"ds-1", "ds-2", "ds-3"}[i%3])
			switch {
			case st == http.StatusOK:
				ok.Add(1)
			case st == http.StatusTooManyRequests && strings.Contains(msg, "Rate limit reached for team ds") && strings.Contains(msg, "10/hour"):
				limited.Add(1)
			default:
				t.Errorf("status %d: %s", st, msg)
			}
		})
	}
	wg.Wait()
	if ok.Load() != limit || limited.Load() != total-limit {
		t.Errorf("admitted %d, limited %d of %d against the team's %d/hour", ok.Load(), limited.Load(), total, limit)
	}
	if st, msg := teamChat(t, gs[1].srv.URL, "solo"); st != http.StatusOK {
		t.Errorf("agent in no team: %d %s", st, msg)
	}
	if st, msg := teamChat(t, gs[0].srv.URL, "fz-1"); st != http.StatusForbidden || !strings.Contains(msg, "team frozen may not call models") {
		t.Errorf("team frozen's agent: %d %s, want the policy's refusal", st, msg)
	}
}

// TestUsageSurvivesRestart: the requests of a team's agents are on the
// usage page, per team and per agent, after the gateway restarted (the
// memory backend's file of state.dir), and the page is the admin's; a
// request refused before any model call is not counted.
func TestUsageSurvivesRestart(t *testing.T) {
	stateDir := t.TempDir()
	dir, auditDir, files := teamFiles(t, "", stateDir)
	_, a, auditLog := buildFromFiles(t, dir, files)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { a.Run(ctx); close(done) }()
	srv := httptest.NewServer(a.Handler())
	for _, agent := range []string{"ds-1", "ds-1", "ds-2", "solo"} {
		if st, msg := teamChat(t, srv.URL, agent); st != http.StatusOK {
			t.Fatalf("%s: %d %s", agent, st, msg)
		}
	}
	if st, _ := teamChat(t, srv.URL, "fz-1"); st != http.StatusForbidden {
		t.Fatalf("fz-1: %d, want the policy's refusal", st)
	}
	// The restart: the server stops, Run flushes what it summed.
	srv.Close()
	cancel()
	<-done
	a.Close()
	auditLog.Close()

	g := serveApp(t, dir, auditDir, files)
	if res, err := http.Get(g.srv.URL + usagepage.Path); err != nil || res.Request.URL.Path != "/review/login" {
		t.Fatalf("signed out: %v, want the sign-in form", err)
	}
	page := adminPage(t, g.srv.URL, usagepage.Path)
	for _, want := range []string{`id="usage-ds"`, "3 in 30 days", `id="usage-ds-1"`, "2 in 30 days", `id="usage-solo"`, `name="viewport"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the usage page after a restart lacks %s:\n%s", want, page)
		}
	}
	if strings.Contains(page, `id="usage-frozen"`) || strings.Contains(page, `id="usage-fz-1"`) {
		t.Errorf("a request the policy refused before any model call is counted")
	}
}

// adminPage signs in with the admin token and returns the page at path.
func adminPage(t *testing.T, base, path string) string {
	t.Helper()
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	res, err := browser.PostForm(base+"/review/login", url.Values{"token": {"tok-admin"}, "next": {path}})
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	if res.StatusCode != http.StatusOK || res.Request.URL.Path != path {
		t.Fatalf("sign-in to %s: %d at %s", path, res.StatusCode, res.Request.URL)
	}
	return string(b)
}
