package server_test

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sacpgw/gateway/internal/tracing"
)

// collector is an OTLP/HTTP trace receiver.
type collector struct {
	mu    sync.Mutex
	spans []*tracepb.Span
	url   string
}

func newCollector(t *testing.T) *collector {
	c := &collector{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req collectorpb.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		for _, rs := range req.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				c.spans = append(c.spans, ss.Spans...)
			}
		}
		c.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	t.Cleanup(srv.Close)
	c.url = srv.URL
	return c
}

// tracer exports to c in batches of 50ms.
func (c *collector) tracer(t *testing.T) *tracing.Tracer {
	tr, err := tracing.New(c.url, "gateway-test", 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	return tr
}

// wait returns the spans once n have arrived (the server span ends after
// the answer is sent).
func (c *collector) wait(t *testing.T, n int) []*tracepb.Span {
	t.Helper()
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		c.mu.Lock()
		got := append([]*tracepb.Span(nil), c.spans...)
		c.mu.Unlock()
		if len(got) >= n {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d spans exported, want %d", len(got), n)
		}
	}
}

func (c *collector) reset() {
	c.mu.Lock()
	c.spans = nil
	c.mu.Unlock()
}

// attrs flattens a span's attributes to strings (lists joined by ",").
func attrs(s *tracepb.Span) map[string]string {
	out := map[string]string{}
	var str func(v *commonpb.AnyValue) string
	str = func(v *commonpb.AnyValue) string {
		switch x := v.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			return x.StringValue
		case *commonpb.AnyValue_IntValue:
			return strconv.FormatInt(x.IntValue, 10)
		case *commonpb.AnyValue_BoolValue:
			return strconv.FormatBool(x.BoolValue)
		case *commonpb.AnyValue_ArrayValue:
			var parts []string
			for _, e := range x.ArrayValue.Values {
				parts = append(parts, str(e))
			}
			return strings.Join(parts, ",")
		}
		return v.String()
	}
	for _, kv := range s.Attributes {
		out[kv.Key] = str(kv.Value)
	}
	return out
}

func ofKind(spans []*tracepb.Span, k tracepb.Span_SpanKind) []*tracepb.Span {
	var out []*tracepb.Span
	for _, s := range spans {
		if s.Kind == k {
			out = append(out, s)
		}
	}
	return out
}

// want reports the attributes of a span that differ from want ("" : absent).
func wantAttrs(t *testing.T, what string, s *tracepb.Span, want map[string]string) {
	t.Helper()
	got := attrs(s)
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s span %q: %s = %q, want %q (all: %v)", what, s.Name, k, got[k], v, got)
		}
	}
}

// TestOTLPExport: with tracing on, the gateway exports a server span that
// continues the caller's trace, with the HTTP conventions' attributes and
// the gateway's own, and a client span for the model call, named and
// described as the OpenTelemetry GenAI conventions say; the provider sees
// the model call's span as its parent.
func TestOTLPExport(t *testing.T) {
	col := newCollector(t)
	up, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, completion("ok"))
	})
	st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1", tracer: col.tracer(t)})
	const traceID, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	readAll(t, st.post("/v1/chat/completions", "tok-alpha", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"x"}]}`,
		"Traceparent", "00-"+traceID+"-"+callerSpan+"-01").Body)
	sent := up.lastHdr.Load().(http.Header).Get("Traceparent")

	spans := col.wait(t, 2)
	servers, clients := ofKind(spans, tracepb.Span_SPAN_KIND_SERVER), ofKind(spans, tracepb.Span_SPAN_KIND_CLIENT)
	if len(servers) != 1 || len(clients) != 1 {
		t.Fatalf("%d server and %d client spans, want one each", len(servers), len(clients))
	}
	srv, call := servers[0], clients[0]
	if hex.EncodeToString(srv.TraceId) != traceID || hex.EncodeToString(srv.ParentSpanId) != callerSpan {
		t.Errorf("server span trace %x parent %x: want the caller's trace and span", srv.TraceId, srv.ParentSpanId)
	}
	if srv.Name != "POST /v1/chat/completions" {
		t.Errorf("server span name %q", srv.Name)
	}
	wantAttrs(t, "server", srv, map[string]string{
		"http.request.method": "POST", "http.route": "/v1/chat/completions", "http.response.status_code": "200",
		"gen_ai.request.model": "gpt-4o-mini", "gateway.agent": "alpha", "gateway.upstream": "test", "gateway.decision": "allow",
		// Usage only on the model call: backends add tokens up over a trace.
		"gen_ai.usage.input_tokens": "", "gateway.model": "", "error.type": "",
	})
	if attrs(srv)["gateway.request_id"] == "" {
		t.Error("server span has no gateway.request_id")
	}

	u, _ := url.Parse(us.URL)
	if call.Name != "chat gpt-4o-mini" || hex.EncodeToString(call.TraceId) != traceID || string(call.ParentSpanId) != string(srv.SpanId) {
		t.Errorf("model call span %q trace %x parent %x: want \"chat gpt-4o-mini\", a child of the server span %x", call.Name, call.TraceId, call.ParentSpanId, srv.SpanId)
	}
	wantAttrs(t, "model call", call, map[string]string{
		"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai", "gen_ai.system": "openai",
		"gen_ai.request.model": "gpt-4o-mini", "gen_ai.response.model": "gpt-4o-mini", "gen_ai.response.finish_reasons": "stop",
		"gen_ai.usage.input_tokens": "7", "gen_ai.usage.output_tokens": "5",
		"server.address": u.Hostname(), "server.port": u.Port(), "gateway.upstream": "test", "http.response.status_code": "200",
		"error.type": "",
	})
	if call.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR {
		t.Errorf("model call span status %v", call.Status)
	}
	if want := "00-" + traceID + "-" + hex.EncodeToString(call.SpanId) + "-01"; sent != want {
		t.Errorf("upstream traceparent %q, want %q: the caller's trace with the model call's span as parent", sent, want)
	}
}

// TestOTLPModelCallSpans: a stream's span has the finish reasons and usage
// read from its events; a protocol agent's re-ask is a second model call
// span under the same server span; a provider's failure marks the model
// call and the request as errors.
func TestOTLPModelCallSpans(t *testing.T) {
	col := newCollector(t)
	sc := &scripted{answers: []string{"not sacp", validSACP}}
	var mode string // "", "stream", "fail"
	var mu sync.Mutex
	up, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		mu.Lock()
		m := mode
		mu.Unlock()
		switch m {
		case "stream":
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`+"\n\n")
			io.WriteString(w, chunk("hello"))
			io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024","choices":[{"index":0,"delta":{},"finish_reason":"length"}]}`+"\n\n")
			io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini-2024","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`+"\n\n")
			io.WriteString(w, "data: [DONE]\n\n")
		case "fail":
			http.Error(w, `{"error":{"message":"down"}}`, http.StatusInternalServerError)
		default:
			sc.handler(w, r, body)
		}
	})
	st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1", tracer: col.tracer(t)})
	set := func(m string) {
		mu.Lock()
		mode = m
		mu.Unlock()
		col.reset()
	}

	t.Run("stream", func(t *testing.T) {
		set("stream")
		readAll(t, st.post("/v1/chat/completions", "tok-alpha", `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"x"}]}`).Body)
		calls := ofKind(col.wait(t, 2), tracepb.Span_SPAN_KIND_CLIENT)
		if len(calls) != 1 {
			t.Fatalf("%d model call spans, want 1", len(calls))
		}
		wantAttrs(t, "stream", calls[0], map[string]string{
			"gen_ai.response.model": "gpt-4o-mini-2024", "gen_ai.response.finish_reasons": "length",
			"gen_ai.usage.input_tokens": "10", "gen_ai.usage.output_tokens": "5",
		})
	})

	t.Run("protocol re-ask", func(t *testing.T) {
		set("")
		protoCall(t, st)
		spans := col.wait(t, 3)
		servers, calls := ofKind(spans, tracepb.Span_SPAN_KIND_SERVER), ofKind(spans, tracepb.Span_SPAN_KIND_CLIENT)
		if len(servers) != 1 || len(calls) != 2 {
			t.Fatalf("%d server and %d model call spans, want 1 and 2 (a re-ask)", len(servers), len(calls))
		}
		for _, c := range calls {
			if string(c.ParentSpanId) != string(servers[0].SpanId) || c.Name != "chat gpt-4o-mini" {
				t.Errorf("model call span %q is not a child of the server span", c.Name)
			}
			wantAttrs(t, "protocol", c, map[string]string{"gen_ai.usage.input_tokens": "7", "gen_ai.response.finish_reasons": "stop"})
		}
		wantAttrs(t, "server", servers[0], map[string]string{"gateway.sacp.valid": "true", "gateway.sacp.attempts": "2", "gateway.agent": "proto"})
		// The re-ask's traceparent names its own span.
		sent := up.lastHdr.Load().(http.Header).Get("Traceparent")
		if !slices.ContainsFunc(calls, func(c *tracepb.Span) bool { return strings.Contains(sent, hex.EncodeToString(c.SpanId)) }) {
			t.Errorf("the provider's traceparent %q names no model call span", sent)
		}
	})

	t.Run("provider failure", func(t *testing.T) {
		set("fail")
		resp := st.post("/v1/chat/completions", "tok-alpha", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"x"}]}`)
		readAll(t, resp.Body)
		spans := col.wait(t, 2)
		servers, calls := ofKind(spans, tracepb.Span_SPAN_KIND_SERVER), ofKind(spans, tracepb.Span_SPAN_KIND_CLIENT)
		if len(servers) != 1 || len(calls) != 1 {
			t.Fatalf("%d server and %d model call spans", len(servers), len(calls))
		}
		if calls[0].Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR || attrs(calls[0])["error.type"] == "" {
			t.Errorf("failed model call: status %v, attributes %v", calls[0].Status, attrs(calls[0]))
		}
		status := strconv.Itoa(resp.StatusCode)
		wantAttrs(t, "server", servers[0], map[string]string{"http.response.status_code": status, "error.type": status})
		if servers[0].Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR {
			t.Errorf("server span status %v after a %s", servers[0].Status, status)
		}
	})
}
