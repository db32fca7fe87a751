// Package tracing exports OpenTelemetry spans over OTLP/HTTP, off unless an
// endpoint is configured. The gateway always passes a caller's W3C
// traceparent on to the provider; with tracing on, each request also gets a
// server span (a child of the caller's) and each call to a model provider a
// client span (genai.go), which the provider sees as its parent.
package tracing

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"
	"go.opentelemetry.io/otel/trace"
)

// Tracer starts spans and exports them. Its provider is its own: nothing is
// registered globally.
type Tracer struct {
	tp     *sdktrace.TracerProvider
	tracer trace.Tracer
	prop   propagation.TraceContext
}

// New returns nil, nil when endpoint is empty (tracing off). endpoint is an
// OTLP/HTTP base URL such as http://otel-collector:4318.
func New(endpoint, service string, batchTimeout time.Duration) (*Tracer, error) {
	if endpoint == "" {
		return nil, nil
	}
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("tracing: otlp_endpoint %q: want an http(s) URL", endpoint)
	}
	opts := []otlptracehttp.Option{otlptracehttp.WithEndpointURL(endpoint + "/v1/traces")}
	exp, err := otlptracehttp.New(context.Background(), opts...)
	if err != nil {
		return nil, fmt.Errorf("tracing: %w", err)
	}
	if batchTimeout <= 0 {
		batchTimeout = 5 * time.Second
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(exp, sdktrace.WithBatchTimeout(batchTimeout)),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName(service))),
	)
	return &Tracer{tp: tp, tracer: tp.Tracer(instrumentation)}, nil
}

// Start begins the server span of a request, continuing the caller's trace
// when the request carries a valid traceparent.
func (t *Tracer) Start(r *http.Request, name string) (context.Context, trace.Span) {
	ctx := t.prop.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
	return t.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer))
}

// Inject writes the span context of ctx as the traceparent of an outgoing
// request; without a span it leaves the headers alone.
func Inject(ctx context.Context, h http.Header) {
	if trace.SpanContextFromContext(ctx).IsValid() {
		propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(h))
	}
}

// Shutdown flushes pending spans.
func (t *Tracer) Shutdown(ctx context.Context) error {
	if t == nil {
		return nil
	}
	return t.tp.Shutdown(ctx)
}
