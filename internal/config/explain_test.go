package config

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// TestExplain: every effective value is listed with where it came from:
// its file and line, the environment variable that filled it, or the
// default; credentials only as [set] or [empty].
func TestExplain(t *testing.T) {
	gw := "listen: \":9090\"\n" + // 1
		"upstreams:\n" + // 2
		"  - name: o\n" + // 3
		"    type: openai\n" + // 4
		"    base_url: https://api.openai.com/v1\n" + // 5
		"    api_key: ${KEY}\n" + // 6
		"    models: [gpt-4o]\n" + // 7
		"  - name: local\n" + // 8
		"    type: openai\n" + // 9
		"    base_url: http://127.0.0.1:11434/v1\n" + // 10
		"    api_key: sk-literal-secret\n" + // 11
		"    max_retries: 0\n" + // 12
		"    models: [\"llama*\"]\n" + // 13
		"approval:\n" + // 14
		"  webhook: https://hooks.slack.example/T000/B000/XXXX\n" + // 15
		"audit:\n" + // 16
		"  chain: ${POD_NAME:-}\n" + // 17
		"state:\n" + // 18
		"  redis_url: redis://:hunter2@redis:6379/0\n" // 19
	ag := okAgents + "    rate_limit: 5/minute\n    max_request_size: 51200B\n    models: [gpt-4o]\n"
	pr := "protocol:\n  timeouts:\n    response: ${RESPONSE}\n"
	env := map[string]string{"KEY": "sk-from-env-secret", "RESPONSE": "90000ms"}
	dir := t.TempDir()
	writeConfig(t, dir, gw, ag, pr)
	_, settings, err := Explain(dir, Options{LookupEnv: func(k string) (string, bool) { v, ok := env[k]; return v, ok }})
	if err != nil {
		t.Fatal(err)
	}
	at := func(file string, line string) string { return filepath.Join(dir, file) + ":" + line }
	byKey := map[string]Setting{}
	for _, s := range settings {
		if _, dup := byKey[s.Key]; dup {
			t.Errorf("key %s listed twice", s.Key)
		}
		byKey[s.Key] = s
	}
	cases := []struct {
		key, value, source string
	}{
		{"listen", `":9090"`, at(GatewayFile, "1")},
		{"shutdown_timeout", "30s", "default"},
		{"upstreams[0].api_key", "[set]", "env ${KEY} at " + at(GatewayFile, "6")},
		{"upstreams[0].models", `["gpt-4o"]`, at(GatewayFile, "7")},
		{"upstreams[0].max_retries", "2", "default"}, // a nil pointer's default lives in a method
		{"upstreams[0].priority", "0", "default"},
		{"upstreams[1].api_key", "[set]", at(GatewayFile, "11")},
		{"upstreams[1].max_retries", "0", at(GatewayFile, "12")},
		{"upstreams[1].priority", "1", "default"},
		{"upstreams[1].breaker.cooldown", "30s", "default"},
		{"approval.webhook", "[set]", at(GatewayFile, "15")},
		{"approval.rate_limit", "60/minute", "default"},
		{"audit.chain", `"gateway-host"`, "default (${POD_NAME:-} is empty at " + at(GatewayFile, "17") + ")"},
		{"audit.checkpoint_interval", "1m", "default"},
		{"state.redis_url", `"redis://:xxxxx@redis:6379/0"`, at(GatewayFile, "19")},
		{"messaging.history_retention", "168h", "default"},
		{"agents.a1.rate_limit", "5/minute", at(AgentsFile, "4")},
		{"agents.a1.max_request_size", "50KB", at(AgentsFile, "5")},
		{"agents.a1.token_sha256", `"61b89502ba471149636931e887f65a4f785d47e646b2c8521cfd02dbfed43722"`, at(AgentsFile, "3")},
		{"agents.a1.budget", "unlimited", "default"},
		{"agents.a1.response_format", `"none"`, "default"},
		{"protocol.timeouts.response", "1m30s", "env ${RESPONSE} at " + at(ProtocolFile, "3")},
		{"protocol.sacp.reask", "true", "default"},
		{"protocol.compliance.strict_mode", "true", "default"},
		{"protocol.redaction.block", "[]", "default"},
	}
	for _, c := range cases {
		got, ok := byKey[c.key]
		if !ok {
			t.Errorf("%s: not listed", c.key)
			continue
		}
		if c.key == "audit.chain" {
			// The host name is the machine's; the source is the point.
			got.Value = `"gateway-host"`
		}
		if got.Value != c.value || got.Source != c.source {
			t.Errorf("%s = %s  # %s\nwant  %s  # %s", c.key, got.Value, got.Source, c.value, c.source)
		}
	}
	for _, s := range settings {
		for _, secret := range []string{"sk-from-env-secret", "sk-literal-secret", "hunter2", "XXXX"} {
			if strings.Contains(s.Value, secret) || strings.Contains(s.Source, secret) {
				t.Errorf("%s shows a secret: %s  # %s", s.Key, s.Value, s.Source)
			}
		}
	}
	if _, ok := byKey["registry.spawn.ttl"]; ok {
		t.Error("registry.yaml is absent, but its settings are listed")
	}
}

// TestExplainProblems: a configuration with problems is not explained; the
// problems come back as Load's.
func TestExplainProblems(t *testing.T) {
	dir := t.TempDir()
	writeConfig(t, dir, okGateway+"lisen: x\n", okAgents, okProtocol)
	_, settings, err := Explain(dir, Options{LookupEnv: noEnv})
	var ps Problems
	if !errors.As(err, &ps) || settings != nil {
		t.Fatalf("got %v, %d settings; want Problems", err, len(settings))
	}
}

func TestWriteSettings(t *testing.T) {
	var b strings.Builder
	err := WriteSettings(&b, []Setting{
		{"listen", `":8080"`, "config/gateway.yaml:1"},
		{"log.level", `"info"`, "default"},
		{"agents.a.description", `"` + strings.Repeat("x", 60) + `"`, "config/agents.yaml:9"},
	})
	if err != nil {
		t.Fatal(err)
	}
	want := `listen = ":8080"    # config/gateway.yaml:1
log.level = "info"  # default
agents.a.description = "` + strings.Repeat("x", 60) + `"  # config/agents.yaml:9
`
	if b.String() != want {
		t.Errorf("got:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestFormatValues(t *testing.T) {
	cases := []struct {
		v    any
		want string
	}{
		{Size(512), "512B"},
		{Size(50 << 10), "50KB"},
		{Size(64 << 20), "64MB"},
		{Size(2 << 30), "2GB"},
		{Size(0), "0B"},
		{Size(1536), "1536B"},
		{Duration(90 * 60e9), "1h30m"},
		{Duration(24 * 3600e9), "24h"},
		{Duration(90e9), "1m30s"},
		{Duration(0), "0s"},
		{[]string{"a", "b c"}, `["a", "b c"]`},
		{make([]float64, 1536), "[1536 numbers]"},
		{[]float64{0.5, 1}, "[0.5, 1]"},
		{true, "true"},
	}
	for _, c := range cases {
		if got := formatValue(reflect.ValueOf(c.v)); got != c.want {
			t.Errorf("formatValue(%#v) = %s, want %s", c.v, got, c.want)
		}
	}
}

func writeConfig(t *testing.T, dir, gw, ag, pr string) {
	t.Helper()
	for name, content := range map[string]string{GatewayFile: gw, AgentsFile: ag, ProtocolFile: pr} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
}
