package app

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
)

// TestReloadReportsRestartOnlySettings: a reload that changes a setting
// read only at startup applies the rest and says which settings wait for
// a restart, in the log, the config.reload audit entry, /readyz and
// /metrics; putting the file back clears it.
func TestReloadReportsRestartOnlySettings(t *testing.T) {
	g := newA2A(t, a2aOpts{})
	path := filepath.Join(g.dir, "gateway.yaml")
	orig, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	changed := strings.Replace(string(orig), "  fail_mode: closed\n", "  fail_mode: closed\n  commit_delay: 7ms\n", 1)
	changed = strings.Replace(changed, "listen: \"127.0.0.1:0\"", "listen: \"127.0.0.1:9\"", 1)
	if changed == string(orig) || !strings.Contains(changed, "commit_delay") || !strings.Contains(changed, ":9\"") {
		t.Fatal("test config changed shape")
	}
	reload := func(content string) *config.Config {
		t.Helper()
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg := g.app.Reload(g.dir, g.cfg)
		if cfg == g.cfg {
			t.Fatal("the reload failed")
		}
		return cfg
	}
	readyz := func() string {
		_, body, _ := g.do(http.MethodGet, "/readyz", "", "")
		var r struct{ Checks map[string]string }
		_ = json.Unmarshal(body, &r)
		return r.Checks["config"]
	}
	metric := func() string {
		_, body, _ := g.do(http.MethodGet, "/metrics", "", "")
		for _, l := range strings.Split(string(body), "\n") {
			if strings.HasPrefix(l, "gateway_config_restart_pending ") {
				return l
			}
		}
		return ""
	}

	reload(changed)
	if got := readyz(); got != "ok; reloaded, but these settings take effect only after a restart: audit.commit_delay, listen" {
		t.Errorf("/readyz config check %q", got)
	}
	if got := metric(); got != "gateway_config_restart_pending 2" {
		t.Errorf("metric %q", got)
	}
	var pending []any
	for _, e := range g.entries(audit.KindConfigReload) {
		if p, ok := summaryOf(e)["restart_pending"].([]any); ok && len(p) > 0 {
			pending = p
		}
	}
	if len(pending) != 2 || pending[0] != "audit.commit_delay" || pending[1] != "listen" {
		t.Errorf("the config.reload entry's restart_pending: %v", pending)
	}

	reload(string(orig))
	if got := readyz(); got != "ok" {
		t.Errorf("after putting the file back, /readyz config check %q", got)
	}
	if got := metric(); got != "gateway_config_restart_pending 0" {
		t.Errorf("after putting the file back, metric %q", got)
	}
}

// A lowered rate limit takes effect at the reload without granting a
// fresh allowance: what the agent spent under the old limit counts.
func TestReloadKeepsWhatWasSpent(t *testing.T) {
	dir := t.TempDir()
	agents := func(limit string) string {
		return "agents:\n  a:\n    type: coder\n    token_sha256: \"" + roster.HashTokenHex("tok-a") + "\"\n    rate_limit: " + limit + "\n"
	}
	gw := "listen: \"127.0.0.1:0\"\nupstreams:\n  - {name: mock, type: mock, models: [\"mock-*\"]}\naudit: {dir: " + filepath.Join(dir, "audit") + ", chain: r}\n"
	g := serveApp(t, dir, filepath.Join(dir, "audit"), map[string]string{config.GatewayFile: gw, config.AgentsFile: agents("10/hour"), config.ProtocolFile: "protocol: {}\n"})
	cfg, a, srv := g.cfg, g.app, g.srv
	call := func() int {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"mock-1","messages":[{"role":"user","content":"hi"}]}`))
		req.Header.Set("Authorization", "Bearer tok-a")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	for i := range 6 {
		if s := call(); s != http.StatusOK {
			t.Fatalf("request %d under 10/hour: %d", i, s)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, config.AgentsFile), []byte(agents("5/hour")), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := a.Reload(dir, cfg); got == cfg {
		t.Fatal("the reload failed")
	}
	if s := call(); s != http.StatusTooManyRequests {
		t.Errorf("after lowering the limit to 5/hour with 6 spent: %d, want 429", s)
	}
}
