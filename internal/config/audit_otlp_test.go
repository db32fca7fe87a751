package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// audit.otlp is read strictly: each wrong setting is a problem at its
// file and line, an unknown key is one, the header's value comes from
// the environment, and the explanation never shows it.
func TestAuditOTLP(t *testing.T) {
	gw := okGateway + // 1-4
		"audit:\n" + // 5
		"  otlp:\n" + // 6
		"    endpoint: http://otel-collector:4318\n" + // 7
		"    protocol: grcp\n" + // 8
		"    headers:\n" + // 9
		"      Authorization: Bearer ${SIEM_KEY}\n" + // 10
		"      X-Tenant: ${UNSET_TENANT}\n" + // 11
		"    batch_sise: 10\n" + // 12
		"    timeout: 10\n" // 13
	_, err := loadFiles(t, gw, okAgents, okProtocol, map[string]string{"SIEM_KEY": "k-123"})
	var ps Problems
	if !errors.As(err, &ps) {
		t.Fatalf("want Problems, got %v", err)
	}
	want := map[int]string{
		7:  "audit.otlp.endpoint \"http://otel-collector:4318\": http:// sends the trail and the headers in the clear",
		8:  "audit.otlp.protocol \"grcp\": want http or grpc",
		11: "audit.otlp.headers.X-Tenant is empty (is the variable it names set?)",
		12: "unknown key \"batch_sise\"",
		13: "want a duration",
	}
	for line, msg := range want {
		found := false
		for _, p := range ps {
			found = found || (p.Line == line && strings.Contains(p.Msg, msg) && strings.HasSuffix(p.File, GatewayFile))
		}
		if !found {
			t.Errorf("no problem at line %d with %q in:\n%v", line, msg, err)
		}
	}
	if strings.Contains(err.Error(), "k-123") {
		t.Fatalf("a header value is in the problems:\n%v", err)
	}

	ok := okGateway + "audit:\n  otlp:\n    endpoint: https://collector.example:4318\n    headers:\n      Authorization: Bearer ${SIEM_KEY}\n"
	dir := t.TempDir()
	writeConfig(t, dir, ok, okAgents, okProtocol)
	cfg, settings, err := Explain(dir, Options{LookupEnv: func(k string) (string, bool) { return "k-123", k == "SIEM_KEY" }})
	if err != nil {
		t.Fatal(err)
	}
	o := cfg.Gateway.Audit.OTLP
	if o == nil || o.Headers["Authorization"] != "Bearer k-123" || o.Protocol != "http" || o.Interval != time.Second || o.BatchSize != 512 {
		t.Fatalf("audit.otlp = %+v", o)
	}
	for _, s := range settings {
		if strings.Contains(s.Value, "k-123") {
			t.Fatalf("explain shows the key: %s = %s", s.Key, s.Value)
		}
		if s.Key == "audit.otlp.headers" && s.Value != "{Authorization: [set]}" {
			t.Fatalf("audit.otlp.headers = %s", s.Value)
		}
	}
}
