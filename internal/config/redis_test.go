package config

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/internal/redisx"
)

// A Sentinel set with ACL credentials and TLS loads as given (the TLS
// files relative to the config dir), and Explain shows where the state
// lives but not the passwords.
func TestRedisBlockLoadsAndExplainHidesPasswords(t *testing.T) {
	dir := t.TempDir()
	gw := okGateway + `state:
  backend: redis
  redis:
    sentinel:
      master: gw-primary
      addrs: ["10.0.0.1:26379", "10.0.0.2:26379"]
      username: sentinel-user
      password: ${SENTINEL_PASSWORD}
    username: gateway
    password: data-secret-1
    db: 1
    tls:
      ca_file: certs/ca.pem
`
	for name, content := range map[string]string{GatewayFile: gw, AgentsFile: okAgents, ProtocolFile: okProtocol} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	env := Options{LookupEnv: func(k string) (string, bool) {
		if k == "SENTINEL_PASSWORD" {
			return "sentinel-secret-2", true
		}
		return "", false
	}}
	cfg, settings, err := Explain(dir, env)
	if err != nil {
		t.Fatal(err)
	}
	got := cfg.Gateway.State.RedisSettings()
	want := redisx.Settings{
		Sentinel: &redisx.Sentinel{Master: "gw-primary", Addrs: []string{"10.0.0.1:26379", "10.0.0.2:26379"},
			Username: "sentinel-user", Password: "sentinel-secret-2"},
		Username: "gateway", Password: "data-secret-1", DB: 1,
		TLS: &redisx.TLS{CAFile: filepath.Join(dir, "certs/ca.pem")},
	}
	if got.Kind() != "sentinel" || got.Sentinel.Master != want.Sentinel.Master || !slices.Equal(got.Sentinel.Addrs, want.Sentinel.Addrs) ||
		got.Sentinel.Username != want.Sentinel.Username || got.Sentinel.Password != want.Sentinel.Password || got.Password != want.Password || got.DB != 1 || *got.TLS != *want.TLS {
		t.Fatalf("settings %+v\nwant %+v", got, want)
	}
	var shown strings.Builder
	for _, s := range settings {
		shown.WriteString(s.Key + " = " + s.Value + "\n")
	}
	out := shown.String()
	if strings.Contains(out, "secret") {
		t.Fatalf("explain shows a password:\n%s", out)
	}
	for _, line := range []string{"state.redis.password = [set]", "state.redis.sentinel.password = [set]", `state.redis.sentinel.master = "gw-primary"`} {
		if !strings.Contains(out, line) {
			t.Errorf("explain lacks %q:\n%s", line, out)
		}
	}
}

// state.redis_url keeps working: it is one node, and its password is
// redacted by Explain.
func TestRedisURLIsOneNode(t *testing.T) {
	cfg, err := loadFiles(t, okGateway+"state:\n  backend: redis\n  redis_url: redis://:pw-secret@r:6379/0\n", okAgents, okProtocol, nil)
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Gateway.State.RedisSettings()
	if s.Kind() != "single" || s.URL != "redis://:pw-secret@r:6379/0" {
		t.Fatalf("settings %+v", s)
	}
}
