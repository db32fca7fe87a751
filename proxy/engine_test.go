package proxy_test

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/internal/testkit"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/policy"
	"github.com/sacpgw/gateway/proxy"
	"github.com/sacpgw/gateway/upstream"
)

// The engine tests drive proxy.Gateway's chains directly (no HTTP shell):
// a real upstream written in the test, the repository's policies, memory
// limits and a recording audit trail.

const engineAgents = `agents:
  plain:
    type: coder
    token_sha256: "%plain%"
    rate_limit: 1000/minute
    token_limit: 100000/hour
  tiny:
    type: coder
    token_sha256: "%tiny%"
    rate_limit: 1/hour
  proto:
    type: coder
    response_format: json_standard
    token_sha256: "%proto%"
  only_mini:
    type: coder
    models: ["gpt-4o-mini"]
    token_sha256: "%only_mini%"
`

type engine struct {
	t     *testing.T
	gw    *proxy.Gateway
	audit *testkit.Trail
	// seen is the last request the upstream received.
	mu   sync.Mutex
	seen *http.Request
	body string
}

type engineOpts struct {
	protocol string // appended under protocol:
	timeout  string // timeouts.response
	policies string // the policy directory; "": the repository's
}

func newEngine(t *testing.T, up http.HandlerFunc, o engineOpts) *engine {
	t.Helper()
	e := &engine{t: t, audit: &testkit.Trail{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		e.mu.Lock()
		e.seen, e.body = r, string(b)
		e.mu.Unlock()
		up(w, r)
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	if o.timeout == "" {
		o.timeout = "5s"
	}
	gw := `listen: "127.0.0.1:0"
upstreams:
  - {name: test, type: openai, base_url: ` + srv.URL + `/v1, api_key: sk-provider, max_retries: 0, models: ["*"]}
audit: {dir: ` + filepath.Join(dir, "audit") + `, chain: t, fail_mode: closed}
`
	agents := engineAgents
	for _, id := range []string{"plain", "tiny", "proto", "only_mini"} {
		agents = strings.ReplaceAll(agents, "%"+id+"%", roster.HashTokenHex("tok-"+id))
	}
	files := map[string]string{
		config.GatewayFile:  gw,
		config.AgentsFile:   agents,
		config.ProtocolFile: "protocol:\n  timeouts:\n    response: " + o.timeout + "\n" + o.protocol,
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	ups, err := upstream.New(cfg.Gateway.Upstreams, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ups.Close)
	if o.policies == "" {
		o.policies = "../rego"
	}
	pol, err := policy.New(policy.Options{Dir: o.policies, Logger: log, NoWatch: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pol.Close)
	e.gw, err = proxy.New(proxy.Deps{Config: cfg, Upstreams: ups, Requests: limit.NewMemory(), Tokens: limit.NewMemoryBudget(),
		Log: log, Audit: door.NewRecorder(e.audit, cfg.Gateway.Audit, log), Policies: pol, KeepAlive: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	return e
}

// upstreamSaw is the last request the provider received, and its body.
func (e *engine) upstreamSaw() (*http.Request, string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.seen, e.body
}

// do sends one request through a chain as the server would (an Exchange
// on the context) and returns the answer and the Exchange.
func (e *engine) do(h http.Handler, token, body string) (*httptest.ResponseRecorder, *scope.Exchange) {
	e.t.Helper()
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	ex := &scope.Exchange{RequestID: "req-1", Start: time.Now()}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, scope.Attach(r, ex))
	return w, ex
}

func jsonAnswer(content string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Openai-Organization", "org-provider") // the provider's account: never passed on
		b, _ := json.Marshal(map[string]any{"id": "c1", "object": "chat.completion", "created": 1, "model": "m",
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": content}, "finish_reason": "stop"}},
			"usage":   map[string]any{"prompt_tokens": 5, "completion_tokens": 7, "total_tokens": 12}})
		_, _ = w.Write(b)
	}
}

func streamAnswer(parts ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, p := range parts {
			b, _ := json.Marshal(map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
				"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": p}, "finish_reason": nil}}})
			_, _ = io.WriteString(w, "data: "+string(b)+"\n\n")
			w.(http.Flusher).Flush()
		}
		_, _ = io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		_, _ = io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}`+"\n\n")
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}
}

const hello = `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`

func TestEngineJSONAnswer(t *testing.T) {
	e := newEngine(t, jsonAnswer("mail bob@example.com"), engineOpts{})
	w, ex := e.do(e.gw.ChatCompletions(), "tok-plain", hello)
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if strings.Contains(w.Body.String(), "bob@example.com") || !strings.Contains(w.Body.String(), "[REDACTED:email]") {
		t.Errorf("answer not redacted: %s", w.Body)
	}
	if w.Header().Get("Openai-Organization") != "" {
		t.Error("a provider header reached the agent")
	}
	seen, sent := e.upstreamSaw()
	if got := seen.Header.Get("Authorization"); got != "Bearer sk-provider" {
		t.Errorf("upstream saw Authorization %q", got)
	}
	if sent != hello {
		t.Errorf("upstream got %s, want the checked bytes %s", sent, hello)
	}
	if !ex.UsageKnown || ex.Usage.TotalTokens != 12 || ex.Upstream != "test" {
		t.Errorf("exchange %+v", ex)
	}
	if k := e.audit.Kinds(); strings.Join(k, ",") != "llm.request,llm.response" {
		t.Fatalf("audit %v", k)
	}
	checks, _ := e.audit.Last("llm.response")["checks"].(map[string]any)
	if red, _ := checks["redaction"].(map[string]any); red["verdict"] != "applied" || red["count"] != 1 {
		t.Errorf("redaction check %v", checks["redaction"])
	}
	if pol, _ := checks["policy"].(map[string]any); pol["verdict"] != "allow" || pol["decision_id"] == "" {
		t.Errorf("policy check %v", checks["policy"])
	}
}

func TestEngineStream(t *testing.T) {
	e := newEngine(t, streamAnswer("Hello ", "bob@exa", "mple.com", "!"), engineOpts{})
	w, ex := e.do(e.gw.ChatCompletions(), "tok-plain", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	body := w.Body.String()
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %v", w.Code, w.Header())
	}
	if strings.Contains(body, "bob@exa") || !strings.Contains(body, "[REDACTED:email]") || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Errorf("stream %q", body)
	}
	// The gateway asked for usage on the agent's behalf (a token limit)
	// and hides the usage chunk from an agent that did not.
	if _, sent := e.upstreamSaw(); !strings.Contains(sent, `"stream_options":{"include_usage":true}`) || strings.Contains(body, `"usage"`) {
		t.Errorf("upstream body %s; stream %q", sent, body)
	}
	if ex.Usage.TotalTokens != 12 {
		t.Errorf("usage %+v", ex.Usage)
	}
	sum := e.audit.Last("llm.response")
	if sum == nil || sum["status"] != http.StatusOK {
		t.Fatalf("response entry %v (kinds %v)", sum, e.audit.Kinds())
	}
}

func TestEngineRefusals(t *testing.T) {
	slow := func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-r.Context().Done():
		case <-time.After(2 * time.Second):
		}
	}
	tests := []struct {
		name     string
		up       http.HandlerFunc
		opts     engineOpts
		token    string
		body     string
		status   int
		code     string
		upstream bool // whether the provider was called
	}{

		{"no token", jsonAnswer("x"), engineOpts{}, "", hello, 401, "invalid_api_key", false},
		{"wrong token", jsonAnswer("x"), engineOpts{}, "tok-nobody", hello, 401, "invalid_api_key", false},
		{"model outside the allow-list", jsonAnswer("x"), engineOpts{}, "tok-only_mini", `{"model":"gpt-4o","messages":[{"role":"user","content":"hi"}]}`, 404, "model_not_found", false},
		{"duplicate key", jsonAnswer("x"), engineOpts{}, "tok-plain", `{"model":"a","model":"b","messages":[]}`, 400, "", false},
		{"policy denies", jsonAnswer("x"), engineOpts{}, "tok-plain", manyMessages(1001), 403, "policy_denied", false},
		{"provider 500", func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(500) }, engineOpts{}, "tok-plain", hello, 502, "upstream_error", true},
		{"provider 400 passes on", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			_, _ = io.WriteString(w, `{"error":{"message":"bad","type":"invalid_request_error","code":"x","param":null}}`)
		}, engineOpts{}, "tok-plain", hello, 400, "", true},
		{"answer not JSON", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html")
			_, _ = io.WriteString(w, "<html>")
		}, engineOpts{}, "tok-plain", hello, 502, "upstream_error", true},
		{"answer of unknown shape", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"id":1,"choices":[]}`)
		}, engineOpts{}, "tok-plain", hello, 502, "upstream_error", true},
		{"provider too slow", slow, engineOpts{timeout: "100ms"}, "tok-plain", hello, 504, "upstream_error", true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := newEngine(t, tc.up, tc.opts)
			w, ex := e.do(e.gw.ChatCompletions(), tc.token, tc.body)
			if w.Code != tc.status {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.status, w.Body)
			}
			var body struct {
				Error struct{ Code string } `json:"error"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
				t.Fatalf("not OpenAI's shape: %s", w.Body)
			}
			if tc.code != "" && body.Error.Code != tc.code {
				t.Errorf("code %q, want %q", body.Error.Code, tc.code)
			}
			if seen, _ := e.upstreamSaw(); (seen != nil) != tc.upstream {
				t.Errorf("provider called: %v", seen != nil)
			}
			// One journal per exchange: a refusal before the call is one
			// entry, a call is its request and one response.
			want := "llm.request"
			switch {
			case tc.status == http.StatusUnauthorized:
				want = "auth.failure"
			case tc.upstream:
				want = "llm.request,llm.response"
			}
			if got := strings.Join(e.audit.Kinds(), ","); got != want {
				t.Errorf("audit %s, want %s", got, want)
			}
			if strings.Contains(w.Body.String(), "sk-provider") || (ex.Err != nil && strings.Contains(ex.Err.Error(), "sk-provider")) {
				t.Error("the provider key leaked")
			}
		})
	}
}

func manyMessages(n int) string {
	var b strings.Builder
	b.WriteString(`{"model":"m","messages":[`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"role":"user","content":"x"}`)
	}
	b.WriteString("]}")
	return b.String()
}

func TestEngineRateLimit(t *testing.T) {
	e := newEngine(t, jsonAnswer("x"), engineOpts{})
	if w, _ := e.do(e.gw.ChatCompletions(), "tok-tiny", hello); w.Code != http.StatusOK {
		t.Fatalf("first: %d %s", w.Code, w.Body)
	}
	w, _ := e.do(e.gw.ChatCompletions(), "tok-tiny", hello)
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
		t.Fatalf("second: %d %v", w.Code, w.Header())
	}
	if k := e.audit.Kinds(); k[len(k)-1] != "ratelimit.reject" {
		t.Errorf("audit %v", k)
	}
}

// fail_mode closed: no answer leaves without its entries.
func TestEngineAuditClosed(t *testing.T) {
	for _, stream := range []bool{false, true} {
		e := newEngine(t, streamOrJSON(stream), engineOpts{})
		e.audit.SetFail(true)
		body := hello
		if stream {
			body = `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`
		}
		w, _ := e.do(e.gw.ChatCompletions(), "tok-plain", body)
		if w.Code != http.StatusServiceUnavailable || strings.Contains(w.Body.String(), "answer-text") {
			t.Errorf("stream=%v: %d %s", stream, w.Code, w.Body)
		}
	}
}

func streamOrJSON(stream bool) http.HandlerFunc {
	if stream {
		return streamAnswer("answer-text")
	}
	return jsonAnswer("answer-text")
}

func TestEngineEmbeddingsAndModels(t *testing.T) {
	e := newEngine(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"model":"e","usage":{"prompt_tokens":3,"total_tokens":3}}`)
	}, engineOpts{})
	w, ex := e.do(e.gw.Embeddings(), "tok-plain", `{"model":"e","input":"hello"}`)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"embedding":[0.1,0.2]`) || ex.Usage.TotalTokens != 3 {
		t.Fatalf("%d %s %+v", w.Code, w.Body, ex.Usage)
	}
	r := httptest.NewRequest(http.MethodGet, "/v1/models", nil)
	r.Header.Set("Authorization", "Bearer tok-only_mini")
	mw := httptest.NewRecorder()
	e.gw.Models().ServeHTTP(mw, scope.Attach(r, &scope.Exchange{RequestID: "m"}))
	if mw.Code != http.StatusOK || !strings.Contains(mw.Body.String(), "gpt-4o-mini") {
		t.Fatalf("models: %d %s", mw.Code, mw.Body)
	}
}

// SACP agents: an invalid answer is asked again with the errors, a valid
// one is delivered compact with the X-SACP headers; with no valid answer
// the gateway's fallback is delivered.
func TestEngineProtocol(t *testing.T) {
	valid := `{"thought":"t","status":"success","data":{"n":1},"message":"done for bob@example.com"}`
	tests := []struct {
		name     string
		answers  []string
		stream   bool
		valid    string
		attempts int
	}{
		{"valid at once", []string{valid}, false, "true", 1},
		{"re-asked once", []string{"not json", valid}, false, "true", 2},
		{"fallback", []string{"a", "b", "c"}, false, "false", 3},
		{"streamed", []string{"not json", valid}, true, "true", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			n := 0
			e := newEngine(t, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				a := tc.answers[min(n, len(tc.answers)-1)]
				n++
				mu.Unlock()
				if tc.stream {
					streamAnswer(a)(w, r)
					return
				}
				jsonAnswer(a)(w, r)
			}, engineOpts{})
			body := `{"model":"m","messages":[{"role":"user","content":"go"}]}`
			if tc.stream {
				body = `{"model":"m","stream":true,"messages":[{"role":"user","content":"go"}]}`
			}
			w, ex := e.do(e.gw.ChatCompletions(), "tok-proto", body)
			if w.Code != http.StatusOK {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			if got := w.Header().Get("X-SACP-Valid"); got != tc.valid {
				t.Errorf("X-SACP-Valid %q, want %q", got, tc.valid)
			}
			mu.Lock()
			calls := n
			mu.Unlock()
			if ex.Attempts != tc.attempts || calls != tc.attempts {
				t.Errorf("attempts %d, upstream calls %d, want %d", ex.Attempts, calls, tc.attempts)
			}
			_, sent := e.upstreamSaw()
			if strings.Contains(w.Body.String(), "bob@example.com") {
				t.Errorf("message not redacted: %s", w.Body)
			}
			if !strings.Contains(sent, "thought") {
				t.Errorf("the protocol prompt was not injected: %s", sent)
			}
			if tc.attempts > 1 && !strings.Contains(sent, `"role":"assistant"`) {
				t.Errorf("the re-ask does not carry the invalid answer: %s", sent)
			}
			if k := e.audit.Kinds(); strings.Join(k, ",") != "llm.request,llm.response" {
				t.Errorf("audit %v", k)
			}
		})
	}
}

// A client that leaves is recorded as such, with nobody to answer.
func TestEngineClientGone(t *testing.T) {
	release := make(chan struct{})
	e := newEngine(t, func(w http.ResponseWriter, r *http.Request) {
		<-release
		jsonAnswer("late")(w, r)
	}, engineOpts{})
	defer close(release)
	r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(hello))
	r.Header.Set("Authorization", "Bearer tok-plain")
	r.Header.Set("Content-Type", "application/json")
	ctx, cancel := context.WithCancel(context.Background())
	ex := &scope.Exchange{RequestID: "gone", Start: time.Now()}
	done := make(chan struct{})
	go func() {
		e.gw.ChatCompletions().ServeHTTP(httptest.NewRecorder(), scope.Attach(r.WithContext(ctx), ex))
		close(done)
	}()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case <-done:
	case <-time.After(3 * time.Second):
		t.Fatal("the exchange did not end when the client left")
	}
	if ex.ErrCode != "client_closed_request" {
		t.Errorf("error code %q", ex.ErrCode)
	}
	if s := e.audit.Last("llm.response"); s == nil || s["status"] != 499 {
		t.Errorf("response entry %v", s)
	}
}

// A protocol agent's answer is validated choice by choice: a request for
// several choices is refused before any call, and one choice goes through.
func TestEngineProtocolRefusesSeveralChoices(t *testing.T) {
	calls := 0
	e := newEngine(t, func(w http.ResponseWriter, r *http.Request) {
		calls++
		jsonAnswer(`{"thought":"t","status":"success","data":{},"message":"ok"}`)(w, r)
	}, engineOpts{})
	for _, tc := range []struct {
		body string
		code int
	}{
		{`{"model":"m","n":2,"messages":[{"role":"user","content":"go"}]}`, http.StatusBadRequest},
		{`{"model":"m","n":1,"messages":[{"role":"user","content":"go"}]}`, http.StatusOK},
	} {
		w, _ := e.do(e.gw.ChatCompletions(), "tok-proto", tc.body)
		if w.Code != tc.code {
			t.Errorf("%s: %d %s, want %d", tc.body, w.Code, w.Body, tc.code)
		}
	}
	if calls != 1 {
		t.Errorf("%d upstream calls, want 1 (the n=2 request must not reach the provider)", calls)
	}
}

// A SACP answer that two JSON readers could read differently is read one
// way by the validator and could be read another way by the client: a
// repeated name (first or last wins), or an unpaired surrogate escape
// (U+FFFD for some readers, kept by others). It is an invalid answer, asked
// again and in the end replaced by the fallback, and never passed on.
func TestEngineProtocolRefusesAmbiguousAnswers(t *testing.T) {
	for _, tc := range []struct{ name, answer, why string }{
		{"name repeated in data", `{"thought":"t","status":"success","data":{"n":"hidden","n":1},"message":"m"}`, "duplicate"},
		{"name repeated nested in data", `{"thought":"t","status":"success","data":{"a":{"n":"hidden","n":1}},"message":"m"}`, "duplicate"},
		{"name repeated at the top", `{"thought":"t","status":"success","data":{},"message":"hidden","message":"m"}`, "duplicate"},
		{"escaped name repeated", `{"thought":"t","status":"success","data":{"n":"hidden","\u006e":1},"message":"m"}`, "duplicate"},
		{"unpaired surrogate in data", `{"thought":"t","status":"success","data":{"n":"hidden\ud800"},"message":"m"}`, "surrogate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			calls := 0
			e := newEngine(t, func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				calls++
				mu.Unlock()
				jsonAnswer(tc.answer)(w, r)
			}, engineOpts{})
			w, ex := e.do(e.gw.ChatCompletions(), "tok-proto", `{"model":"m","messages":[{"role":"user","content":"go"}]}`)
			if w.Code != http.StatusOK {
				t.Fatalf("%d %s", w.Code, w.Body)
			}
			if got := w.Header().Get("X-SACP-Valid"); got != "false" {
				t.Errorf("X-SACP-Valid %q, want false (fallback)", got)
			}
			mu.Lock()
			defer mu.Unlock()
			if calls != 3 || ex.Attempts != 3 {
				t.Errorf("upstream calls %d, attempts %d, want 3 (asked again)", calls, ex.Attempts)
			}
			if ex.SACP == nil || !strings.Contains(strings.Join(ex.SACP.Errors, "; "), tc.why) {
				t.Errorf("the audit does not say why: %+v", ex.SACP)
			}
			var doc struct {
				Choices []struct {
					Message struct{ Content string } `json:"message"`
				} `json:"choices"`
			}
			if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil || len(doc.Choices) != 1 {
				t.Fatalf("answer %s: %v", w.Body, err)
			}
			var sacpOut map[string]json.RawMessage
			if err := json.Unmarshal([]byte(doc.Choices[0].Message.Content), &sacpOut); err != nil {
				t.Fatalf("content %q: %v", doc.Choices[0].Message.Content, err)
			}
			// The fallback quotes the model's output as one string, never
			// its structure.
			var data map[string]json.RawMessage
			if string(sacpOut["status"]) != `"failure"` || json.Unmarshal(sacpOut["data"], &data) != nil ||
				len(data) != 1 || !strings.HasPrefix(string(data["raw_output"]), `"`) {
				t.Errorf("content %s", doc.Choices[0].Message.Content)
			}
		})
	}
}

// A chat policy that reads what the messages say gets the request as the
// strict reader built it in its own pass (one parse for both), and decides
// on it as on the body; the shipped policy, which the number of messages
// decides, has nothing built for it.
func TestEngineContentPolicyReadsTheReadersValue(t *testing.T) {
	dir := t.TempDir()
	if err := os.CopyFS(dir, os.DirFS("../rego")); err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile("../docs/examples/chat-content-policy.rego")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "gateway", "rules", "chat", "content.rego"), example, 0o600); err != nil {
		t.Fatal(err)
	}
	e := newEngine(t, jsonAnswer("hello"), engineOpts{policies: dir})
	key := `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"},{"role":"user","content":[{"type":"text","text":"-----BEGIN RSA PRIVATE KEY-----"}]}]}`
	for range 3 { // the first decision is made in full, the later ones on the agent's residual
		w, ex := e.do(e.gw.ChatCompletions(), "tok-plain", hello)
		if w.Code != http.StatusOK {
			t.Fatalf("a clean request: %d %s", w.Code, w.Body)
		}
		if read, ok := ex.BodyValue.(policy.ChatRequest); !ok || read.Value == nil || read.Messages != 1 {
			t.Fatalf("the reader built nothing for a policy that reads the messages: %#v", ex.BodyValue)
		}
		w, ex = e.do(e.gw.ChatCompletions(), "tok-plain", key)
		if w.Code != http.StatusForbidden || !strings.Contains(w.Body.String(), "a message carries a private key") {
			t.Fatalf("a private key in a content part: %d %s", w.Code, w.Body)
		}
		if v, _ := ex.Verdict(scope.CheckPolicy); v.Verdict != "deny" {
			t.Fatalf("verdict %+v", v)
		}
		time.Sleep(50 * time.Millisecond)
	}

	shipped := newEngine(t, jsonAnswer("hello"), engineOpts{})
	deadline := time.Now().Add(10 * time.Second)
	for {
		w, ex := shipped.do(shipped.gw.ChatCompletions(), "tok-plain", key)
		if w.Code != http.StatusOK {
			t.Fatalf("the shipped policy: %d %s", w.Code, w.Body)
		}
		if ex.BodyValue == nil {
			break // settled for the agent: nothing to build
		}
		if time.Now().After(deadline) {
			t.Fatal("the shipped policy, settled by the number of messages, still has the reader build the request's value")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
