package tracing

import "github.com/sacpgw/gateway/internal/confkit"

// Config is gateway.yaml's tracing: OpenTelemetry export, off by default.
type Config struct {
	// OTLPEndpoint is an OTLP/HTTP collector base URL, e.g.
	// http://otel-collector:4318. Empty: no spans are exported (a caller's
	// traceparent is still passed on to the provider).
	OTLPEndpoint string `yaml:"otlp_endpoint"`
	// ServiceName is the service.name of the spans. Default "gateway".
	ServiceName string `yaml:"service_name"`
}

// Check fills in the service name and reports an endpoint New would refuse.
func (c *Config) Check(r confkit.Reporter) {
	if c.ServiceName == "" {
		c.ServiceName = "gateway"
	}
	if e := c.OTLPEndpoint; e != "" && !confkit.HTTPURL(e) {
		r.Add(r.Line("otlp_endpoint"), "tracing.otlp_endpoint %q: want an http(s) URL such as http://otel-collector:4318", e)
	}
}
