package app

import (
	"strings"
	"testing"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
)

// The shipped config/ is the quickstart: its banner names the URL a local
// client reaches, every demo token, and a first request that works (a
// plain agent, a model the mock serves and the agent may use).
func TestQuickstartBannerOfTheShippedConfig(t *testing.T) {
	cfg, err := config.Load("../config")
	if err != nil {
		t.Fatal(err)
	}
	got := quickstartBanner(cfg, "[::]:8080", false)
	for _, want := range []string{
		"gateway ready: http://localhost:8080",
		"agent claude-3", "gw-demo-claude-3", "gw-demo-copilot-2", "gw-demo-admin", "gw-demo-reviewer",
		"try (as copilot-2):", "Bearer gw-demo-copilot-2", `"model":"mock-1"`,
		"http://localhost:8080/review/ops",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("the banner lacks %q:\n%s", want, got)
		}
	}
}

// A config without demo tokens prints nothing: its logs stay JSON.
func TestNoBannerWithoutDemoTokens(t *testing.T) {
	cfg := &config.Config{Agents: map[string]*roster.Agent{"a": {TokenSHA256: roster.HashTokenHex("a-real-secret")}}}
	if got := quickstartBanner(cfg, "127.0.0.1:8080", false); got != "" {
		t.Errorf("banner %q, want none", got)
	}
}

func TestBaseURL(t *testing.T) {
	for addr, want := range map[string]string{
		"[::]:8080":      "http://localhost:8080",
		"0.0.0.0:9000":   "http://localhost:9000",
		":8080":          "http://localhost:8080",
		"127.0.0.1:8443": "https://127.0.0.1:8443",
	} {
		if got := LocalURL(addr, strings.HasSuffix(addr, "8443")); got != want {
			t.Errorf("LocalURL(%q) = %q, want %q", addr, got, want)
		}
	}
}
