package proxy_test

import (
	"encoding/json"
	"github.com/sacpgw/gateway/internal/testkit"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/scope"
)

// The Azure OpenAI deployments routes drive the chat and embeddings chains
// through the engine of engine_test.go: what reaches the provider, and
// every refusal, in OpenAI's error shape.

// azureDo sends one request to h at target (path and query) with the
// given headers, as the server would (an Exchange on the context).
func azureDo(t *testing.T, h http.Handler, target string, header map[string][]string, body string) (*httptest.ResponseRecorder, *scope.Exchange) {
	t.Helper()
	r := httptest.NewRequest(http.MethodPost, target, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	for k, vs := range header {
		for _, v := range vs {
			r.Header.Add(k, v)
		}
	}
	ex := &scope.Exchange{RequestID: "req-azure", Start: time.Now()}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, scope.Attach(r, ex))
	return w, ex
}

type azureAPIError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Code    string  `json:"code"`
		Param   *string `json:"param"`
	} `json:"error"`
}

func apiKey(tok string) map[string][]string { return map[string][]string{"Api-Key": {tok}} }

// TestAzureDeploymentsChat: the deployment in the path is the model; the
// body reaches the provider as sent when it names the deployment, with the
// deployment added when it names none, always on the provider's own chat
// path without the agent's query; everything else is refused with a 400
// naming what is wrong, before any provider call.
func TestAzureDeploymentsChat(t *testing.T) {
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	const dep = "/openai/deployments/gpt-4o-mini/chat/completions"
	const q = "?api-version=2024-10-21"
	cases := []struct {
		name   string
		target string
		header map[string][]string // default: api-key tok-plain
		body   string
		status int
		// sent is the body the provider must receive (status 200).
		sent string
		// param and msg: the 400's param and words of its message.
		param string
		msg   []string
	}{
		{name: "no model: the deployment's is added first", target: dep + q, body: `{` + msgs + `}`,
			status: 200, sent: `{"model":"gpt-4o-mini",` + msgs + `}`},
		{name: "no model, spaces kept", target: dep + q, body: " {\n " + msgs + " }\n",
			status: 200, sent: " {\"model\":\"gpt-4o-mini\",\n " + msgs + " }\n"},
		{name: "the deployment's model: the bytes as sent", target: dep + q, body: `{` + msgs + `,"model":"gpt-4o-mini"}`,
			status: 200, sent: `{` + msgs + `,"model":"gpt-4o-mini"}`},
		{name: "a preview version", target: dep + "?api-version=2025-04-01-preview", body: `{` + msgs + `}`,
			status: 200, sent: `{"model":"gpt-4o-mini",` + msgs + `}`},
		{name: "an escaped deployment, unescaped once", target: "/openai/deployments/gpt%2D4o%2Dmini/chat/completions" + q, body: `{` + msgs + `}`,
			status: 200, sent: `{"model":"gpt-4o-mini",` + msgs + `}`},
		{name: "a bearer token instead of api-key", target: dep + q, header: map[string][]string{"Authorization": {"Bearer tok-plain"}},
			body: `{` + msgs + `}`, status: 200, sent: `{"model":"gpt-4o-mini",` + msgs + `}`},

		{name: "another model in the body", target: dep + q, body: `{"model":"gpt-4o",` + msgs + `}`,
			status: 400, param: "model", msg: []string{`"gpt-4o"`, `"gpt-4o-mini"`}},
		{name: "another model, its name escaped", target: dep + q, body: `{"mod\u0065l":"gpt-4o",` + msgs + `}`,
			status: 400, param: "model", msg: []string{`"gpt-4o"`, `"gpt-4o-mini"`}},
		{name: "an empty model", target: dep + q, body: `{"model":"",` + msgs + `}`,
			status: 400, param: "model", msg: []string{`""`, `"gpt-4o-mini"`}},
		{name: "a model that is not a string", target: dep + q, body: `{"model":null,` + msgs + `}`,
			status: 400, param: "model", msg: []string{"string"}},
		{name: "the deployment's model twice", target: dep + q, body: `{"model":"gpt-4o-mini","model":"gpt-4o-mini",` + msgs + `}`,
			status: 400, msg: []string{"duplicate"}},
		{name: "a case variant of model", target: dep + q, body: `{"Model":"gpt-4o",` + msgs + `}`,
			status: 400, msg: []string{"Model"}},
		{name: "something after the object", target: dep + q, body: `{` + msgs + `} {}`,
			status: 400},
		{name: "not an object", target: dep + q, body: `[{"role":"user","content":"hi"}]`,
			status: 400},
		{name: "an escaped slash in the deployment: one name", target: "/openai/deployments/org%2Fmodel-1/chat/completions" + q, body: `{` + msgs + `}`,
			status: 404, param: "model", msg: []string{"`org/model-1`"}},
		{name: "a control character in the deployment", target: "/openai/deployments/gpt%0A4o/chat/completions" + q, body: `{` + msgs + `}`,
			status: 400, param: "deployment"},
		{name: "an empty body", target: dep + q, body: ``,
			status: 400, msg: []string{"empty"}},
		{name: "an object without messages", target: dep + q, body: `{}`,
			status: 400, param: "messages"},

		{name: "no api-version", target: dep, body: `{` + msgs + `}`,
			status: 400, param: "api-version", msg: []string{"api-version"}},
		{name: "api-version twice", target: dep + q + "&api-version=2024-10-21", body: `{` + msgs + `}`,
			status: 400, param: "api-version"},
		{name: "api-version not a date", target: dep + "?api-version=latest", body: `{` + msgs + `}`,
			status: 400, param: "api-version", msg: []string{"latest"}},
		{name: "api-version an impossible date", target: dep + "?api-version=2024-13-01", body: `{` + msgs + `}`,
			status: 400, param: "api-version"},
		{name: "api-version with another suffix", target: dep + "?api-version=2024-10-21-beta", body: `{` + msgs + `}`,
			status: 400, param: "api-version"},
		{name: "a case variant of api-version", target: dep + "?API-Version=2024-10-21", body: `{` + msgs + `}`,
			status: 400, param: "API-Version"},
		{name: "an unknown query parameter", target: dep + q + "&deployment=gpt-4o", body: `{` + msgs + `}`,
			status: 400, param: "deployment"},
	}
	e := newEngine(t, jsonAnswer("ok"), engineOpts{})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e.mu.Lock()
			e.seen, e.body = nil, ""
			e.mu.Unlock()
			h := c.header
			if h == nil {
				h = apiKey("tok-plain")
			}
			w, ex := azureDo(t, e.gw.AzureChatCompletions(), c.target, h, c.body)
			if w.Code != c.status {
				t.Fatalf("status %d, want %d: %s", w.Code, c.status, w.Body)
			}
			seen, sent := e.upstreamSaw()
			if c.status != http.StatusOK {
				if seen != nil {
					t.Errorf("the provider was called with %s", sent)
				}
				var ae azureAPIError
				if err := json.Unmarshal(w.Body.Bytes(), &ae); err != nil || ae.Error.Type != "invalid_request_error" {
					t.Fatalf("error body %s (%v): want OpenAI's shape", w.Body, err)
				}
				if c.param != "" && (ae.Error.Param == nil || *ae.Error.Param != c.param) {
					t.Errorf("param %v, want %q (%s)", ae.Error.Param, c.param, ae.Error.Message)
				}
				for _, m := range c.msg {
					if !strings.Contains(ae.Error.Message, m) {
						t.Errorf("message %q does not say %s", ae.Error.Message, m)
					}
				}
				return
			}
			if seen == nil {
				t.Fatal("the provider was not called")
			}
			if seen.URL.Path != "/v1/chat/completions" || seen.URL.RawQuery != "" {
				t.Errorf("the provider was called at %s, want its chat path without the agent's query", seen.URL)
			}
			if seen.Header.Get("Api-Key") != "" || seen.Header.Get("Authorization") != "Bearer sk-provider" {
				t.Errorf("the provider saw api-key %q, Authorization %q: want the provider's key only", seen.Header.Get("Api-Key"), seen.Header.Get("Authorization"))
			}
			if sent != c.sent {
				t.Errorf("the provider got %q, want %q", sent, c.sent)
			}
			if ex.Agent == nil || ex.Agent.ID != "plain" || ex.Dialect != "" {
				t.Errorf("exchange agent %v, dialect %q: want plain, the chat dialect", ex.Agent, ex.Dialect)
			}
		})
	}
}

// TestAzureRunsTheChatStages: an Azure call is governed as a /v1 call is,
// by the same stages: the agent's model allow-list, its rate limit (one
// budget for both routes), redaction of the answer and the stream, the
// chat policy with input.dialect "chat", and the audit entries naming the
// agent and the deployment's model. A refusal of the Azure framing is
// audited too, after identify; a wrong key is a 401 before it.
func TestAzureRunsTheChatStages(t *testing.T) {
	const body = `{"messages":[{"role":"user","content":"hi"}]}`
	const q = "?api-version=2024-10-21"

	e := newEngine(t, jsonAnswer("mail bob@example.com"), engineOpts{})
	w, _ := azureDo(t, e.gw.AzureChatCompletions(), "/openai/deployments/gpt-4o-mini/chat/completions"+q, apiKey("tok-plain"), body)
	if w.Code != http.StatusOK || strings.Contains(w.Body.String(), "bob@example.com") || !strings.Contains(w.Body.String(), "[REDACTED:email]") {
		t.Fatalf("%d %s: want the answer redacted", w.Code, w.Body)
	}
	recs := e.audit.Records()
	if len(recs) != 2 || recs[0].Kind != "llm.request" || recs[1].Kind != "llm.response" {
		t.Fatalf("audit %v", e.audit.Kinds())
	}
	for _, r := range recs {
		if r.AgentID != "plain" || testkit.SummaryOf(r)["model"] != "gpt-4o-mini" || testkit.SummaryOf(r)["dialect"] != nil {
			t.Errorf("%s entry: agent %q, summary %v", r.Kind, r.AgentID, testkit.SummaryOf(r))
		}
	}
	checks, _ := testkit.SummaryOf(recs[1])["checks"].(map[string]any)
	if pol, _ := checks["policy"].(map[string]any); pol["verdict"] != "allow" {
		t.Errorf("policy check %v: the chat policy did not run", checks["policy"])
	}

	// The allow-list: only_mini may not use gpt-4o, whatever the door.
	w, _ = azureDo(t, e.gw.AzureChatCompletions(), "/openai/deployments/gpt-4o/chat/completions"+q, apiKey("tok-only_mini"), body)
	if w.Code != http.StatusNotFound || !strings.Contains(w.Body.String(), "model_not_found") {
		t.Errorf("a forbidden deployment: %d %s, want 404 model_not_found", w.Code, w.Body)
	}

	// A wrong key is refused before the framing is looked at.
	n := len(e.audit.ByKind("auth.failure"))
	w, _ = azureDo(t, e.gw.AzureChatCompletions(), "/openai/deployments/gpt-4o-mini/chat/completions", apiKey("tok-wrong"), body)
	if w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), "invalid_api_key") {
		t.Errorf("a wrong key: %d %s, want 401", w.Code, w.Body)
	}
	if len(e.audit.ByKind("auth.failure")) != n+1 {
		t.Errorf("the wrong key left no auth.failure entry (kinds %v)", e.audit.Kinds())
	}
	// A refused framing is on the trail with the agent and the model.
	w, _ = azureDo(t, e.gw.AzureChatCompletions(), "/openai/deployments/gpt-4o-mini/chat/completions", apiKey("tok-plain"), body)
	last := e.audit.Records()[len(e.audit.Records())-1]
	if w.Code != http.StatusBadRequest || last.Kind != "llm.request" || last.AgentID != "plain" || testkit.SummaryOf(last)["model"] != "gpt-4o-mini" ||
		testkit.SummaryOf(last)["status"] != http.StatusBadRequest || testkit.SummaryOf(last)["route"] != "/openai/deployments/gpt-4o-mini/chat/completions" {
		t.Errorf("no api-version: %d; last entry %s %q %v", w.Code, last.Kind, last.AgentID, testkit.SummaryOf(last))
	}

	// One rate for both doors: tiny's one request an hour, spent on /v1.
	w, _ = azureDo(t, e.gw.ChatCompletions(), "/v1/chat/completions", apiKey("tok-tiny"), `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
	if w.Code != http.StatusOK {
		t.Fatalf("tiny's first call: %d %s", w.Code, w.Body)
	}
	w, _ = azureDo(t, e.gw.AzureChatCompletions(), "/openai/deployments/gpt-4o-mini/chat/completions"+q, apiKey("tok-tiny"), body)
	if w.Code != http.StatusTooManyRequests {
		t.Errorf("tiny's second call, at the Azure door: %d %s, want 429", w.Code, w.Body)
	}

	// A stream: redacted across chunks, ending as OpenAI's does.
	s := newEngine(t, streamAnswer("Hello ", "bob@exa", "mple.com", "!"), engineOpts{})
	w, ex := azureDo(t, s.gw.AzureChatCompletions(), "/openai/deployments/gpt-4o-mini/chat/completions"+q, apiKey("tok-plain"),
		`{"stream":true,"messages":[{"role":"user","content":"hi"}]}`)
	if w.Code != http.StatusOK || w.Header().Get("Content-Type") != "text/event-stream" || !ex.Stream ||
		strings.Contains(w.Body.String(), "bob@exa") || !strings.Contains(w.Body.String(), "[REDACTED:email]") || !strings.HasSuffix(w.Body.String(), "data: [DONE]\n\n") {
		t.Errorf("stream %d %v %q", w.Code, w.Header(), w.Body)
	}
}

// TestAzureEmbeddings: the embeddings deployment route is the embeddings
// chain, the deployment added as the model.
func TestAzureEmbeddings(t *testing.T) {
	e := newEngine(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"model":"e","usage":{"prompt_tokens":3,"total_tokens":3}}`)
	}, engineOpts{})
	w, ex := azureDo(t, e.gw.AzureEmbeddings(), "/openai/deployments/text-embedding-3-small/embeddings?api-version=2024-10-21", apiKey("tok-plain"), `{"input":"hello"}`)
	if w.Code != http.StatusOK || !strings.Contains(w.Body.String(), `"embedding":[0.1,0.2]`) || ex.Usage.TotalTokens != 3 {
		t.Fatalf("%d %s %+v", w.Code, w.Body, ex.Usage)
	}
	seen, sent := e.upstreamSaw()
	if seen.URL.Path != "/v1/embeddings" || seen.URL.RawQuery != "" || sent != `{"model":"text-embedding-3-small","input":"hello"}` {
		t.Errorf("the provider got %s %s", seen.URL, sent)
	}
	if got := e.audit.Last("llm.response"); got["model"] != "text-embedding-3-small" {
		t.Errorf("audit %v", got)
	}
	// The embeddings reading applies: input is required.
	w, _ = azureDo(t, e.gw.AzureEmbeddings(), "/openai/deployments/text-embedding-3-small/embeddings?api-version=2024-10-21", apiKey("tok-plain"), `{}`)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "input") {
		t.Errorf("no input: %d %s", w.Code, w.Body)
	}
}

// TestAzureV1: Azure's v1 API is the /v1 API under /openai: the provider
// is called on its own paths.
func TestAzureV1(t *testing.T) {
	e := newEngine(t, jsonAnswer("ok"), engineOpts{})
	w, _ := azureDo(t, e.gw.AzureV1ChatCompletions(), "/openai/v1/chat/completions?api-version=preview", apiKey("tok-plain"),
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`)
	if w.Code != http.StatusOK {
		t.Fatalf("%d %s", w.Code, w.Body)
	}
	if seen, _ := e.upstreamSaw(); seen.URL.Path != "/v1/chat/completions" || seen.URL.RawQuery != "" {
		t.Errorf("the provider was called at %s", seen.URL)
	}
	w, _ = azureDo(t, e.gw.AzureV1Embeddings(), "/openai/v1/embeddings", apiKey("tok-plain"), `{"model":"e","input":"hello"}`)
	if seen, _ := e.upstreamSaw(); seen.URL.Path != "/v1/embeddings" {
		t.Errorf("embeddings: %d; the provider was called at %s", w.Code, seen.URL)
	}
	// The model is the body's, as on /v1: none is a 400.
	w, _ = azureDo(t, e.gw.AzureV1ChatCompletions(), "/openai/v1/chat/completions", apiKey("tok-plain"), `{"messages":[{"role":"user","content":"hi"}]}`)
	if w.Code != http.StatusBadRequest || !strings.Contains(w.Body.String(), "model") {
		t.Errorf("no model: %d %s", w.Code, w.Body)
	}
}

// TestCredentialHeaders: the gateway token may come in Authorization
// (Bearer), api-key or x-api-key, on every route; every value of the three
// is read, and two different tokens, or a malformed value beside a good
// one, are refused rather than one of them chosen.
func TestCredentialHeaders(t *testing.T) {
	cases := []struct {
		name   string
		header map[string][]string
		want   int
	}{
		{"bearer", map[string][]string{"Authorization": {"Bearer tok-plain"}}, 200},
		{"api-key", map[string][]string{"Api-Key": {"tok-plain"}}, 200},
		{"x-api-key", map[string][]string{"X-Api-Key": {"tok-plain"}}, 200},
		{"the same token in two headers", map[string][]string{"Authorization": {"Bearer tok-plain"}, "Api-Key": {"tok-plain"}}, 200},
		{"none", map[string][]string{}, 401},
		{"a wrong api-key", map[string][]string{"Api-Key": {"tok-nobody"}}, 401},
		{"bearer and a different api-key", map[string][]string{"Authorization": {"Bearer tok-plain"}, "Api-Key": {"tok-tiny"}}, 401},
		{"a good api-key and a wrong x-api-key", map[string][]string{"Api-Key": {"tok-plain"}, "X-Api-Key": {"tok-nobody"}}, 401},
		{"two api-key values", map[string][]string{"Api-Key": {"tok-plain", "tok-tiny"}}, 401},
		{"two Authorization values", map[string][]string{"Authorization": {"Bearer tok-plain", "Bearer tok-tiny"}}, 401},
		{"a malformed Authorization beside a good api-key", map[string][]string{"Authorization": {"Basic dG9rLXBsYWlu"}, "Api-Key": {"tok-plain"}}, 401},
		{"a blank api-key beside a good bearer", map[string][]string{"Authorization": {"Bearer tok-plain"}, "Api-Key": {"  "}}, 401},
	}
	e := newEngine(t, jsonAnswer("ok"), engineOpts{})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, door := range []struct {
				h      http.Handler
				target string
				body   string
			}{
				{e.gw.ChatCompletions(), "/v1/chat/completions", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}]}`},
				{e.gw.AzureChatCompletions(), "/openai/deployments/gpt-4o-mini/chat/completions?api-version=2024-10-21", `{"messages":[{"role":"user","content":"hi"}]}`},
			} {
				w, ex := azureDo(t, door.h, door.target, c.header, door.body)
				if w.Code != c.want {
					t.Fatalf("%s: %d %s, want %d", door.target, w.Code, w.Body, c.want)
				}
				if c.want == http.StatusOK && ex.Agent.ID != "plain" {
					t.Errorf("%s: identified %s", door.target, ex.Agent.ID)
				}
				if c.want == http.StatusUnauthorized && !strings.Contains(w.Body.String(), `"type":"authentication_error"`) {
					t.Errorf("%s: %s, want OpenAI's authentication_error", door.target, w.Body)
				}
			}
		})
	}
}
