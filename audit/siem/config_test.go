package siem

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// Check refuses what would send the trail or the key in the clear, or
// not at all, and names the key; the defaults fill what is unset.
func TestCheck(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		key  string // the first problem's key; "" for none
		want string
	}{
		{Config{Endpoint: "https://collector.example:4318"}, "", ""},
		{Config{Endpoint: "http://127.0.0.1:4318"}, "", ""},
		{Config{Endpoint: "http://localhost:4317", Protocol: "grpc"}, "", ""},
		{Config{Endpoint: "http://[::1]:4318"}, "", ""},
		{Config{}, "endpoint", "is required"},
		{Config{Endpoint: "http://otel-collector:4318"}, "endpoint", "only for a collector on loopback"},
		{Config{Endpoint: "http://10.0.0.5:4318"}, "endpoint", "in the clear"},
		{Config{Endpoint: "ftp://collector:4318"}, "endpoint", "want an http(s) URL"},
		{Config{Endpoint: "https://user:pw@collector:4318"}, "endpoint", "without credentials"},
		{Config{Endpoint: "https://collector:4317/v1/logs", Protocol: "grpc"}, "endpoint", "without a path"},
		{Config{Endpoint: "https://collector:4318", Protocol: "thrift"}, "protocol", "want http or grpc"},
		{Config{Endpoint: "http://127.0.0.1:4318", CAFile: "/ca.pem"}, "ca_file", "https://"},
		{Config{Endpoint: "https://c:4318", Headers: Headers{"Authorization": ""}}, "headers", "is empty"},
		{Config{Endpoint: "https://c:4318", Headers: Headers{"Content-Type": "x"}}, "headers", "set by the export itself"},
		{Config{Endpoint: "https://c:4318", Headers: Headers{"Bad Name": "x"}}, "headers", "not a valid header name"},
		{Config{Endpoint: "https://c:4318", Headers: Headers{"X-Key": "a\nb"}}, "headers", "line break"},
		{Config{Endpoint: "https://c:4318", BatchSize: MaxBatchSize + 1}, "batch_size", "want 1 to"},
		{Config{Endpoint: "https://c:4318", Interval: time.Millisecond}, "interval", "between 10ms and 1h"},
		{Config{Endpoint: "https://c:4318", Timeout: time.Hour}, "timeout", "between 100ms and 5m"},
	} {
		t.Run(fmt.Sprintf("%+v", tc.cfg), func(t *testing.T) {
			c := tc.cfg
			probs := c.Check()
			if tc.key == "" {
				if len(probs) != 0 {
					t.Fatalf("refused: %+v", probs)
				}
				if c.Protocol == "" || c.BatchSize != DefaultBatchSize || c.Interval != DefaultInterval || c.Timeout != DefaultTimeout {
					t.Fatalf("defaults not filled: %+v", c)
				}
				return
			}
			if len(probs) == 0 || probs[0].Key[0] != tc.key || !strings.Contains(probs[0].Msg, tc.want) || !strings.HasPrefix(probs[0].Msg, "audit.otlp.") {
				t.Fatalf("got %+v, want %s: …%s…", probs, tc.key, tc.want)
			}
		})
	}
}

// A header's value is a credential: neither a problem nor the headers'
// text shows it.
func TestHeadersNeverShowTheirValues(t *testing.T) {
	h := Headers{"Authorization": "Bearer s3cr3t", "X-Empty": ""}
	if s := h.String(); strings.Contains(s, "s3cr3t") || s != "{Authorization: [set], X-Empty: [empty]}" {
		t.Fatalf("String: %s", s)
	}
	if s := fmt.Sprintf("%v %s", h, h); strings.Contains(s, "s3cr3t") {
		t.Fatalf("formatted: %s", s)
	}
	c := Config{Endpoint: "https://c:4318", Headers: Headers{"X-Key": "s3cr3t\r\nInjected: 1"}}
	for _, p := range c.Check() {
		if strings.Contains(p.Msg, "s3cr3t") {
			t.Fatalf("a problem shows the value: %s", p.Msg)
		}
	}
}
