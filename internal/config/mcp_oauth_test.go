package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tokenKey is a valid mcp.token_key (32 bytes in base64).
const tokenKey = "MDEyMzQ1Njc4OWFiY2RlZjAxMjM0NTY3ODlhYmNkZWY="

const mcpOAuthGateway = okGateway + `mcp:
  token_key: ${MCP_TOKEN_KEY}
  servers:
    - name: files
      url: https://files.internal/mcp
      oauth:
        client_credentials:
          token_url: https://auth.internal/token
          client_id: gateway
          client_secret: ${FILES_SECRET}
          scopes: [files.read]
    - name: docs
      url: https://docs.internal/mcp
      oauth:
        delegated:
          client_id: gateway
          scopes: [docs]
`

// TestMCPOAuthConfig: both kinds load, their secrets from the environment,
// and config check --explain shows neither the client secret nor the key.
func TestMCPOAuthConfig(t *testing.T) {
	env := map[string]string{"FILES_SECRET": "cc-s3cret", "MCP_TOKEN_KEY": tokenKey}
	cfg, err := loadFiles(t, mcpOAuthGateway, okAgents, okProtocol, env)
	if err != nil {
		t.Fatal(err)
	}
	m := cfg.Gateway.MCP
	if cc := m.Servers[0].OAuth.ClientCredentials; cc == nil || cc.ClientSecret != "cc-s3cret" || cc.TokenURL != "https://auth.internal/token" {
		t.Errorf("client_credentials = %+v", m.Servers[0].OAuth)
	}
	if d := m.Servers[1].OAuth.Delegated; d == nil || d.ClientID != "gateway" || d.TokenURL != "" {
		t.Errorf("delegated = %+v", m.Servers[1].OAuth)
	}
	dir := t.TempDir()
	for name, content := range map[string]string{GatewayFile: mcpOAuthGateway, AgentsFile: okAgents, ProtocolFile: okProtocol} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, settings, err := Explain(dir, Options{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := WriteSettings(&b, settings); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "cc-s3cret") || strings.Contains(b.String(), tokenKey) {
		t.Errorf("explained a secret:\n%s", b.String())
	}
}

// TestMCPOAuthConfigProblems: each mistake is a problem at its line, and
// no secret is quoted back.
func TestMCPOAuthConfigProblems(t *testing.T) {
	server := func(oauth string) string {
		return okGateway + "mcp:\n  servers:\n    - name: files\n      url: https://f/mcp\n      oauth:\n" + oauth
	}
	cc := "        client_credentials:\n          token_url: https://a/token\n          client_id: gw\n          client_secret: s3cret\n"
	cases := []struct{ note, gw, want string }{
		{"neither kind", server("        {}\n"), `gateway.yaml:9: mcp.servers[0].oauth: give one of client_credentials or delegated`},
		{"both kinds", server(cc + "        delegated:\n          client_id: gw\n"), `mcp.servers[0].oauth: give one of client_credentials or delegated`},
		{"plain http token url", server("        client_credentials:\n          token_url: http://a.example/token\n          client_id: gw\n          client_secret: x\n"),
			`gateway.yaml:11: mcp.servers[0].oauth.client_credentials.token_url "http://a.example/token": want an https URL (http only on a loopback address)`},
		{"no secret", server("        client_credentials:\n          token_url: https://a/token\n          client_id: gw\n"),
			`mcp.servers[0].oauth.client_credentials.client_secret: required; write it as ${VAR}`},
		{"no client id", server("        delegated:\n          scopes: [a]\n"), `mcp.servers[0].oauth.delegated.client_id: required`},
		{"delegated without a key", server("        delegated:\n          client_id: gw\n"), `mcp.token_key: required when a server has oauth.delegated`},
		{"bad key", okGateway + "mcp:\n  token_key: s3cret-not-a-key\n", `gateway.yaml:6: mcp.token_key: want 32 bytes in base64`},
		{"oauth on stdio", okGateway + "mcp:\n  servers:\n    - name: local\n      command: [cat]\n      oauth:\n" + cc,
			`gateway.yaml:9: mcp.servers[0].oauth: only a Streamable HTTP server (url) has one`},
		{"authorization header beside oauth", okGateway + "mcp:\n  servers:\n    - name: files\n      url: https://f/mcp\n      headers:\n        Authorization: x\n      oauth:\n" + cc,
			`gateway.yaml:10: mcp.servers[0].headers: Authorization is the oauth token's`},
		{"unknown key", server("        client_credential:\n          token_url: https://a/token\n"), `unknown key "client_credential" in mcp.servers.0.oauth (did you mean "client_credentials"?)`},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			_, err := loadFiles(t, tc.gw, okAgents, okProtocol, nil)
			if err == nil {
				t.Fatalf("loaded; want %q", tc.want)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("problems:\n%v\nwant one containing %q", err, tc.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("a secret is quoted back:\n%v", err)
			}
		})
	}
}
