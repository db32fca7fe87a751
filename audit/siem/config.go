package siem

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"sort"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
	"gopkg.in/yaml.v3"
)

// Config is gateway.yaml's audit.otlp: where the trail's entries are sent
// as OpenTelemetry log records. Absent: nothing is sent.
type Config struct {
	// Endpoint is the collector: for protocol http an OTLP/HTTP URL
	// (https://collector:4318, to which /v1/logs is added when it has no
	// path of its own), for grpc https://collector:4317. http:// (no TLS)
	// is accepted only for a collector on loopback, beside the gateway.
	Endpoint string `yaml:"endpoint"`
	// Protocol is http (OTLP/HTTP, protobuf) or grpc. Default http.
	Protocol string `yaml:"protocol"`
	// Headers are sent with every export (an API key: use ${VAR}, never
	// the key itself). Their values are never logged or shown.
	Headers Headers `yaml:"headers"`
	// CAFile is a PEM bundle the collector's certificate must chain to
	// (a private CA). Empty: the system's roots.
	CAFile string `yaml:"ca_file"`
	// BatchSize is the most entries one export carries. Default 512.
	BatchSize int `yaml:"batch_size"`
	// Interval is how often the trail is looked at for new entries.
	// Default 1s.
	Interval time.Duration `yaml:"interval"`
	// Timeout is the deadline of one export call. Default 10s.
	Timeout time.Duration `yaml:"timeout"`
}

// Defaults and bounds of Config.
const (
	DefaultBatchSize = 512
	MaxBatchSize     = 10000
	DefaultInterval  = time.Second
	DefaultTimeout   = 10 * time.Second
)

// Headers are the export's extra headers (gRPC metadata), name to value.
// They are credentials: String shows the names only.
type Headers map[string]string

// UnmarshalYAML reads a mapping of names to values; it makes Headers one
// value for the config's explanation, which then shows String.
func (h *Headers) UnmarshalYAML(n *yaml.Node) error {
	m := map[string]string{}
	if err := n.Decode(&m); err != nil {
		return err
	}
	*h = m
	return nil
}

// String lists the header names, each with [set] or [empty], never a value.
func (h Headers) String() string {
	names := make([]string, 0, len(h))
	for k, v := range h {
		state := "[set]"
		if v == "" {
			state = "[empty]"
		}
		names = append(names, k+": "+state)
	}
	sort.Strings(names)
	return "{" + strings.Join(names, ", ") + "}"
}

// Problem is one wrong setting: the path of its key below audit.otlp and
// what is wrong, said in full for the operator.
type Problem struct {
	Key []string
	Msg string
}

// reserved are the headers an export sets itself, or that would change
// how it is carried.
var reserved = map[string]bool{
	"content-type": true, "content-length": true, "content-encoding": true, "host": true,
	"transfer-encoding": true, "connection": true, "te": true, "user-agent": true,
}

// Check fills the defaults and returns every problem of c.
func (c *Config) Check() []Problem {
	var out []Problem
	add := func(msg string, key ...string) { out = append(out, Problem{Key: key, Msg: msg}) }
	if c.Protocol == "" {
		c.Protocol = "http"
	}
	if c.Protocol != "http" && c.Protocol != "grpc" {
		add(fmt.Sprintf("audit.otlp.protocol %q: want http or grpc", c.Protocol), "protocol")
	}
	if err := checkEndpoint(c.Endpoint, c.Protocol); err != nil {
		add("audit.otlp.endpoint "+err.Error(), "endpoint")
	}
	if c.CAFile != "" && strings.HasPrefix(c.Endpoint, "http://") {
		add("audit.otlp.ca_file is for https:// endpoints; this one is http://", "ca_file")
	}
	for name, v := range c.Headers {
		switch {
		case !httpguts.ValidHeaderFieldName(name):
			add(fmt.Sprintf("audit.otlp.headers: %q is not a valid header name", name), "headers", name)
		case reserved[strings.ToLower(name)] || strings.HasPrefix(name, ":") || strings.HasPrefix(strings.ToLower(name), "grpc-"):
			add(fmt.Sprintf("audit.otlp.headers: %s is set by the export itself", name), "headers", name)
		case v == "":
			// The value names nothing of itself: never echo it.
			add(fmt.Sprintf("audit.otlp.headers.%s is empty (is the variable it names set?)", name), "headers", name)
		case !httpguts.ValidHeaderFieldValue(v):
			add(fmt.Sprintf("audit.otlp.headers.%s: the value has characters a header cannot carry (a line break?)", name), "headers", name)
		}
	}
	switch {
	case c.BatchSize == 0:
		c.BatchSize = DefaultBatchSize
	case c.BatchSize < 0 || c.BatchSize > MaxBatchSize:
		add(fmt.Sprintf("audit.otlp.batch_size %d: want 1 to %d", c.BatchSize, MaxBatchSize), "batch_size")
	}
	switch {
	case c.Interval == 0:
		c.Interval = DefaultInterval
	case c.Interval < 10*time.Millisecond || c.Interval > time.Hour:
		add(fmt.Sprintf("audit.otlp.interval %s: want between 10ms and 1h", c.Interval), "interval")
	}
	switch {
	case c.Timeout == 0:
		c.Timeout = DefaultTimeout
	case c.Timeout < 100*time.Millisecond || c.Timeout > 5*time.Minute:
		add(fmt.Sprintf("audit.otlp.timeout %s: want between 100ms and 5m", c.Timeout), "timeout")
	}
	return out
}

// checkEndpoint accepts an https URL, or an http one to loopback: the
// entries and the API key never cross a network in the clear.
func checkEndpoint(endpoint, protocol string) error {
	if endpoint == "" {
		return fmt.Errorf("is required (e.g. https://otel-collector:4318)")
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return fmt.Errorf("%q: want an http(s) URL such as https://otel-collector:4318, without credentials, query or fragment", endpoint)
	}
	if protocol == "grpc" && u.Path != "" && u.Path != "/" {
		return fmt.Errorf("%q: a gRPC endpoint is a host and port, without a path", endpoint)
	}
	if u.Scheme == "http" && !loopback(u.Hostname()) {
		return fmt.Errorf("%q: http:// sends the trail and the headers in the clear, so it is only for a collector on loopback (127.0.0.1, ::1, localhost); use https:// (ca_file for a private CA)", endpoint)
	}
	return nil
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// target is the URL exports are posted to (http) or the host:port dialed
// (grpc).
func (c *Config) target() (string, error) {
	u, err := url.Parse(c.Endpoint)
	if err != nil {
		return "", fmt.Errorf("audit.otlp.endpoint: %w", err)
	}
	if c.Protocol == "grpc" {
		port := u.Port()
		if port == "" {
			port = "443"
			if u.Scheme == "http" {
				port = "80"
			}
		}
		return net.JoinHostPort(u.Hostname(), port), nil
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/logs"
	}
	return u.String(), nil
}
