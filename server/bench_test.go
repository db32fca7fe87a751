package server_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"os"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/upstream"
)

// The benchmarks compare one request through the whole gateway (auth, body
// checks, model allow-list, rate and token limits, access log) with the same
// request through a bare httputil.ReverseProxy, against the same in-process
// upstream, with the same connection pool. Run:
//
//	go test ./server -run '^$' -bench . -benchmem
func benchUpstream(tb testing.TB) *httptest.Server {
	jsonAnswer := completion("The answer is forty-two.")
	var sse strings.Builder
	for _, w := range []string{"The ", "answer ", "is ", "forty-", "two."} {
		sse.WriteString(chunk(w))
	}
	// The last chunk carries the finish reason, as providers send it.
	sse.WriteString(`data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n")
	sse.WriteString("data: [DONE]\n\n")
	sseAnswer := sse.String()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, sseAnswer)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, jsonAnswer)
	}))
	tb.Cleanup(s.Close)
	return s
}

func bareProxy(tb testing.TB, target string) *httptest.Server {
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.Out.URL.Scheme = "http"
			pr.Out.URL.Host = strings.TrimPrefix(target, "http://")
			pr.Out.Host = ""
		},
		Transport:     upstream.NewTransport(512),
		FlushInterval: -1,
	}
	s := httptest.NewServer(rp)
	tb.Cleanup(s.Close)
	return s
}

const (
	benchJSON = `{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"What is six times seven?"}]}`
	benchSSE  = `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"What is six times seven?"}]}`
)

func drive(b *testing.B, url, token, body, want string) {
	b.SetBytes(int64(len(body)))
	driveAt(b, url+"/v1/chat/completions", token, body, want)
}

func BenchmarkProxy(b *testing.B) {
	up := benchUpstream(b)
	bare := bareProxy(b, up.URL)
	// The audit trail is on (fail_mode closed: every answer waits for its
	// entries), on tmpfs when there is one: the figure is the gateway's CPU
	// and latency, not the disk's fsync (audit's BenchmarkAppendParallel
	// measures that).
	auditDir := ""
	if st, err := os.Stat("/dev/shm"); err == nil && st.IsDir() {
		auditDir, _ = os.MkdirTemp("/dev/shm", "gateway-bench-audit-")
		b.Cleanup(func() { os.RemoveAll(auditDir) })
	}
	gw := newStack(b, stackOpts{upstreamURL: up.URL + "/v1", discardLogs: true, auditDir: auditDir})
	core := newStack(b, stackOpts{upstreamURL: up.URL + "/v1", discardLogs: true, core: true})
	for _, mode := range []struct{ name, body, want string }{
		{"json", benchJSON, "forty-two"},
		{"sse", benchSSE, "[DONE]"},
	} {
		b.Run(mode.name+"/bare", func(b *testing.B) { drive(b, bare.URL, "unused", mode.body, mode.want) })
		// The bench agent has request and token limits that never trigger:
		// the figure includes auth, size, model and both limit checks.
		b.Run(mode.name+"/gateway", func(b *testing.B) { drive(b, gw.srv.URL, "tok-bench", mode.body, mode.want) })
		// The proxy core alone (issue 2's scope): auth, body, model and
		// limit checks, access log; no audit, policy or redaction.
		b.Run(mode.name+"/core", func(b *testing.B) { drive(b, core.srv.URL, "tok-bench", mode.body, mode.want) })
	}
}

// BenchmarkDialect is the Anthropic Messages dialect against the same
// request in the OpenAI dialect, through one gateway on one upstream: the
// ratio of the two is what the translation costs per request (json) and per
// stream (sse: the answer's events translated one by one).
func BenchmarkDialect(b *testing.B) {
	up := benchUpstream(b)
	gw := newStack(b, stackOpts{upstreamURL: up.URL + "/v1", discardLogs: true, core: true})
	const messagesJSON = `{"model":"gpt-4o-mini","max_tokens":64,"system":"You are terse.","messages":[{"role":"user","content":"What is six times seven?"}]}`
	const messagesSSE = `{"model":"gpt-4o-mini","max_tokens":64,"stream":true,"system":"You are terse.","messages":[{"role":"user","content":"What is six times seven?"}]}`
	const responsesJSON = `{"model":"gpt-4o-mini","max_output_tokens":64,"instructions":"You are terse.","input":"What is six times seven?","store":false}`
	const responsesSSE = `{"model":"gpt-4o-mini","max_output_tokens":64,"stream":true,"instructions":"You are terse.","input":"What is six times seven?","store":false}`
	for _, c := range []struct{ name, path, body, want string }{
		{"json/chat", "/v1/chat/completions", benchJSON, "forty-two"},
		{"json/messages", "/v1/messages", messagesJSON, "forty-two"},
		{"sse/chat", "/v1/chat/completions", benchSSE, "[DONE]"},
		{"sse/messages", "/v1/messages", messagesSSE, "message_stop"},
		{"json/responses", "/v1/responses", responsesJSON, "forty-two"},
		{"sse/responses", "/v1/responses", responsesSSE, "response.completed"},
	} {
		b.Run(c.name, func(b *testing.B) { driveAt(b, gw.srv.URL+c.path, "tok-bench", c.body, c.want) })
	}
}

// driveAt posts body to url as token from parallel clients, b.N times in
// all, and checks every answer.
func driveAt(b *testing.B, url, token, body, want string) {
	client := &http.Client{Transport: upstream.NewTransport(512)}
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			req, _ := http.NewRequest(http.MethodPost, url, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+token)
			req.Header.Set("Content-Type", "application/json")
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			got, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != 200 || !strings.Contains(string(got), want) {
				b.Errorf("status %d: %.300s", resp.StatusCode, got)
				return
			}
		}
	})
}
