package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// audit.ship is read strictly, each problem at its line, credentials from
// the environment.
func TestAuditShip(t *testing.T) {
	for _, tc := range []struct{ note, ship, want string }{
		{"not s3", "    url: https://bucket/prefix\n", `gateway.yaml:7: audit.ship.url: "https://bucket/prefix": want s3://bucket/prefix`},
		{"no url", "    region: eu-west-1\n", `gateway.yaml:6: audit.ship.url: required`},
		{"unknown key", "    url: s3://b/p\n    bukket: x\n", `gateway.yaml:8: unknown key "bukket" in audit.ship`},
		{"endpoint path", "    url: s3://b/p\n    endpoint: https://minio:9000/x\n", `gateway.yaml:8: audit.ship.endpoint: "https://minio:9000/x": want http(s)://host[:port]`},
		{"half credentials", "    url: s3://b/p\n    access_key_id: AKIA\n", `gateway.yaml:8: audit.ship: set both access_key_id and secret_access_key`},
		{"retention mode", "    url: s3://b/p\n    retention:\n      mode: forever\n      days: 10\n", `gateway.yaml:9: audit.ship.retention.mode "forever": want governance or compliance`},
		{"retention days", "    url: s3://b/p\n    retention:\n      mode: compliance\n", `gateway.yaml:8: audit.ship.retention.days 0: want 1 to 36500`},
		{"interval without unit", "    url: s3://b/p\n    interval: 30\n", `gateway.yaml:8: invalid value "30"`},
		{"interval too short", "    url: s3://b/p\n    interval: 500ms\n", `gateway.yaml:8: audit.ship.interval 500ms: want at least 1s`},
	} {
		t.Run(tc.note, func(t *testing.T) {
			_, err := loadFiles(t, okGateway+"audit:\n  ship:\n"+tc.ship, okAgents, okProtocol, nil)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("problems:\n%v\nwant one containing %q", err, tc.want)
			}
		})
	}
	cfg, err := loadFiles(t, okGateway+"audit:\n  ship:\n    url: s3://trail/prod\n    access_key_id: ${S3_KEY}\n    secret_access_key: ${S3_SECRET}\n",
		okAgents, okProtocol, map[string]string{"S3_KEY": "AKIA1", "S3_SECRET": "s3cr3t"})
	if err != nil {
		t.Fatal(err)
	}
	s := cfg.Gateway.Audit.Ship
	if s.AccessKeyID != "AKIA1" || s.SecretAccessKey != "s3cr3t" || s.Interval != 30*time.Second || s.Region != "us-east-1" {
		t.Fatalf("ship = %+v", *s)
	}
	if strings.Contains(s.String(), "s3cr3t") {
		t.Fatalf("the settings print their secret: %s", s)
	}
}

// config check --explain shows whether the storage secrets are set, never
// their values.
func TestAuditShipExplainHidesSecrets(t *testing.T) {
	dir := t.TempDir()
	for name, content := range map[string]string{
		GatewayFile:  okGateway + "audit:\n  ship:\n    url: s3://trail/prod\n    access_key_id: AKIA1\n    secret_access_key: ${S3_SECRET}\n    session_token: tok-value\n",
		AgentsFile:   okAgents,
		ProtocolFile: okProtocol,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	_, settings, err := Explain(dir, Options{LookupEnv: func(k string) (string, bool) { return "s3cr3t", k == "S3_SECRET" }})
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, s := range settings {
		if strings.Contains(s.Value, "s3cr3t") || strings.Contains(s.Value, "tok-value") {
			t.Fatalf("%s = %s", s.Key, s.Value)
		}
		if s.Key == "audit.ship.secret_access_key" || s.Key == "audit.ship.session_token" {
			seen++
			if s.Value != "[set]" {
				t.Fatalf("%s = %s, want [set]", s.Key, s.Value)
			}
		}
	}
	if seen != 2 {
		t.Fatalf("explain lists %d of the 2 secrets", seen)
	}
}
