package app

import (
	"fmt"
	"net"
	"slices"
	"strings"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/proxy"
	"github.com/sacpgw/gateway/upstream"
)

// quickstartBanner is what a gateway serving published demo tokens (the
// shipped config/) prints once it listens: where it is, the tokens, and a
// first request to try. It is for the person who just typed go run; a
// config without demo tokens gets nothing (its operators read the JSON
// log line), so no production log is mixed with plain text.
func quickstartBanner(cfg *config.Config, addr string, tls bool) string {
	demo := cfg.DemoTokens()
	if len(demo) == 0 {
		return ""
	}
	url := LocalURL(addr, tls)
	var b strings.Builder
	fmt.Fprintf(&b, "\ngateway ready: %s (config directory %s: %d agents, %d upstreams)\n", url, cfg.Dir, len(cfg.Agents), len(cfg.Gateway.Upstreams))
	b.WriteString("demo tokens (published in README: replace them before exposing this gateway):\n")
	width := 0
	for _, d := range demo {
		width = max(width, len(d.Who))
	}
	for _, d := range demo {
		fmt.Fprintf(&b, "  %-*s  %s\n", width, d.Who, d.Token)
	}
	if agent, token, model := firstTry(cfg, demo); agent != "" {
		fmt.Fprintf(&b, "try (as %s):\n  curl -s %s/v1/chat/completions -H 'Authorization: Bearer %s' -H 'Content-Type: application/json' \\\n    -d '{\"model\":\"%s\",\"messages\":[{\"role\":\"user\",\"content\":\"Hello, gateway\"}]}'\n",
			agent, url, token, model)
	}
	if slices.ContainsFunc(demo, func(d config.DemoCredential) bool { return d.Agent == "" }) {
		fmt.Fprintf(&b, "people: %s/review/ops and %s/review/queue (sign in with the admin or reviewer token)\n", url, url)
	}
	b.WriteString("docs: README.md, docs/operations.md; stop with Ctrl-C\n\n")
	return b.String()
}

// firstTry picks the demo agent and model of the first request to try:
// an agent without a response protocol (its answer is plain text) if
// there is one, and a model that agent may use and an upstream routes,
// the built-in mock's first.
func firstTry(cfg *config.Config, demo []config.DemoCredential) (agent, token, model string) {
	var agents []config.DemoCredential
	for _, d := range demo {
		if d.Agent != "" {
			agents = append(agents, d)
		}
	}
	// Plain agents first; the sort is stable, so id order stays within.
	slices.SortStableFunc(agents, func(a, b config.DemoCredential) int {
		pa, pb := cfg.Agents[a.Agent].ResponseFormat == "none", cfg.Agents[b.Agent].ResponseFormat == "none"
		switch {
		case pa && !pb:
			return -1
		case pb && !pa:
			return 1
		}
		return 0
	})
	for _, d := range agents {
		if m := triableModel(cfg, cfg.Agents[d.Agent]); m != "" {
			return d.Agent, d.Token, m
		}
	}
	return "", "", ""
}

// triableModel is a literal model name that an upstream routes and the
// agent may use: mock upstreams' first (they answer without a key).
func triableModel(cfg *config.Config, a *roster.Agent) string {
	ups := slices.Clone(cfg.Gateway.Upstreams)
	slices.SortStableFunc(ups, func(x, y upstream.Config) int {
		switch {
		case x.Type == "mock" && y.Type != "mock":
			return -1
		case y.Type == "mock" && x.Type != "mock":
			return 1
		}
		return 0
	})
	for _, u := range ups {
		for _, m := range u.Models {
			name := m
			if strings.ContainsAny(m, "*?[\\") {
				// A glob: "mock-*" is tried as "mock-1".
				name = strings.NewReplacer("*", "1", "?", "1").Replace(m)
				if strings.ContainsAny(name, "[\\") {
					continue
				}
			}
			if proxy.Allowed(a, name) {
				return name
			}
		}
	}
	return ""
}

// LocalURL is the URL a client on this machine reaches addr at (tls: https).
func LocalURL(addr string, tls bool) string {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	return scheme + "://" + net.JoinHostPort(host, port)
}
