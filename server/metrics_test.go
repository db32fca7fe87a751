package server_test

import (
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestMetricsEndpoint(t *testing.T) {
	_, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, completion("mail bob@example.com"))
	})
	st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1"})
	readAll(t, st.post("/v1/chat/completions", "tok-alpha", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"x"}]}`).Body)
	readAll(t, st.post("/v1/chat/completions", "tok-nobody", `{}`).Body)
	want := []string{
		`gateway_requests_total{agent="alpha",route="/v1/chat/completions",status="200"} 1`,
		`gateway_requests_total{agent="unidentified",route="/v1/chat/completions",status="401"} 1`,
		`gateway_redactions_total{detector="email"} 1`,
		`gateway_tokens_total{agent="alpha",kind="prompt"} 7`,
		`gateway_policy_decisions_total{point="chat",verdict="allow"} 1`,
		`gateway_upstream_duration_seconds_count{upstream="test"} 1`,
		`gateway_audit_entries_total`,
	}
	var body string
	// The access log (and the metrics) run just after the answer is sent.
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get(st.srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body = readAll(t, resp.Body)
		if strings.Contains(body, want[1]) && strings.Contains(body, want[0]) {
			break
		}
	}
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("/metrics lacks %s", w)
		}
	}
	if strings.Contains(body, "req_") || strings.Contains(body, "gpt-4o-mini") {
		t.Error("unbounded values (request ids, client models) in metric labels")
	}
}

// sample is the value of one series in a text exposition (series as it is
// written: name{labels sorted by name}); ok is false when it is absent.
func sample(body, series string) (float64, bool) {
	for line := range strings.SplitSeq(body, "\n") {
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f, err == nil
		}
	}
	return 0, false
}

// scrapeUntil scrapes /metrics until it has series (the metrics are
// observed just after the answer is sent).
func (s *stack) scrapeUntil(series ...string) string {
	s.t.Helper()
	var body string
	for deadline := time.Now().Add(3 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		resp, err := http.Get(s.srv.URL + "/metrics")
		if err != nil {
			s.t.Fatal(err)
		}
		body = readAll(s.t, resp.Body)
		all := true
		for _, w := range series {
			if _, ok := sample(body, w); !ok {
				all = false
			}
		}
		if all {
			break
		}
	}
	return body
}

// TestMetricsTimeToFirstToken: through the whole gateway, a stream's time
// to first token runs to its first content (not the role-only opening
// chunk), its gaps between tokens are the gaps between content events
// (the finishing and usage chunks are not tokens), a JSON answer has a
// time to first token and no gap, and the access log carries the time to
// first token and the split token counts.
func TestMetricsTimeToFirstToken(t *testing.T) {
	const firstToken, gap = 150 * time.Millisecond, 60 * time.Millisecond
	_, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if !strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, completion("whole"))
			return
		}
		flush := func() { w.(http.Flusher).Flush() }
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}`+"\n\n")
		flush()
		time.Sleep(firstToken)
		// Tokens that end a word: the redactor holds back a word that may
		// start a value (an address...) until the next text comes, and the
		// time measured is the client's.
		io.WriteString(w, chunk("Hello, "))
		flush()
		time.Sleep(gap)
		io.WriteString(w, chunk("world. "))
		flush()
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[],"usage":{"prompt_tokens":9,"completion_tokens":2,"total_tokens":11}}`+"\n\n")
		io.WriteString(w, "data: [DONE]\n\n")
	})
	st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1"})
	out := readAll(t, st.post("/v1/chat/completions", "tok-alpha", `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"x"}]}`).Body)
	if !strings.Contains(out, `"content":"Hello, "`) || !strings.HasSuffix(out, "data: [DONE]\n\n") {
		t.Fatalf("stream: %q", out)
	}
	readAll(t, st.post("/v1/chat/completions", "tok-alpha", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"x"}]}`).Body)
	readAll(t, st.post("/v1/chat/completions", "tok-nobody", `{}`).Body)

	const (
		ttftStream = `gateway_ttft_seconds_count{stream="true",upstream="test"}`
		ttftJSON   = `gateway_ttft_seconds_count{stream="false",upstream="test"}`
		gaps       = `gateway_inter_token_seconds_count{upstream="test"}`
		alpha2xx   = `gateway_agent_request_duration_seconds_count{agent="alpha",status_class="2xx"}`
		nobody4xx  = `gateway_agent_request_duration_seconds_count{agent="unidentified",status_class="4xx"}`
	)
	body := st.scrapeUntil(ttftStream, ttftJSON, alpha2xx, nobody4xx)
	for series, want := range map[string]float64{ttftStream: 1, ttftJSON: 1, gaps: 1, alpha2xx: 2, nobody4xx: 1} {
		if got, ok := sample(body, series); got != want {
			t.Errorf("%s = %v (present %v), want %v", series, got, ok, want)
		}
	}
	if sum, _ := sample(body, strings.Replace(ttftStream, "_count", "_sum", 1)); sum < firstToken.Seconds() {
		t.Errorf("stream time to first token %.3fs, want at least %v: the role-only chunk is not a token", sum, firstToken)
	}
	// The gap is measured where the gateway sends, which may see the
	// upstream's two writes a little closer than its sleep (a flush of
	// the first one can be late): half of it is the bound that fails only
	// when something else was measured.
	if sum, _ := sample(body, strings.Replace(gaps, "_count", "_sum", 1)); sum < gap.Seconds()/2 || sum > firstToken.Seconds() {
		t.Errorf("gap between tokens %.3fs, want about %v", sum, gap)
	}
	if _, ok := sample(body, `gateway_spend_usd_total{agent="alpha"}`); !ok {
		t.Error("/metrics lacks gateway_spend_usd_total for alpha")
	}

	var line struct {
		PromptTokens     *int     `json:"prompt_tokens"`
		CompletionTokens *int     `json:"completion_tokens"`
		Tokens           *int     `json:"tokens"`
		TTFT             *float64 `json:"ttft_ms"`
		Stream           bool     `json:"stream"`
	}
	for l := range strings.SplitSeq(st.logs.String(), "\n") {
		if strings.Contains(l, `"msg":"request"`) && strings.Contains(l, `"stream":true`) {
			if err := json.Unmarshal([]byte(l), &line); err != nil {
				t.Fatal(err)
			}
		}
	}
	n := func(p *int) int {
		if p == nil {
			return -1 // absent
		}
		return *p
	}
	if n(line.PromptTokens) != 9 || n(line.CompletionTokens) != 2 || n(line.Tokens) != 11 {
		t.Errorf("access log tokens: prompt %d completion %d total %d (-1: absent), want 9, 2, 11", n(line.PromptTokens), n(line.CompletionTokens), n(line.Tokens))
	}
	ttft := -1.0 // absent
	if line.TTFT != nil {
		ttft = *line.TTFT
	}
	if ttft < float64(firstToken.Milliseconds()) {
		t.Errorf("access log ttft_ms %v (-1: absent), want at least %d", ttft, firstToken.Milliseconds())
	}
}

// TestMetricsProtocolTimeToFirstToken: a protocol agent's answer is
// validated before any of it leaves, so its first token is its whole
// answer, streamed or not, and it has no gaps between tokens.
func TestMetricsProtocolTimeToFirstToken(t *testing.T) {
	sc := &scripted{answers: []string{validSACP}, stream: true}
	_, us := newUpstream(t, sc.handler)
	st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1"})
	out := readAll(t, st.post("/v1/chat/completions", "tok-proto", `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"x"}]}`).Body)
	if !strings.HasSuffix(out, "data: [DONE]\n\n") {
		t.Fatalf("stream: %q", out)
	}
	sc.mu.Lock()
	sc.stream = false
	sc.mu.Unlock()
	protoCall(t, st)

	const (
		stream = `gateway_ttft_seconds_count{stream="true",upstream="test"}`
		whole  = `gateway_ttft_seconds_count{stream="false",upstream="test"}`
	)
	body := st.scrapeUntil(stream, whole)
	for _, series := range []string{stream, whole} {
		if got, _ := sample(body, series); got != 1 {
			t.Errorf("%s = %v, want 1", series, got)
		}
	}
	if got, ok := sample(body, `gateway_inter_token_seconds_count{upstream="test"}`); ok {
		t.Errorf("a protocol answer, released at once, has %v gaps between tokens", got)
	}
}
