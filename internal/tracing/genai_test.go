package tracing

import (
	"context"
	"net/url"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// TestStartModelCallOff: without a recording span (tracing off, or not
// sampled) nothing is made: the context is returned as it is, so the
// caller's traceparent goes to the provider unchanged.
func TestStartModelCallOff(t *testing.T) {
	ctx := context.Background()
	got, span := StartModelCall(ctx, OperationChat, "gpt-4o")
	if got != ctx || span.IsRecording() {
		t.Fatalf("tracing off: a new context (%v) or a recording span (%v)", got != ctx, span.IsRecording())
	}
	EndModelCall(span, ModelCall{Provider: "openai", ErrorType: "x"}) // nothing to record, no panic
}

func TestModelCallSpan(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	ctx, server := tp.Tracer("test").Start(context.Background(), "POST /v1/embeddings", trace.WithSpanKind(trace.SpanKindServer))

	callCtx, span := StartModelCall(ctx, OperationEmbeddings, "text-embedding-3-small")
	if trace.SpanContextFromContext(callCtx).SpanID() == server.SpanContext().SpanID() {
		t.Fatal("the call's context carries the server span: the provider would see it as its parent")
	}
	target, _ := url.Parse("https://api.openai.com/v1/embeddings")
	EndModelCall(span, ModelCall{Provider: "openai", Upstream: "primary", Target: target, Status: 200,
		UsageKnown: true, NoOutput: true, InputTokens: 12, OutputTokens: 99})
	EndRequest(server, Request{Method: "POST", Route: "/v1/embeddings", Status: 503, ErrorCode: "audit_unavailable", Agent: "alpha"})

	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("%d spans ended", len(spans))
	}
	call, srv := spans[0], spans[1]
	if call.Name() != "embeddings text-embedding-3-small" || call.SpanKind() != trace.SpanKindClient || call.Parent().SpanID() != srv.SpanContext().SpanID() {
		t.Errorf("model call span %q kind %v parent %v", call.Name(), call.SpanKind(), call.Parent().SpanID())
	}
	want := map[attribute.Key]string{
		"gen_ai.operation.name": "embeddings", "gen_ai.request.model": "text-embedding-3-small",
		"gen_ai.provider.name": "openai", "gen_ai.system": "openai", "server.address": "api.openai.com", "server.port": "443",
		"gen_ai.usage.input_tokens": "12", "gateway.upstream": "primary", "http.response.status_code": "200",
		"gen_ai.usage.output_tokens": "", "error.type": "",
	}
	check(t, call, want)
	if call.Status().Code == codes.Error {
		t.Errorf("model call status %v", call.Status())
	}
	check(t, srv, map[attribute.Key]string{
		"http.request.method": "POST", "http.route": "/v1/embeddings", "http.response.status_code": "503",
		"error.type": "503", "gateway.error_code": "audit_unavailable", "gateway.agent": "alpha",
		"gen_ai.request.model": "", "gateway.decision": "", "gateway.sacp.valid": "",
	})
	if srv.Status().Code != codes.Error {
		t.Errorf("server span status %v after a 503", srv.Status())
	}
}

func check(t *testing.T, s sdktrace.ReadOnlySpan, want map[attribute.Key]string) {
	t.Helper()
	got := map[attribute.Key]string{}
	for _, kv := range s.Attributes() {
		got[kv.Key] = kv.Value.String()
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("span %q: %s = %q, want %q", s.Name(), k, got[k], v)
		}
	}
}

func TestErrorTypeOf(t *testing.T) {
	for _, c := range []struct {
		code   string
		status int
		want   string
	}{
		{"", 200, ""}, {"", 0, ""}, {"", 400, "400"}, {"", 429, "429"}, {"upstream_error", 502, "upstream_error"}, {"stream_incomplete", 200, "stream_incomplete"},
	} {
		if got := ErrorTypeOf(c.code, c.status); got != c.want {
			t.Errorf("ErrorTypeOf(%q, %d) = %q, want %q", c.code, c.status, got, c.want)
		}
	}
}
