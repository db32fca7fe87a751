package app

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"
	"github.com/openai/openai-go"
	"github.com/openai/openai-go/option"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
)

// fakeAnthropic is a provider speaking Anthropic's Messages API: it checks
// the credentials a real one would, keeps every request it got, and answers
// what the test gives it (the recorded answers of dialect/anthropic's
// testdata, or an error).
type fakeAnthropic struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []fakeRequest
	// answer is the status, content type and body of the next answer.
	answer func(req map[string]any) (int, string, string)
	// keep: keep the requests (a benchmark does not).
	keep bool
}

type fakeRequest struct {
	header http.Header
	path   string
	body   map[string]any
	raw    string
}

const anthropicKey = "sk-ant-provider-key"

func newFakeAnthropic(t testing.TB) *fakeAnthropic {
	f := &fakeAnthropic{keep: true}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		_ = json.Unmarshal(raw, &body)
		f.mu.Lock()
		if f.keep {
			f.got = append(f.got, fakeRequest{header: r.Header.Clone(), path: r.URL.Path, body: body, raw: string(raw)})
		}
		answer := f.answer
		f.mu.Unlock()
		if r.Header.Get("X-Api-Key") != anthropicKey || r.Header.Get("Anthropic-Version") == "" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
			return
		}
		status, ctype, out := answer(body)
		w.Header().Set("Content-Type", ctype)
		w.WriteHeader(status)
		_, _ = io.WriteString(w, out)
	}))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeAnthropic) requests() []fakeRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]fakeRequest(nil), f.got...)
}

func (f *fakeAnthropic) set(a func(req map[string]any) (int, string, string)) {
	f.mu.Lock()
	f.answer = a
	f.mu.Unlock()
}

// recorded is a file of dialect/anthropic's provider fixtures.
func recorded(t testing.TB, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "dialect", "anthropic", "testdata", "provider", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// newAnthropicGateway is a gateway whose claude-* models go to a native
// Anthropic upstream first and to the built-in mock (an OpenAI-form
// provider) as failover.
func newAnthropicGateway(t testing.TB) (*a2a, *fakeAnthropic) {
	return newAnthropicGatewayWith(t, "")
}

// newAnthropicGatewayWith adds the upstreams entries extra (models gpt-*).
func newAnthropicGatewayWith(t testing.TB, extra string) (*a2a, *fakeAnthropic) {
	return newAnthropicGatewayOpts(t, "", extra)
}

// newAnthropicGatewayOpts also adds claude to the anthropic upstream's
// entry (", prompt_cache: true").
func newAnthropicGatewayOpts(t testing.TB, claude, extra string) (*a2a, *fakeAnthropic) {
	t.Helper()
	dir := t.TempDir()
	fake := newFakeAnthropic(t)
	gw := `listen: "127.0.0.1:0"
upstreams:
  - {name: claude, type: anthropic, base_url: ` + fake.srv.URL + `/v1, api_key: ` + anthropicKey + `, max_retries: 0, models: ["claude-*"], breaker: {failures: 100}` + claude + `}
  - {name: fallback, type: mock, models: ["claude-*", "mock-*"]}
` + extra + `
policy:
  dir: ` + policyDir(a2aOpts{}) + `
audit:
  dir: ` + filepath.Join(dir, "audit") + `
  chain: claude
  fail_mode: closed
`
	agents := `agents:
  coder:
    type: code-generator
    token_sha256: "` + roster.HashTokenHex("tok-coder") + `"
    rate_limit: 100000000/minute
    models: ["claude-*"` + map[bool]string{true: `, "gpt-*"`}[extra != ""] + `]
  sacp:
    type: code-generator
    response_format: json_standard
    token_sha256: "` + roster.HashTokenHex("tok-sacp") + `"
    models: ["claude-*"]
`
	protocol := "protocol:\n  redaction:\n    detectors: [email]\n"
	return serveApp(t, dir, filepath.Join(dir, "audit"), map[string]string{config.GatewayFile: gw, config.AgentsFile: agents, config.ProtocolFile: protocol}), fake
}

// TestAnthropicUpstream: agents on OpenAI's SDK and on Anthropic's reach a
// native Anthropic upstream through the gateway. The provider gets
// Anthropic's wire format with the gateway's key (never the agent's
// token), the answers (recorded from Anthropic's API) come back in each
// client's own format, governed as any other call: redaction, the SACP
// prompt in `system`, failover, audit with cost.
func TestAnthropicUpstream(t *testing.T) {
	g, fake := newAnthropicGateway(t)
	ctx := context.Background()
	oc := openai.NewClient(option.WithBaseURL(g.srv.URL+"/v1"), option.WithAPIKey("tok-coder"), option.WithMaxRetries(0))
	weather := openai.ChatCompletionToolParam{Function: openai.FunctionDefinitionParam{
		Name: "get_weather", Description: openai.String("Get weather"),
		Parameters: openai.FunctionParameters{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}},
	}}
	params := openai.ChatCompletionNewParams{
		Model:    "claude-3-7-sonnet-latest",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("What's the weather in San Francisco? Use fahrenheit.")},
		Tools:    []openai.ChatCompletionToolParam{weather},
	}

	t.Run("openai client, tool call", func(t *testing.T) {
		fake.set(func(map[string]any) (int, string, string) {
			return 200, "application/json", recorded(t, "tool_call.answer.json")
		})
		c, err := oc.Chat.Completions.New(ctx, params)
		if err != nil {
			t.Fatal(err)
		}
		if len(c.Choices) != 1 || c.Choices[0].FinishReason != "tool_calls" || len(c.Choices[0].Message.ToolCalls) != 1 {
			t.Fatalf("completion %+v", c)
		}
		tc := c.Choices[0].Message.ToolCalls[0]
		if tc.ID != "toolu_01TZR6ZrLHdpAWdmhVPuDfjQ" || tc.Function.Name != "get_weather" || tc.Function.Arguments != `{"city":"San Francisco","units":"fahrenheit"}` {
			t.Errorf("tool call %+v", tc)
		}
		if c.Usage.PromptTokens != 402 || c.Usage.CompletionTokens != 89 {
			t.Errorf("usage %+v, want Anthropic's 402 in, 89 out", c.Usage)
		}
		reqs := fake.requests()
		last := reqs[len(reqs)-1]
		if last.path != "/v1/messages" || last.header.Get("Anthropic-Version") != "2023-06-01" || last.header.Get("Authorization") != "" {
			t.Errorf("the provider got %s with headers %v", last.path, last.header)
		}
		for k, v := range last.header {
			if strings.Contains(strings.Join(v, " "), "tok-coder") {
				t.Errorf("the agent's gateway token reached the provider in %s", k)
			}
		}
		tools, _ := last.body["tools"].([]any)
		if len(tools) != 1 || tools[0].(map[string]any)["input_schema"] == nil || last.body["max_tokens"] != float64(4096) {
			t.Errorf("the provider got %s", last.raw)
		}
	})

	t.Run("openai client, stream with a tool call", func(t *testing.T) {
		fake.set(func(map[string]any) (int, string, string) {
			return 200, "text/event-stream; charset=utf-8", recorded(t, "tool_stream.anthropic.sse")
		})
		s := oc.Chat.Completions.NewStreaming(ctx, params)
		var acc openai.ChatCompletionAccumulator
		for s.Next() {
			acc.AddChunk(s.Current())
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if len(acc.Choices) != 1 || acc.Choices[0].FinishReason != "tool_calls" || len(acc.Choices[0].Message.ToolCalls) != 1 {
			t.Fatalf("accumulated %+v", acc.ChatCompletion)
		}
		if got := acc.Choices[0].Message.ToolCalls[0].Function.Arguments; got != `{"city": "San Francisco"}` {
			t.Errorf("arguments %q", got)
		}
		if !strings.HasPrefix(acc.Choices[0].Message.Content, "I'd be happy to check the weather") {
			t.Errorf("content %q", acc.Choices[0].Message.Content)
		}
	})

	t.Run("anthropic client, both translations", func(t *testing.T) {
		fake.set(func(map[string]any) (int, string, string) {
			return 200, "text/event-stream", recorded(t, "text_stream.anthropic.sse")
		})
		ac := anthropic.NewClient(aoption.WithBaseURL(g.srv.URL), aoption.WithAPIKey("tok-coder"), aoption.WithMaxRetries(0))
		stream := ac.Messages.NewStreaming(ctx, anthropic.MessageNewParams{
			Model: "claude-3-7-sonnet-latest", MaxTokens: 512,
			System:   []anthropic.TextBlockParam{{Text: "Be brief."}},
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Weather in SF in fahrenheit?"))},
		})
		var msg anthropic.Message
		for stream.Next() {
			if err := msg.Accumulate(stream.Current()); err != nil {
				t.Fatal(err)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		if msg.ID != "msg_01Hh7yjeiaEaEREnpywjByCo" || len(msg.Content) != 1 || msg.Content[0].Text != "The current weather in San Francisco is 68 degrees Fahrenheit." || msg.StopReason != anthropic.StopReasonEndTurn {
			t.Fatalf("message %+v", msg)
		}
		reqs := fake.requests()
		if sys := reqs[len(reqs)-1].body["system"]; sys != "Be brief." {
			t.Errorf("system %v", sys)
		}
	})

	t.Run("redaction across translated stream events", func(t *testing.T) {
		fake.set(func(map[string]any) (int, string, string) {
			sse := strings.Replace(recorded(t, "text_stream.anthropic.sse"), `"68 degrees Fahren"`, `"mail ceo@example.com Fahren"`, 1)
			return 200, "text/event-stream", sse
		})
		s := oc.Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{Model: "claude-3-7-sonnet-latest", Messages: params.Messages})
		var text strings.Builder
		for s.Next() {
			for _, ch := range s.Current().Choices {
				text.WriteString(ch.Delta.Content)
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(text.String(), "ceo@example.com") || !strings.Contains(text.String(), "[REDACTED:email]") {
			t.Errorf("streamed %q", text.String())
		}
	})

	t.Run("protocol prompt goes into system", func(t *testing.T) {
		sacp := `{"thought":"The tool said 68F.","status":"success","message":"Weather fetched.","data":{"temp_f":68}}`
		fake.set(func(map[string]any) (int, string, string) {
			b, _ := json.Marshal(map[string]any{"id": "msg_sacp", "type": "message", "role": "assistant", "model": "claude-3-7-sonnet-20250219",
				"content": []any{map[string]any{"type": "text", "text": sacp}}, "stop_reason": "end_turn", "usage": map[string]any{"input_tokens": 900, "output_tokens": 20}})
			return 200, "application/json", string(b)
		})
		sc := openai.NewClient(option.WithBaseURL(g.srv.URL+"/v1"), option.WithAPIKey("tok-sacp"), option.WithMaxRetries(0))
		c, err := sc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "claude-3-7-sonnet-latest", Messages: params.Messages})
		if err != nil {
			t.Fatal(err)
		}
		var got map[string]any
		if err := json.Unmarshal([]byte(c.Choices[0].Message.Content), &got); err != nil || got["status"] != "success" {
			t.Errorf("answer %q", c.Choices[0].Message.Content)
		}
		reqs := fake.requests()
		if sys, _ := reqs[len(reqs)-1].body["system"].(string); !strings.Contains(sys, "SYSTEM PROTOCOL") {
			t.Errorf("the protocol prompt is not Anthropic's system prompt: %q", sys)
		}
	})

	t.Run("untranslatable parameter refused by name", func(t *testing.T) {
		before := len(fake.requests())
		p := params
		p.Seed = openai.Int(7)
		_, err := oc.Chat.Completions.New(ctx, p)
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Message, "seed") {
			t.Fatalf("err = %v, want a 400 naming seed", err)
		}
		if len(fake.requests()) != before {
			t.Error("an untranslatable request reached the provider")
		}
	})

	t.Run("overloaded: failover to the OpenAI-form provider", func(t *testing.T) {
		fake.set(func(map[string]any) (int, string, string) {
			return 529, "application/json", `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`
		})
		c, err := oc.Chat.Completions.New(ctx, openai.ChatCompletionNewParams{Model: "claude-3-7-sonnet-latest", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello there")}})
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(c.Choices[0].Message.Content, "hello there") {
			t.Errorf("the mock's echo was expected, got %q", c.Choices[0].Message.Content)
		}
		var failedOver bool
		for _, e := range g.entries(audit.KindLLMResponse) {
			s := summaryOf(e)
			if s["upstream"] == "fallback" && strings.Contains(string(e.Summary), `"status_529"`) {
				failedOver = true
			}
		}
		if !failedOver {
			t.Error("no llm.response entry records the failover from claude (status_529) to fallback")
		}
		resp, err := http.Get(g.srv.URL + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(body), `gateway_upstream_failovers_total{upstream="claude"} 1`) {
			t.Errorf("/metrics does not count the failover from claude:\n%s", grepLines(string(body), "gateway_upstream_"))
		}
	})

	t.Run("audit: upstream and cost", func(t *testing.T) {
		found := false
		for _, e := range g.entries(audit.KindLLMResponse) {
			s := summaryOf(e)
			if s["upstream"] == "claude" && s["cost"] != nil {
				found = true
			}
		}
		if !found {
			t.Error("no priced llm.response entry from the claude upstream")
		}
	})
}

// grepLines is the lines of s that contain sub.
func grepLines(s, sub string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// BenchmarkAnthropicUpstream: what the translation to and from a native
// Anthropic upstream costs, against the same exchange with an
// OpenAI-form upstream. Both providers answer the same recorded answer
// (dialect/anthropic's tool_call and tool_stream fixtures: Anthropic's
// recording, and the chat form the translation makes of it), so the
// difference is the translation (dialect/anthropic's BenchmarkProvider
// gives the translation alone, per request and per stream event).
func BenchmarkAnthropicUpstream(b *testing.B) {
	chatJSON, chatSSE := recorded(b, "tool_call.completion.json"), recorded(b, "tool_stream.openai.sse")
	oa := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		if strings.Contains(string(raw), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			_, _ = io.WriteString(w, chatSSE)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, chatJSON)
	}))
	b.Cleanup(oa.Close)
	g, fake := newAnthropicGatewayWith(b, "  - {name: oa, type: openai, base_url: "+oa.URL+"/v1, max_retries: 0, models: [\"gpt-*\"]}\n")
	msgJSON, msgSSE := recorded(b, "tool_call.answer.json"), recorded(b, "tool_stream.anthropic.sse")
	fake.set(func(req map[string]any) (int, string, string) {
		if req["stream"] == true {
			return 200, "text/event-stream", msgSSE
		}
		return 200, "application/json", msgJSON
	})
	fake.keep = false
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}
	for _, c := range []struct {
		name, model string
		stream      bool
		want        string
	}{
		{"json/openai-upstream", "gpt-4o", false, "get_weather"},
		{"json/anthropic-upstream", "claude-3-7-sonnet-latest", false, "get_weather"},
		{"sse/openai-upstream", "gpt-4o", true, "[DONE]"},
		{"sse/anthropic-upstream", "claude-3-7-sonnet-latest", true, "[DONE]"},
	} {
		body := `{"model":"` + c.model + `","messages":[{"role":"user","content":"What's the weather in San Francisco? Use fahrenheit."}],"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object"}}}]` +
			map[bool]string{true: `,"stream":true}`, false: `}`}[c.stream]
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					req, _ := http.NewRequest(http.MethodPost, g.srv.URL+"/v1/chat/completions", strings.NewReader(body))
					req.Header.Set("Authorization", "Bearer tok-coder")
					resp, err := client.Do(req)
					if err != nil {
						b.Error(err)
						return
					}
					got, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 || !strings.Contains(string(got), c.want) {
						b.Errorf("status %d: %.300s", resp.StatusCode, got)
						return
					}
				}
			})
		})
	}
}

// With prompt_cache, the protocol prompt the gateway injects goes to
// Anthropic as a system block marked for the prompt cache; the cache reads
// Anthropic reports reach the agent as cached_tokens and are priced at the
// cached-input price.
func TestAnthropicUpstreamPromptCache(t *testing.T) {
	g, fake := newAnthropicGatewayOpts(t, ", prompt_cache: true", "")
	sacp := `{"thought":"cached","status":"success","message":"ok","data":{}}`
	fake.set(func(map[string]any) (int, string, string) {
		b, _ := json.Marshal(map[string]any{"id": "msg_c", "type": "message", "role": "assistant", "model": "claude-3-7-sonnet-20250219",
			"content": []any{map[string]any{"type": "text", "text": sacp}}, "stop_reason": "end_turn",
			"usage": map[string]any{"input_tokens": 10, "cache_read_input_tokens": 1000, "cache_creation_input_tokens": 0, "output_tokens": 20}})
		return 200, "application/json", string(b)
	})
	sc := openai.NewClient(option.WithBaseURL(g.srv.URL+"/v1"), option.WithAPIKey("tok-sacp"), option.WithMaxRetries(0))
	c, err := sc.Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{Model: "claude-3-7-sonnet-latest",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}})
	if err != nil {
		t.Fatal(err)
	}
	if c.Usage.PromptTokens != 1010 || c.Usage.PromptTokensDetails.CachedTokens != 1000 {
		t.Errorf("usage %+v, want 1010 prompt tokens of which 1000 cached", c.Usage)
	}
	reqs := fake.requests()
	system, _ := reqs[len(reqs)-1].body["system"].([]any)
	if len(system) != 1 {
		t.Fatalf("system %v, want one cached block", reqs[len(reqs)-1].body["system"])
	}
	block := system[0].(map[string]any)
	if cc, _ := block["cache_control"].(map[string]any); cc["type"] != "ephemeral" || !strings.Contains(block["text"].(string), "SYSTEM PROTOCOL") {
		t.Errorf("system block %v, want the protocol prompt with cache_control ephemeral", block)
	}
	var cost map[string]any
	for _, e := range g.entries(audit.KindLLMResponse) {
		cost, _ = summaryOf(e)["cost"].(map[string]any)
	}
	// 10 input at $3, 1000 cached at $0.30, 20 output at $15 per million.
	if cost == nil || cost["micro_usd"] != float64(630) {
		t.Errorf("cost %v, want 630 micro-USD", cost)
	}
}
