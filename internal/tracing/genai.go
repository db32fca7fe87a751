package tracing

import (
	"context"
	"net/url"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	semconv "go.opentelemetry.io/otel/semconv/v1.39.0"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"
)

// The spans follow the OpenTelemetry semantic conventions: HTTP for the
// request's server span, GenAI (gen_ai.*) for each call to a model
// provider, so that tracing backends that know LLM calls read the
// gateway's without configuration. What the conventions do not name
// (the agent, the policy decision, SACP) is under gateway.*.
//
// Usage (gen_ai.usage.*) is set on the model call spans only: backends
// that add up tokens over a trace would count it twice on the server span
// as well.

// Operation names (gen_ai.operation.name) of the model calls.
const (
	OperationChat       = "chat"
	OperationEmbeddings = "embeddings"
)

// Attributes of the gateway's own, where no convention exists.
const (
	AttrRequestID = attribute.Key("gateway.request_id")
	AttrAgent     = attribute.Key("gateway.agent")
	AttrUpstream  = attribute.Key("gateway.upstream")
	AttrErrorCode = attribute.Key("gateway.error_code")
	// AttrDecision is the chat policy's verdict (allow, deny).
	AttrDecision     = attribute.Key("gateway.decision")
	AttrSACPValid    = attribute.Key("gateway.sacp.valid")
	AttrSACPAttempts = attribute.Key("gateway.sacp.attempts")
)

// attrSystem is gen_ai.system, which the conventions renamed
// gen_ai.provider.name; both are set while backends still read the old one.
const attrSystem = attribute.Key("gen_ai.system")

// instrumentation is the tracer's (instrumentation scope's) name.
const instrumentation = "github.com/sacpgw/gateway"

// StartModelCall starts the span of one call to a model provider: a
// CLIENT span named "{operation} {model}" (the GenAI conventions' name),
// a child of ctx's span. Made with the returned context, the call's
// traceparent names it as the provider's parent. Without a recording span
// in ctx (tracing off, or the trace not sampled) it returns ctx as it is
// and a span that records nothing, at no cost.
func StartModelCall(ctx context.Context, operation, model string) (context.Context, trace.Span) {
	parent := trace.SpanFromContext(ctx)
	if !parent.IsRecording() {
		return ctx, noop.Span{}
	}
	name := operation
	if model != "" {
		name += " " + model
	}
	// The tracer comes from the parent span's provider: the gateway's
	// own, as nothing is registered globally.
	return parent.TracerProvider().Tracer(instrumentation).Start(ctx, name,
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(semconv.GenAIOperationNameKey.String(operation), semconv.GenAIRequestModelKey.String(model)))
}

// ModelCall is what the gateway learned of one model call, for its span.
type ModelCall struct {
	// Provider is the type of the upstream that answered (or failed
	// last): gen_ai.provider.name, e.g. openai or anthropic. Upstream is
	// its configured name, Target the URL called (server.address and
	// server.port).
	Provider, Upstream string
	Target             *url.URL
	// Status is the provider's HTTP status; 0 when none came.
	Status int
	// ResponseModel is the model the answer names; FinishReasons are its
	// choices' finish reasons, as far as they came.
	ResponseModel string
	FinishReasons []string
	// InputTokens and OutputTokens are the usage, when UsageKnown;
	// NoOutput leaves the output out (embeddings have none).
	UsageKnown, NoOutput      bool
	InputTokens, OutputTokens int
	// ErrorType classifies a failed call (error.type): the gateway's
	// error code, or the provider's status; "" for a call that succeeded.
	ErrorType string
}

// EndModelCall records c on the span StartModelCall made and ends it.
func EndModelCall(span trace.Span, c ModelCall) {
	if !span.IsRecording() {
		return
	}
	attrs := make([]attribute.KeyValue, 0, 14)
	str := func(k attribute.Key, v string) {
		if v != "" {
			attrs = append(attrs, k.String(v))
		}
	}
	str(semconv.GenAIProviderNameKey, c.Provider)
	str(attrSystem, c.Provider)
	if u := c.Target; u != nil && u.Host != "" {
		attrs = append(attrs, semconv.ServerAddressKey.String(u.Hostname()))
		if p := port(u); p > 0 {
			attrs = append(attrs, semconv.ServerPortKey.Int(p))
		}
	}
	str(AttrUpstream, c.Upstream)
	str(semconv.GenAIResponseModelKey, c.ResponseModel)
	if len(c.FinishReasons) > 0 {
		attrs = append(attrs, semconv.GenAIResponseFinishReasonsKey.StringSlice(c.FinishReasons))
	}
	if c.UsageKnown {
		attrs = append(attrs, semconv.GenAIUsageInputTokensKey.Int(c.InputTokens))
		if !c.NoOutput {
			attrs = append(attrs, semconv.GenAIUsageOutputTokensKey.Int(c.OutputTokens))
		}
	}
	if c.Status > 0 {
		attrs = append(attrs, semconv.HTTPResponseStatusCodeKey.Int(c.Status))
	}
	if c.ErrorType != "" {
		attrs = append(attrs, semconv.ErrorTypeKey.String(c.ErrorType))
		span.SetStatus(codes.Error, c.ErrorType)
	}
	span.SetAttributes(attrs...)
	span.End()
}

// ErrorTypeOf is the error.type of a model call, from the error code the
// gateway answered with (code, "" for none) and the provider's status (0
// when none came): the code when there is one, else a status from 400 up,
// else "" (a success).
func ErrorTypeOf(code string, status int) string {
	switch {
	case code != "":
		return code
	case status >= 400:
		return strconv.Itoa(status)
	}
	return ""
}

// port is u's port, or its scheme's.
func port(u *url.URL) int {
	if p, err := strconv.Atoi(u.Port()); err == nil {
		return p
	}
	switch u.Scheme {
	case "https":
		return 443
	case "http":
		return 80
	}
	return 0
}

// Request is what a request's server span records.
type Request struct {
	// Method, Route and Status are the HTTP request's method, route
	// template and status.
	Method, Route string
	Status        int
	// Model is the model the request asked for (gen_ai.request.model).
	Model string
	// RequestID, Agent, Upstream and ErrorCode are the gateway's: the
	// request's id, the agent identified, the upstream routed to and the
	// error code answered.
	RequestID, Agent, Upstream, ErrorCode string
	// Decision is the chat policy's verdict, when it ran.
	Decision string
	// SACP says whether the protocol stage settled an answer: then
	// SACPValid and SACPAttempts are its outcome.
	SACP         bool
	SACPValid    bool
	SACPAttempts int
}

// EndRequest records r on a request's server span and ends it: the HTTP
// conventions' method, route and status (error.type and an error status
// from 500 up, as for a server span), the requested model, and the
// gateway's own attributes.
func EndRequest(span trace.Span, r Request) {
	attrs := make([]attribute.KeyValue, 0, 14)
	attrs = append(attrs, semconv.HTTPRequestMethodKey.String(r.Method), semconv.HTTPResponseStatusCodeKey.Int(r.Status))
	str := func(k attribute.Key, v string) {
		if v != "" {
			attrs = append(attrs, k.String(v))
		}
	}
	str(semconv.HTTPRouteKey, r.Route)
	str(semconv.GenAIRequestModelKey, r.Model)
	str(AttrRequestID, r.RequestID)
	str(AttrAgent, r.Agent)
	str(AttrUpstream, r.Upstream)
	str(AttrErrorCode, r.ErrorCode)
	str(AttrDecision, r.Decision)
	if r.SACP {
		attrs = append(attrs, AttrSACPValid.Bool(r.SACPValid), AttrSACPAttempts.Int(r.SACPAttempts))
	}
	if r.Status >= 500 {
		attrs = append(attrs, semconv.ErrorTypeKey.String(strconv.Itoa(r.Status)))
		span.SetStatus(codes.Error, r.ErrorCode)
	}
	span.SetAttributes(attrs...)
	span.End()
}
