package app

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/openai/openai-go"
	"github.com/openai/openai-go/option"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
)

// azureOptions are, option for option, what openai-go's
// azure.WithEndpoint(endpoint, apiVersion) and azure.WithAPIKey(key) set
// (openai-go v1.12.0, azure/azure.go): base URL endpoint/openai/, the
// api-version query parameter on every call, a middleware moving the
// body's model into the path as the deployment, and the key in an api-key
// header. The azure package itself imports the Azure SDK's azcore, a
// module this repository does not require, so its options are restated
// here rather than imported; with azcore in go.mod this function becomes
// the package's two calls, and nothing else in the test changes.
func azureOptions(endpoint, apiVersion, key string) []option.RequestOption {
	if !strings.HasSuffix(endpoint, "/") {
		endpoint += "/"
	}
	// getJSONRoute's routes: the body's model names the deployment.
	jsonRoutes := map[string]bool{"/openai/completions": true, "/openai/chat/completions": true, "/openai/embeddings": true}
	return []option.RequestOption{
		option.WithQueryAdd("api-version", apiVersion),
		option.WithBaseURL(endpoint + "openai/"),
		option.WithMiddleware(func(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
			if !jsonRoutes[r.URL.Path] {
				return next(r)
			}
			b, err := io.ReadAll(r.Body)
			if err != nil {
				return nil, err
			}
			r.Body = io.NopCloser(bytes.NewReader(b))
			var v *struct {
				Model string `json:"model"`
			}
			if err := json.Unmarshal(b, &v); err != nil {
				return nil, err
			}
			r.URL.Path = strings.Replace(r.URL.Path, "/openai/", "/openai/deployments/"+url.PathEscape(v.Model)+"/", 1)
			return next(r)
		}),
		option.WithHeader("Api-Key", key),
	}
}

// azureProvider is an OpenAI-compatible provider: chat completions (a
// JSON answer, or a stream with usage when asked) echoing the last user
// message, and embeddings. It records what it was sent.
type azureProvider struct {
	srv *httptest.Server
	mu  sync.Mutex
	got []*http.Request
}

func newAzureProvider(t *testing.T) *azureProvider {
	p := &azureProvider{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.mu.Lock()
		p.got = append(p.got, r.Clone(context.Background()))
		p.mu.Unlock()
		var req struct {
			Model    string `json:"model"`
			Stream   bool   `json:"stream"`
			Messages []struct {
				Role    string `json:"role"`
				Content string `json:"content"`
			} `json:"messages"`
			StreamOptions struct {
				IncludeUsage bool `json:"include_usage"`
			} `json:"stream_options"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		switch r.URL.Path {
		case "/v1/embeddings":
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.25,-0.5]}],"model":%q,"usage":{"prompt_tokens":2,"total_tokens":2}}`, req.Model)
			return
		case "/v1/chat/completions":
		default:
			http.NotFound(w, r)
			return
		}
		text := "echo: " + req.Messages[len(req.Messages)-1].Content
		if !req.Stream {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"id":"chatcmpl-az","object":"chat.completion","created":1,"model":%q,"choices":[{"index":0,"message":{"role":"assistant","content":%q},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":4,"total_tokens":9}}`, req.Model, text)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		for _, part := range []string{text[:6], text[6:]} {
			fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-az\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", req.Model, part)
			w.(http.Flusher).Flush()
		}
		fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-az\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\n", req.Model)
		if req.StreamOptions.IncludeUsage {
			fmt.Fprintf(w, "data: {\"id\":\"chatcmpl-az\",\"object\":\"chat.completion.chunk\",\"created\":1,\"model\":%q,\"choices\":[],\"usage\":{\"prompt_tokens\":5,\"completion_tokens\":4,\"total_tokens\":9}}\n\n", req.Model)
		}
		fmt.Fprint(w, "data: [DONE]\n\n")
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// calls returns what the provider was sent so far.
func (p *azureProvider) calls() []*http.Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]*http.Request(nil), p.got...)
}

// newAzureGateway is the whole gateway, built by Build from config files
// as the command builds it, in front of the provider p, serving one agent
// (token "tok-azure_agent") that may use two models.
func newAzureGateway(t *testing.T, p *azureProvider) *a2a {
	t.Helper()
	dir := t.TempDir()
	auditDir := filepath.Join(dir, "audit")
	gw := `listen: "127.0.0.1:0"
upstreams:
  - {name: provider, type: openai, base_url: ` + p.srv.URL + `/v1, api_key: sk-provider, max_retries: 0, models: ["*"]}
policy:
  dir: ` + policyDir(a2aOpts{}) + `
audit:
  dir: ` + auditDir + `
  chain: azure
  fail_mode: closed
`
	agents := `agents:
  azure_agent:
    type: coder
    token_sha256: "` + roster.HashTokenHex("tok-azure_agent") + `"
    models: ["gpt-4o-mini", "text-embedding-3-small"]
    token_limit: 100000/hour
`
	return serveApp(t, dir, auditDir, map[string]string{
		config.GatewayFile:  gw,
		config.AgentsFile:   agents,
		config.ProtocolFile: "protocol: {}\n",
	})
}

// TestAzureOpenAIClient: an agent built on openai-go with the Azure
// options (endpoint = the gateway, API key = its gateway token) calls
// /openai/deployments/{deployment}/... with api-version and api-key, and
// gets the whole governance of the /v1 routes from an OpenAI-compatible
// provider: an answer, a stream and embeddings, on the audit trail under
// its agent and the deployment's model; refusals in OpenAI's error shape.
// Azure's v1 API (/openai/v1, model in the body) works with the plain
// client too.
func TestAzureOpenAIClient(t *testing.T) {
	// The client would add OPENAI_API_KEY's value as a bearer token, a
	// second credential; this test is about the api-key header alone.
	if _, ok := os.LookupEnv("OPENAI_API_KEY"); ok {
		t.Setenv("OPENAI_API_KEY", "")
		os.Unsetenv("OPENAI_API_KEY")
	}
	p := newAzureProvider(t)
	g := newAzureGateway(t, p)
	ctx := context.Background()
	client := func(key string) openai.Client {
		return openai.NewClient(append(azureOptions(g.srv.URL, "2024-10-21", key), option.WithMaxRetries(0))...)
	}
	az := client("tok-azure_agent")
	params := openai.ChatCompletionNewParams{
		Model:    "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You are terse."), openai.UserMessage("Hello from Azure")},
	}

	cc, err := az.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if len(cc.Choices) != 1 || cc.Choices[0].Message.Content != "echo: Hello from Azure" || cc.Usage.TotalTokens != 9 {
		t.Fatalf("completion %+v", cc)
	}

	stream := az.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		acc.AddChunk(stream.Current())
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) != 1 || acc.Choices[0].Message.Content != "echo: Hello from Azure" || acc.Choices[0].FinishReason != "stop" {
		t.Errorf("stream accumulated %+v", acc.ChatCompletion)
	}

	emb, err := az.Embeddings.New(ctx, openai.EmbeddingNewParams{Model: "text-embedding-3-small",
		Input: openai.EmbeddingNewParamsInputUnion{OfString: openai.String("hello")}})
	if err != nil {
		t.Fatal(err)
	}
	if len(emb.Data) != 1 || len(emb.Data[0].Embedding) != 2 || emb.Data[0].Embedding[1] != -0.5 {
		t.Errorf("embeddings %+v", emb)
	}

	// The provider saw the gateway's calls on its own paths, with its own
	// key: not the agent's token, not the agent's api-version.
	calls := p.calls()
	if len(calls) != 3 {
		t.Fatalf("the provider got %d calls, want 3", len(calls))
	}
	for i, want := range []string{"/v1/chat/completions", "/v1/chat/completions", "/v1/embeddings"} {
		c := calls[i]
		if c.URL.Path != want || c.URL.RawQuery != "" || c.Header.Get("Authorization") != "Bearer sk-provider" || c.Header.Get("Api-Key") != "" {
			t.Errorf("call %d: %s, Authorization %q, api-key %q", i, c.URL, c.Header.Get("Authorization"), c.Header.Get("Api-Key"))
		}
	}

	// A deployment's body without a model (LangChain, raw HTTP) gets the
	// deployment's, as Azure reads it.
	var raw openai.ChatCompletion
	if err := az.Post(ctx, "deployments/gpt-4o-mini/chat/completions",
		map[string]any{"messages": []map[string]string{{"role": "user", "content": "no model"}}}, &raw); err != nil {
		t.Fatal(err)
	}
	if len(raw.Choices) != 1 || raw.Choices[0].Message.Content != "echo: no model" {
		t.Errorf("completion without a model %+v", raw)
	}

	// Refusals, each in OpenAI's error shape with its status.
	wrong := client("tok-wrong")
	refusals := []struct {
		name   string
		call   func() error
		status int
		says   []string
	}{
		{"no api-version", func() error {
			_, err := az.Chat.Completions.New(ctx, params, option.WithQueryDel("api-version"))
			return err
		}, http.StatusBadRequest, []string{"api-version"}},
		{"a wrong token", func() error {
			_, err := wrong.Chat.Completions.New(ctx, params)
			return err
		}, http.StatusUnauthorized, []string{"Incorrect API key"}},
		{"a body model that is not the deployment", func() error {
			// As Python's AzureOpenAI(azure_deployment=...) sends it: the
			// path from the client, the model from the call.
			return az.Post(ctx, "deployments/gpt-4o-mini/chat/completions",
				map[string]any{"model": "gpt-4o", "messages": []map[string]string{{"role": "user", "content": "hi"}}}, nil)
		}, http.StatusBadRequest, []string{`"gpt-4o"`, `"gpt-4o-mini"`}},
		{"a deployment the agent may not use", func() error {
			p := params
			p.Model = "gpt-4o"
			_, err := az.Chat.Completions.New(ctx, p)
			return err
		}, http.StatusNotFound, []string{"gpt-4o"}},
	}
	for _, c := range refusals {
		t.Run(c.name, func(t *testing.T) {
			var apiErr *openai.Error
			err := c.call()
			if !errors.As(err, &apiErr) || apiErr.StatusCode != c.status {
				t.Fatalf("%v, want an OpenAI error with status %d", err, c.status)
			}
			for _, s := range c.says {
				if !strings.Contains(apiErr.Message, s) {
					t.Errorf("message %q does not say %s", apiErr.Message, s)
				}
			}
		})
	}
	if n := len(p.calls()); n != 4 {
		t.Errorf("the provider got %d calls, want 4 (no refusal reaches it)", n)
	}

	// Azure's v1 API: the plain client at .../openai/v1, model in the body.
	v1 := openai.NewClient(option.WithBaseURL(g.srv.URL+"/openai/v1"), option.WithAPIKey("tok-azure_agent"), option.WithMaxRetries(0))
	if cc, err := v1.Chat.Completions.New(ctx, params); err != nil || len(cc.Choices) != 1 || cc.Choices[0].Message.Content != "echo: Hello from Azure" {
		t.Errorf("v1 chat: %v %+v", err, cc)
	}
	if c := p.calls(); c[len(c)-1].URL.Path != "/v1/chat/completions" {
		t.Errorf("v1 chat reached the provider at %s", c[len(c)-1].URL)
	}
	models, err := v1.Models.List(ctx)
	if err != nil || len(models.Data) != 2 {
		t.Errorf("v1 models: %v %+v", err, models)
	}

	// On the trail: the agent and the deployment's model, as chat.
	byModel := map[string]int{}
	for _, e := range g.entries(audit.KindLLMResponse) {
		s := summaryOf(e)
		if e.AgentID != "azure_agent" || s["dialect"] != nil || s["status"] != float64(http.StatusOK) {
			t.Errorf("llm.response entry: agent %q, summary %v", e.AgentID, s)
		}
		byModel[str(s["model"])]++
	}
	if byModel["gpt-4o-mini"] != 4 || byModel["text-embedding-3-small"] != 1 {
		t.Errorf("llm.response entries by model %v, want 4 chat (JSON, stream, no model, v1) and 1 embeddings", byModel)
	}
	refused := 0
	for _, e := range g.entries(audit.KindLLMRequest) {
		if s := summaryOf(e); s["status"] == float64(http.StatusBadRequest) && e.AgentID == "azure_agent" && s["model"] == "gpt-4o-mini" {
			refused++
		}
	}
	if refused != 2 {
		t.Errorf("%d refused llm.request entries of azure_agent for gpt-4o-mini, want 2 (no api-version, another model)", refused)
	}
}
