package server_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openai/openai-go"
	"github.com/openai/openai-go/option"

	"github.com/sacpgw/gateway/upstream/mock"
)

// fakeOpenAI is an OpenAI-compatible upstream recording what it received.
type fakeOpenAI struct {
	hits     atomic.Int32
	lastAuth atomic.Value // string
	lastHdr  atomic.Value // http.Header
	lastBody atomic.Value // string
	handler  func(w http.ResponseWriter, r *http.Request, body []byte)
}

func (f *fakeOpenAI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.hits.Add(1)
	body, _ := io.ReadAll(r.Body)
	f.lastAuth.Store(r.Header.Get("Authorization"))
	f.lastHdr.Store(r.Header.Clone())
	f.lastBody.Store(string(body))
	f.handler(w, r, body)
}

func newUpstream(t *testing.T, h func(w http.ResponseWriter, r *http.Request, body []byte)) (*fakeOpenAI, *httptest.Server) {
	f := &fakeOpenAI{handler: h}
	s := httptest.NewServer(f)
	t.Cleanup(s.Close)
	return f, s
}

func completion(content string) string {
	return `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":` +
		jsonString(content) + `}}],"usage":{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12}}`
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

func chunk(content string) string {
	return `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"delta":{"content":` + jsonString(content) + `},"finish_reason":null}]}` + "\n\n"
}

func userParams(model, text string) openai.ChatCompletionNewParams {
	return openai.ChatCompletionNewParams{Model: model, Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(text)}}
}

func apiErr(t *testing.T, err error) *openai.Error {
	t.Helper()
	var e *openai.Error
	if !errors.As(err, &e) {
		t.Fatalf("want an *openai.Error, got %T: %v", err, err)
	}
	return e
}

func TestChatPassThrough(t *testing.T) {
	up, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if r.URL.Path != "/v1/chat/completions" {
			http.Error(w, "bad path "+r.URL.Path, 404)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Openai-Organization", "gateway-org")
		w.Header().Set("X-Ratelimit-Remaining-Requests", "9999")
		io.WriteString(w, completion("hello from upstream"))
	})
	st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1"})
	var resp *http.Response
	c := st.client("tok-alpha")
	got, err := c.Chat.Completions.New(context.Background(), userParams("gpt-4o-mini", "hi"),
		option.WithResponseInto(&resp), option.WithHeader("X-Session-Id", "sess-1"), option.WithHeader("Cookie", "secret=1"))
	if err != nil {
		t.Fatal(err)
	}
	if got.Choices[0].Message.Content != "hello from upstream" {
		t.Errorf("content = %q", got.Choices[0].Message.Content)
	}
	if got.Usage.TotalTokens != 12 {
		t.Errorf("usage = %+v", got.Usage)
	}
	if a := up.lastAuth.Load(); a != "Bearer "+upstreamKey {
		t.Errorf("upstream saw Authorization %q, want the provider key", a)
	}
	hdr := up.lastHdr.Load().(http.Header)
	if hdr.Get("Cookie") != "" || strings.Contains(fmt.Sprint(hdr), "tok-alpha") {
		t.Errorf("agent credentials or cookies reached the upstream: %v", hdr)
	}
	if hdr.Get("X-Session-Id") != "sess-1" || hdr.Get("X-Request-Id") == "" {
		t.Errorf("session and request ids not passed on: %v", hdr)
	}
	if !strings.Contains(up.lastBody.Load().(string), `"model":"gpt-4o-mini"`) {
		t.Errorf("upstream body = %s", up.lastBody.Load())
	}
	if resp.Header.Get("X-Request-Id") == "" {
		t.Error("no X-Request-Id on the response")
	}
	if resp.Header.Get("Openai-Organization") != "" || resp.Header.Get("X-Ratelimit-Remaining-Requests") == "9999" {
		t.Errorf("provider account headers leaked to the agent: %v", resp.Header)
	}
	if !st.waitLog(`"agent":"alpha"`) {
		t.Errorf("access log lacks the agent: %s", st.logs.String())
	}
	if strings.Contains(st.logs.String(), "tok-alpha") || strings.Contains(st.logs.String(), upstreamKey) {
		t.Error("a token or key reached the log")
	}
}

func TestRequestIDEchoed(t *testing.T) {
	st := newStack(t, stackOpts{})
	resp := st.post("/v1/chat/completions", "tok-alpha", `{"model":"mock-1","messages":[{"role":"user","content":"x"}]}`, "X-Request-Id", "client-id-42")
	if got := resp.Header.Get("X-Request-Id"); got != "client-id-42" {
		t.Errorf("X-Request-Id = %q, want the client's", got)
	}
	bad := st.post("/v1/chat/completions", "tok-alpha", `{}`, "X-Request-Id", "evil\tline")
	if got := bad.Header.Get("X-Request-Id"); got == "" || strings.Contains(got, "evil") {
		t.Errorf("unsafe X-Request-Id echoed: %q", got)
	}
}

func TestStreamChunksArriveBeforeUpstreamFinishes(t *testing.T) {
	release := make(chan struct{})
	_, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunk("first "))
		w.(http.Flusher).Flush()
		select { // hold the stream open until the client saw the first chunk
		case <-release:
		case <-r.Context().Done():
			return
		}
		io.WriteString(w, chunk("second"))
		io.WriteString(w, "data: [DONE]\n\n")
	})
	st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1"})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream := st.client("tok-alpha").Chat.Completions.NewStreaming(ctx, userParams("gpt-4o-mini", "hi"))
	if !stream.Next() {
		t.Fatalf("no first chunk before the upstream finished: %v", stream.Err())
	}
	if got := stream.Current().Choices[0].Delta.Content; got != "first " {
		t.Fatalf("first chunk = %q", got)
	}
	close(release)
	var rest strings.Builder
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			rest.WriteString(c.Delta.Content)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if rest.String() != "second" {
		t.Errorf("rest = %q", rest.String())
	}
}

func TestStreamUsageForTokenBudget(t *testing.T) {
	// The budget agent has a token_limit: the gateway asks for the usage
	// chunk, debits it, and hides it from a client that did not ask.
	_, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if !strings.Contains(string(body), `"include_usage":true`) {
			t.Errorf("gateway did not request stream usage: %s", body)
		}
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunk("ok"))
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":60,"completion_tokens":50,"total_tokens":110}}`+"\n\n")
		io.WriteString(w, "data: [DONE]\n\n")
	})
	st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1"})
	// max_tokens keeps the reservation (prompt + completion bound) inside
	// the 100-token budget.
	resp := st.post("/v1/chat/completions", "tok-budget", `{"model":"gpt-4o-mini","stream":true,"max_tokens":40,"messages":[{"role":"user","content":"hi"}]}`)
	body := readAll(t, resp.Body)
	if strings.Contains(body, `"usage"`) {
		t.Errorf("usage chunk the client did not ask for was sent: %s", body)
	}
	if !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Errorf("stream not terminated: %q", body)
	}
	// 110 tokens were spent of 100/hour: the next request is refused.
	resp2 := st.post("/v1/chat/completions", "tok-budget", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
	if resp2.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("status after exhausting the token budget = %d", resp2.StatusCode)
	}
	if resp2.Header.Get("Retry-After") == "" || resp2.Header.Get("X-Ratelimit-Limit-Tokens") != "100" {
		t.Errorf("429 headers = %v", resp2.Header)
	}
}

func TestErrorsInOpenAIShape(t *testing.T) {
	_, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, completion("ok"))
	})
	st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1"})
	big := strings.Repeat("x", 2048)
	cases := []struct {
		note, token, body string
		status            int
		code, typ         string
	}{
		{"no token", "", `{"model":"mock-1","messages":[{"role":"user","content":"x"}]}`, 401, "invalid_api_key", "authentication_error"},
		{"unknown token", "tok-nobody", `{"model":"mock-1","messages":[{"role":"user","content":"x"}]}`, 401, "invalid_api_key", "authentication_error"},
		{"malformed JSON", "tok-alpha", `{"model":"mock-1","messages":[`, 400, "invalid_request", "invalid_request_error"},
		{"missing model", "tok-alpha", `{"messages":[{"role":"user","content":"x"}]}`, 400, "invalid_request", "invalid_request_error"},
		{"missing messages", "tok-alpha", `{"model":"mock-1"}`, 400, "invalid_request", "invalid_request_error"},
		{"wrong type", "tok-alpha", `{"model":42,"messages":[]}`, 400, "invalid_request", "invalid_request_error"},
		{"invalid UTF-8", "tok-alpha", "{\"model\":\"mock-1\",\"messages\":[{\"role\":\"user\",\"content\":\"\xff\xfe\"}]}", 400, "invalid_request", "invalid_request_error"},
		{"too large", "tok-small", `{"model":"mock-1","messages":[{"role":"user","content":"` + big + `"}]}`, 413, "request_too_large", "invalid_request_error"},
		{"model not allowed", "tok-restricted", `{"model":"gpt-4o","messages":[{"role":"user","content":"x"}]}`, 404, "model_not_found", "invalid_request_error"},
		{"unknown route", "tok-alpha", `{}`, 404, "unknown_url", "invalid_request_error"},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			path := "/v1/chat/completions"
			if tc.note == "unknown route" {
				path = "/v1/nothing"
			}
			resp := st.post(path, tc.token, tc.body)
			var e struct {
				Error struct {
					Message, Type, Code string
					Param               *string
				}
			}
			raw := readAll(t, resp.Body)
			if err := json.Unmarshal([]byte(raw), &e); err != nil {
				t.Fatalf("body is not JSON: %q", raw)
			}
			if resp.StatusCode != tc.status || e.Error.Code != tc.code || e.Error.Type != tc.typ || e.Error.Message == "" {
				t.Errorf("got %d %s/%s %q, want %d %s/%s", resp.StatusCode, e.Error.Type, e.Error.Code, e.Error.Message, tc.status, tc.typ, tc.code)
			}
			if resp.Header.Get("X-Request-Id") == "" {
				t.Error("error response without X-Request-Id")
			}
		})
	}
}

func TestSDKSeesAuthAndModelErrors(t *testing.T) {
	st := newStack(t, stackOpts{})
	_, err := st.client("tok-wrong").Chat.Completions.New(context.Background(), userParams("mock-1", "x"))
	if e := apiErr(t, err); e.StatusCode != 401 || e.Code != "invalid_api_key" {
		t.Errorf("wrong token: %d %s", e.StatusCode, e.Code)
	}
	_, err = st.client("tok-restricted").Chat.Completions.New(context.Background(), userParams("gpt-4o", "x"))
	if e := apiErr(t, err); e.StatusCode != 404 || e.Code != "model_not_found" {
		t.Errorf("unknown model: %d %s", e.StatusCode, e.Code)
	}
	long := strings.Repeat("too long ", 200)
	_, err = st.client("tok-small").Chat.Completions.New(context.Background(), userParams("mock-1", long))
	if e := apiErr(t, err); e.StatusCode != 413 || e.Code != "request_too_large" {
		t.Errorf("oversize: %d %s", e.StatusCode, e.Code)
	}
}

func TestRateLimitSeenBySDK(t *testing.T) {
	st := newStack(t, stackOpts{})
	c := st.client("tok-limited")
	for i := range 2 {
		var resp *http.Response
		if _, err := c.Chat.Completions.New(context.Background(), userParams("mock-1", "x"), option.WithResponseInto(&resp)); err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if want := fmt.Sprint(1 - i); resp.Header.Get("X-Ratelimit-Remaining-Requests") != want {
			t.Errorf("request %d: remaining = %q, want %s", i, resp.Header.Get("X-Ratelimit-Remaining-Requests"), want)
		}
	}
	_, err := c.Chat.Completions.New(context.Background(), userParams("mock-1", "x"))
	e := apiErr(t, err)
	if e.StatusCode != http.StatusTooManyRequests || e.Type != "rate_limit_error" || e.Code != "rate_limit_exceeded" {
		t.Fatalf("third request: %d %s %s", e.StatusCode, e.Type, e.Code)
	}
	h := e.Response.Header
	if ra := h.Get("Retry-After"); ra == "" || ra == "0" {
		t.Errorf("Retry-After = %q", ra)
	}
	if h.Get("X-Ratelimit-Limit-Requests") != "2" || h.Get("X-Ratelimit-Remaining-Requests") != "0" || h.Get("X-Ratelimit-Reset-Requests") == "" {
		t.Errorf("x-ratelimit headers = %v", h)
	}
	// Another agent is not affected.
	if _, err := st.client("tok-alpha").Chat.Completions.New(context.Background(), userParams("mock-1", "x")); err != nil {
		t.Errorf("other agent limited too: %v", err)
	}
}

func TestUpstreamFailures(t *testing.T) {
	t.Run("5xx retried then 502", func(t *testing.T) {
		up, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
			http.Error(w, `{"error":{"message":"boom"}}`, 500)
		})
		st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1", maxRetries: 2})
		_, err := st.client("tok-alpha").Chat.Completions.New(context.Background(), userParams("gpt-4o-mini", "x"))
		e := apiErr(t, err)
		if e.StatusCode != 502 || e.Code != "upstream_error" {
			t.Errorf("got %d %s", e.StatusCode, e.Code)
		}
		if n := up.hits.Load(); n != 3 {
			t.Errorf("upstream hit %d times, want 1 + 2 retries", n)
		}
	})
	t.Run("5xx then success", func(t *testing.T) {
		var n atomic.Int32
		_, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
			if n.Add(1) == 1 {
				http.Error(w, "overloaded", http.StatusServiceUnavailable)
				return
			}
			if !strings.Contains(string(body), `"model":"gpt-4o-mini"`) {
				t.Errorf("retry lost the body: %q", body)
			}
			w.Header().Set("Content-Type", "application/json")
			io.WriteString(w, completion("second time lucky"))
		})
		st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1", maxRetries: 2})
		got, err := st.client("tok-alpha").Chat.Completions.New(context.Background(), userParams("gpt-4o-mini", "x"))
		if err != nil || got.Choices[0].Message.Content != "second time lucky" {
			t.Fatalf("got %v, %v", got, err)
		}
	})
	t.Run("4xx passed through", func(t *testing.T) {
		up, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(400)
			io.WriteString(w, `{"error":{"message":"bad temperature","type":"invalid_request_error","code":"invalid_value","param":"temperature"}}`)
		})
		st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1", maxRetries: 2})
		_, err := st.client("tok-alpha").Chat.Completions.New(context.Background(), userParams("gpt-4o-mini", "x"))
		if e := apiErr(t, err); e.StatusCode != 400 || e.Param != "temperature" || up.hits.Load() != 1 {
			t.Errorf("got %d %q after %d hits", e.StatusCode, e.Param, up.hits.Load())
		}
	})
	t.Run("connection refused then 502", func(t *testing.T) {
		ln := httptest.NewServer(http.NotFoundHandler())
		dead := ln.URL
		ln.Close()
		st := newStack(t, stackOpts{upstreamURL: dead + "/v1", maxRetries: 1})
		_, err := st.client("tok-alpha").Chat.Completions.New(context.Background(), userParams("gpt-4o-mini", "x"))
		e := apiErr(t, err)
		if e.StatusCode != 502 || !strings.Contains(e.Message, "refused") {
			t.Errorf("got %d %q", e.StatusCode, e.Message)
		}
	})
	t.Run("timeout 504", func(t *testing.T) {
		_, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
			select {
			case <-time.After(5 * time.Second):
			case <-r.Context().Done():
			}
		})
		st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1", responseTimeout: "200ms"})
		start := time.Now()
		_, err := st.client("tok-alpha").Chat.Completions.New(context.Background(), userParams("gpt-4o-mini", "x"))
		e := apiErr(t, err)
		if e.StatusCode != 504 || e.Code != "upstream_error" {
			t.Errorf("got %d %s", e.StatusCode, e.Code)
		}
		if el := time.Since(start); el > 3*time.Second {
			t.Errorf("504 took %s", el)
		}
	})
}

func TestClientDisconnectCancelsUpstream(t *testing.T) {
	cancelled := make(chan struct{})
	_, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunk("first"))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
			close(cancelled)
		case <-time.After(10 * time.Second):
		}
	})
	st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1"})
	ctx, cancel := context.WithCancel(context.Background())
	stream := st.client("tok-alpha").Chat.Completions.NewStreaming(ctx, userParams("gpt-4o-mini", "hi"))
	if !stream.Next() {
		t.Fatalf("no first chunk: %v", stream.Err())
	}
	cancel()
	stream.Close()
	select {
	case <-cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("upstream request still running 5s after the client went away")
	}
}

func TestModelsAndEmbeddings(t *testing.T) {
	st := newStack(t, stackOpts{})
	page, err := st.client("tok-restricted").Models.List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, m := range page.Data {
		ids = append(ids, m.ID)
	}
	if strings.Join(ids, ",") != "mock-1,gpt-4o-mini" {
		t.Errorf("models = %v, want the allowed literal names", ids)
	}
	// models.retrieve: a model the agent may use, then one it may not.
	got, err := st.client("tok-restricted").Models.Get(context.Background(), ids[0])
	if err != nil || got.ID != ids[0] || got.Object != "model" {
		t.Errorf("models.retrieve(%q) = %+v, %v", ids[0], got, err)
	}
	var apiErr *openai.Error
	for _, id := range []string{"not-a-model", "gpt-4o"} { // unknown; served but not allowed
		if _, err := st.client("tok-restricted").Models.Get(context.Background(), id); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound || apiErr.Code != "model_not_found" {
			t.Errorf("models.retrieve(%q): %v, want 404 model_not_found", id, err)
		}
	}
	emb, err := st.client("tok-alpha").Embeddings.New(context.Background(), openai.EmbeddingNewParams{
		Model: "mock-embed", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: []string{"a", "b"}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(emb.Data) != 2 || len(emb.Data[0].Embedding) != mock.EmbeddingDim {
		t.Errorf("embeddings = %+v", emb.Data)
	}
}

func TestSidecarAttributesTokenlessRequests(t *testing.T) {
	st := newStack(t, stackOpts{sidecar: "limited"})
	resp := st.post("/v1/chat/completions", "", `{"model":"mock-1","messages":[{"role":"user","content":"x"}]}`)
	if resp.StatusCode != 200 || resp.Header.Get("X-Ratelimit-Limit-Requests") != "2" {
		t.Fatalf("tokenless request in sidecar mode: %d %v", resp.StatusCode, resp.Header)
	}
	if other := st.post("/v1/chat/completions", "tok-alpha", `{"model":"mock-1","messages":[{"role":"user","content":"x"}]}`); other.StatusCode != 401 {
		t.Errorf("another agent's token on a sidecar: %d, want 401", other.StatusCode)
	}
}

func TestTraceparentPropagated(t *testing.T) {
	up, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, completion("ok"))
	})
	st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1"})
	tp := "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	readAll(t, st.post("/v1/chat/completions", "tok-alpha", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"x"}]}`, "Traceparent", tp).Body)
	if got := up.lastHdr.Load().(http.Header).Get("Traceparent"); got != tp {
		t.Errorf("upstream traceparent = %q", got)
	}
	if !st.waitLog(`"trace_id":"4bf92f3577b34da6a3ce929d0e0e4736"`) {
		t.Errorf("access log lacks the trace id: %s", st.logs.String())
	}
}

// A provider's ": ping\n\n" keep-alive would make openai-go v1 fail with
// "unexpected end of JSON input" (openai/openai-go#556); the gateway passes
// the comment line without its blank line.
func TestUpstreamKeepAliveDoesNotBreakTheSDK(t *testing.T) {
	_, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		io.WriteString(w, chunk("one "))
		io.WriteString(w, ": ping\n\n")
		io.WriteString(w, chunk("two"))
		io.WriteString(w, "data: [DONE]\n\n")
	})
	st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1"})
	stream := st.client("tok-alpha").Chat.Completions.NewStreaming(context.Background(), userParams("gpt-4o-mini", "x"))
	var got strings.Builder
	for stream.Next() {
		for _, c := range stream.Current().Choices {
			got.WriteString(c.Delta.Content)
		}
	}
	if err := stream.Err(); err != nil || got.String() != "one two" {
		t.Fatalf("stream through a keep-alive: %q, %v", got.String(), err)
	}
}

// Embeddings as base64 (what the Node SDK asks for by default) pass the
// gateway's answer scanning unharmed: the string decodes to the very
// vector the float form gives, for every input.
func TestEmbeddingsBase64ThroughTheGateway(t *testing.T) {
	st := newStack(t, stackOpts{})
	inputs := []string{"hotel search in Paris", "review code changes", "ceo@example.com"}
	ask := func(format openai.EmbeddingNewParamsEncodingFormat) *openai.CreateEmbeddingResponse {
		t.Helper()
		emb, err := st.client("tok-alpha").Embeddings.New(context.Background(), openai.EmbeddingNewParams{
			Model: "mock-embed", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: inputs}, EncodingFormat: format,
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(emb.Data) != len(inputs) {
			t.Fatalf("%d embeddings for %d inputs", len(emb.Data), len(inputs))
		}
		return emb
	}
	floats, b64 := ask(openai.EmbeddingNewParamsEncodingFormatFloat), ask(openai.EmbeddingNewParamsEncodingFormatBase64)
	for i := range inputs {
		raw, err := base64.StdEncoding.DecodeString(b64.Data[i].JSON.Embedding.Raw()[1 : len(b64.Data[i].JSON.Embedding.Raw())-1])
		if err != nil || len(raw) != 4*len(floats.Data[i].Embedding) {
			t.Fatalf("input %d: base64 embedding does not decode to %d floats: %v (%d bytes)", i, len(floats.Data[i].Embedding), err, len(raw))
		}
		for j, f := range floats.Data[i].Embedding {
			if got := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:])); float64(got) != float64(float32(f)) {
				t.Fatalf("input %d, dimension %d: base64 %v, float %v", i, j, got, f)
			}
		}
	}
}
