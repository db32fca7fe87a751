package app

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go"
	"github.com/openai/openai-go/option"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
)

// openAIWithUsage is a provider in OpenAI's form that reports usage as
// OpenAI does (in a stream only when asked, in a last chunk without
// choices, the other chunks then carrying "usage": null), and lies about it (a negative prompt count) when the prompt
// says "lie".
func openAIWithUsage(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Stream        bool `json:"stream"`
			StreamOptions *struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		u := `{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}`
		if len(req.Messages) > 0 && strings.Contains(req.Messages[len(req.Messages)-1].Content, "lie") {
			u = `{"prompt_tokens":-100000,"completion_tokens":7,"total_tokens":-99993}`
		}
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			_, _ = fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":%s}`, u)
			return
		}
		asked := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
		null := ""
		if asked {
			null = `,"usage":null`
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, c := range []string{`{"index":0,"delta":{"role":"assistant","content":"o"},"finish_reason":null}`, `{"index":0,"delta":{"content":"k"},"finish_reason":"stop"}`} {
			_, _ = fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[%s]%s}\n\n", c, null)
		}
		if asked {
			_, _ = fmt.Fprintf(w, "data: {\"id\":\"c1\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":\"gpt-4o-mini\",\"choices\":[],\"usage\":%s}\n\n", u)
		}
		_, _ = io.WriteString(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(srv.Close)
	return srv
}

// The books end to end, with the official OpenAI client: an agent without
// a budget streams and is priced (the audit entry, the spend metric, the
// operator page), the usage chunk reaches only a client that asked for
// it, and an answer whose usage is a lie is delivered and counted as of
// unknown cost. The operator page shows the sub-cent spend, and its
// figures are the audit trail's.
func TestBooksEndToEnd(t *testing.T) {
	dir := t.TempDir()
	up := openAIWithUsage(t)
	g := serveApp(t, dir, filepath.Join(dir, "audit"), map[string]string{
		config.GatewayFile: `listen: "127.0.0.1:0"
admin:
  token_sha256: "` + roster.HashTokenHex("tok-admin") + `"
upstreams:
  - {name: openai, type: openai, base_url: ` + up.URL + `/v1, api_key: sk-provider, max_retries: 0, models: ["gpt-*"]}
policy:
  dir: ` + policyDir(a2aOpts{}) + `
audit:
  dir: ` + filepath.Join(dir, "audit") + `
  chain: books
`,
		config.AgentsFile: `agents:
  free:
    type: code-generator
    token_sha256: "` + roster.HashTokenHex("tok-free") + `"
`,
		config.ProtocolFile: "protocol: {}\n",
	})
	ctx := context.Background()
	oc := openai.NewClient(option.WithBaseURL(g.srv.URL+"/v1"), option.WithAPIKey("tok-free"), option.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{Model: "gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}}

	stream := func(p openai.ChatCompletionNewParams) (content string, usageChunks int, u openai.CompletionUsage) {
		t.Helper()
		s := oc.Chat.Completions.NewStreaming(ctx, p)
		for s.Next() {
			c := s.Current()
			if !p.StreamOptions.IncludeUsage.Valid() && strings.Contains(c.RawJSON(), "usage") {
				t.Errorf("a client that did not ask got a usage member: %s", c.RawJSON())
			}
			if len(c.Choices) > 0 {
				content += c.Choices[0].Delta.Content
			}
			if c.JSON.Usage.Valid() {
				usageChunks++
				u = c.Usage
			}
		}
		if err := s.Err(); err != nil {
			t.Fatal(err)
		}
		return content, usageChunks, u
	}
	if content, n, _ := stream(params); content != "ok" || n != 0 {
		t.Errorf("a client that did not ask: content %q, %d usage chunks", content, n)
	}
	asked := params
	asked.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
	if content, n, u := stream(asked); content != "ok" || n != 1 || u.TotalTokens != 12 {
		t.Errorf("a client that asked: content %q, %d usage chunks, usage %+v", content, n, u)
	}
	lie := params
	lie.Messages = []openai.ChatCompletionMessageParamUnion{openai.UserMessage("lie about it")}
	c, err := oc.Chat.Completions.New(ctx, lie)
	if err != nil || c.Choices[0].Message.Content != "ok" {
		t.Fatalf("an answer with an unreadable usage was not delivered: %v %+v", err, c)
	}

	// The trail: 5 × 0.15 + 7 × 0.60 = 4.95 µ$ (rounded up to 5) for each
	// stream, the lie of unknown cost, and no negative tokens.
	var spent, unknown int
	var entries []audit.Entry
	for deadline := time.Now().Add(5 * time.Second); len(entries) < 3 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		entries = g.entries(audit.KindLLMResponse)
	}
	for _, e := range entries {
		s := summaryOf(e)
		cost, _ := s["cost"].(map[string]any)
		switch {
		case cost["priced"] == true:
			spent += int(cost["micro_usd"].(float64))
		case cost["reason"] == "unreadable_usage" && cost["usage_error"] == "prompt_tokens is negative" && s["tokens"] == nil:
			unknown++
		default:
			t.Errorf("llm.response summary %v", s)
		}
	}
	if len(entries) != 3 || spent != 10 || unknown != 1 {
		t.Fatalf("%d llm.response entries: %d µ$ priced, %d of unknown cost; want 3, 10 and 1", len(entries), spent, unknown)
	}

	res, err := http.Get(g.srv.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{`gateway_spend_usd_total{agent="free"} 1e-05`, `gateway_spend_unpriced_total{agent="free",reason="unreadable_usage"} 1`} {
		if !strings.Contains(string(metrics), want) {
			t.Errorf("/metrics lacks %s:\n%s", want, grepLines(string(metrics), "gateway_spend"))
		}
	}

	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar}
	res, err = browser.PostForm(g.srv.URL+"/review/login", url.Values{"token": {"tok-admin"}, "next": {"/review/ops"}})
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(res.Body)
	res.Body.Close()
	for _, want := range []string{"$0.00001", "1 call of unknown cost"} {
		if !strings.Contains(string(page), want) {
			t.Errorf("the operator page lacks %q", want)
		}
	}
}

// A stream from a native Anthropic upstream is priced for an agent without
// a budget too (the gateway asks for the usage chunk its translation
// writes), and a count Anthropic could not have meant (a negative output)
// is counted of unknown cost, the answer delivered.
func TestBooksAnthropicUpstreamStream(t *testing.T) {
	g, fake := newAnthropicGateway(t)
	oc := openai.NewClient(option.WithBaseURL(g.srv.URL+"/v1"), option.WithAPIKey("tok-coder"), option.WithMaxRetries(0))
	params := openai.ChatCompletionNewParams{Model: "claude-3-7-sonnet-latest", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("hello")}}
	for i, sse := range []string{recorded(t, "text_stream.anthropic.sse"),
		strings.Replace(recorded(t, "text_stream.anthropic.sse"), `"output_tokens":19`, `"output_tokens":-19000`, 1)} {
		fake.set(func(map[string]any) (int, string, string) { return 200, "text/event-stream", sse })
		s := oc.Chat.Completions.NewStreaming(context.Background(), params)
		var content string
		for s.Next() {
			c := s.Current()
			if c.JSON.Usage.Valid() {
				t.Errorf("stream %d: a client that did not ask got usage %+v", i, c.Usage)
			}
			if len(c.Choices) > 0 {
				content += c.Choices[0].Delta.Content
			}
		}
		if err := s.Err(); err != nil || content == "" {
			t.Fatalf("stream %d: %v, content %q", i, err, content)
		}
	}
	var costs []map[string]any
	for deadline := time.Now().Add(5 * time.Second); len(costs) < 2 && time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		costs = costs[:0]
		for _, e := range g.entries(audit.KindLLMResponse) {
			cost, _ := summaryOf(e)["cost"].(map[string]any)
			costs = append(costs, cost)
		}
	}
	// 509 input at $3 and 19 output at $15 per million.
	if len(costs) != 2 || costs[0]["micro_usd"] != float64(1812) ||
		costs[1]["reason"] != "unreadable_usage" || costs[1]["usage_error"] != "completion_tokens is negative" {
		t.Errorf("costs %v, want 1812 µ$ and unreadable_usage (completion_tokens is negative)", costs)
	}
}
