package server_test

import (
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	"google.golang.org/protobuf/proto"

	"github.com/sacpgw/gateway/internal/tracing"
)

// TestOTLPExport: with tracing on, the gateway exports a server span that
// continues the caller's trace, and the provider sees the gateway's span as
// its parent.
func TestOTLPExport(t *testing.T) {
	var mu sync.Mutex
	var spans []*collectorpb.ExportTraceServiceRequest
	collector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req collectorpb.ExportTraceServiceRequest
		if r.URL.Path != "/v1/traces" || proto.Unmarshal(body, &req) != nil {
			http.Error(w, "bad export", http.StatusBadRequest)
			return
		}
		mu.Lock()
		spans = append(spans, &req)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
	}))
	defer collector.Close()
	tr, err := tracing.New(collector.URL, "gateway-test", 50*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	up, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, completion("ok"))
	})
	st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1", tracer: tr})
	const traceID, callerSpan = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7"
	readAll(t, st.post("/v1/chat/completions", "tok-alpha", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"x"}]}`,
		"Traceparent", "00-"+traceID+"-"+callerSpan+"-01").Body)
	sent := up.lastHdr.Load().(http.Header).Get("Traceparent")
	if !strings.HasPrefix(sent, "00-"+traceID+"-") || strings.Contains(sent, callerSpan) {
		t.Errorf("upstream traceparent %q: want the caller's trace with the gateway's span as parent", sent)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := len(spans)
		mu.Unlock()
		if n > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(spans) == 0 {
		t.Fatal("no span exported")
	}
	s := spans[0].ResourceSpans[0].ScopeSpans[0].Spans[0]
	attrs := map[string]string{}
	for _, kv := range s.Attributes {
		attrs[kv.Key] = kv.Value.GetStringValue()
	}
	if hex.EncodeToString(s.TraceId) != traceID || hex.EncodeToString(s.ParentSpanId) != callerSpan || attrs["gateway.agent"] != "alpha" {
		t.Errorf("span trace %x parent %x attrs %v", s.TraceId, s.ParentSpanId, attrs)
	}
	if !strings.Contains(sent, hex.EncodeToString(s.SpanId)) {
		t.Errorf("upstream parent %q is not the gateway span %x", sent, s.SpanId)
	}
}
