package config

import (
	"strings"
	"testing"
	"time"
)

// mcp_clients loads with its defaults, its base URL from
// approval.base_url when it names none.
func TestMCPClientsLoads(t *testing.T) {
	gw := okGateway + okPeople + "approval:\n  base_url: https://gw.example.org/\nmcp_clients: {}\n"
	cfg, err := loadFiles(t, gw, okAgents, okProtocol, map[string]string{"OIDC_SECRET": "s"})
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Gateway.MCPClients
	if m == nil || m.BaseURL != "https://gw.example.org" || m.AccessTokenTTL.D() != time.Hour || m.RefreshTokenTTL.D() != 720*time.Hour ||
		m.Resource("files") != "https://gw.example.org/mcp/files" ||
		m.ResourceMetadata("files") != "https://gw.example.org/.well-known/oauth-protected-resource/mcp/files" {
		t.Fatalf("mcp_clients = %+v", m)
	}
}

// mcp_clients fails closed: no base URL (the gateway would have to trust a
// client's Host header), a base URL in clear off loopback, no sign-in.
func TestMCPClientsProblems(t *testing.T) {
	env := map[string]string{"OIDC_SECRET": "s"}
	for _, tc := range []struct{ note, gw, want string }{
		{"no base URL", okPeople + "mcp_clients: {}\n", "mcp_clients.base_url: required (or approval.base_url)"},
		{"http base URL", okPeople + "mcp_clients:\n  base_url: http://gw.example.org\n", `mcp_clients.base_url "http://gw.example.org": want an https URL`},
		{"no people.oidc", "mcp_clients:\n  base_url: https://gw.example.org\n", "mcp_clients needs people.oidc"},
		{"access longer than refresh", okPeople + "mcp_clients:\n  base_url: https://gw.example.org\n  access_token_ttl: 48h\n  refresh_token_ttl: 24h\n",
			"mcp_clients.access_token_ttl is longer than refresh_token_ttl"},
	} {
		t.Run(tc.note, func(t *testing.T) {
			_, err := loadFiles(t, okGateway+tc.gw, okAgents, okProtocol, env)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("problems:\n%v\nwant one containing %q", err, tc.want)
			}
		})
	}
}
