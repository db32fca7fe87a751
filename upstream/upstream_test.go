package upstream

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sacpgw/gateway/upstream/mock"
)

func TestConfigKnowsEveryType(t *testing.T) {
	var names []string
	for name := range constructors() {
		names = append(names, name)
	}
	slices.Sort(names)
	if !slices.Equal(names, Types()) {
		t.Fatalf("constructors %v != Types %v", names, Types())
	}
}

func TestRouteAndTarget(t *testing.T) {
	s, err := New([]Config{
		{Name: "local", Type: "openai", BaseURL: "http://vllm:8000/v1/", Models: []string{"llama-*"}},
		{Name: "azure", Type: "openai", BaseURL: "https://x.openai.azure.com/openai/v1", Models: []string{"gpt-4o", "*"}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	cases := map[string]string{"llama-3-70b": "local", "gpt-4o": "azure", "anything": "azure"}
	for model, want := range cases {
		if u := s.Route(model); u == nil || u.Name != want {
			t.Errorf("Route(%q) = %v, want %s", model, u, want)
		}
	}
	if got := s.Route("llama-3").Target("/v1/chat/completions", "").String(); got != "http://vllm:8000/v1/chat/completions" {
		t.Errorf("target = %s", got)
	}
	if got := s.Route("gpt-4o").Target("/v1/embeddings", "").String(); got != "https://x.openai.azure.com/openai/v1/embeddings" {
		t.Errorf("target = %s", got)
	}
	if m := s.Models(); len(m) != 1 || m[0].ID != "gpt-4o" {
		t.Errorf("literal models = %v", m)
	}
}

func TestMockIsDeterministicAndStreams(t *testing.T) {
	s, _ := New([]Config{{Name: "mock", Type: "mock", Models: []string{"*"}}}, nil)
	u := s.Route("mock-1")
	call := func(body string) (int, string) {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, u.Target("/v1/chat/completions", "").String(), strings.NewReader(body))
		resp, err := u.Transport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	body := `{"model":"mock-1","messages":[{"role":"user","content":"hi there"}]}`
	_, a := call(body)
	_, b := call(body)
	if a != b || !strings.Contains(a, "hi there") {
		t.Fatalf("not deterministic: %s vs %s", a, b)
	}
	_, sacp := call(`{"model":"mock-1","messages":[{"role":"system","content":"### SYSTEM PROTOCOL: RESPONSE FORMAT INSTRUCTIONS"},{"role":"user","content":"x"}]}`)
	var doc struct {
		Choices []struct{ Message struct{ Content string } }
	}
	_ = json.Unmarshal([]byte(sacp), &doc)
	var obj map[string]any
	if err := json.Unmarshal([]byte(doc.Choices[0].Message.Content), &obj); err != nil || obj["status"] != "success" {
		t.Errorf("protocol answer is not SACP: %s", sacp)
	}
	_, stream := call(`{"model":"mock-1","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"one two three four five"}]}`)
	if !strings.HasSuffix(stream, "data: [DONE]\n\n") || !strings.Contains(stream, `"usage"`) || strings.Count(stream, "data: ") < 5 {
		t.Errorf("stream = %s", stream)
	}
	if code, _ := call(`{`); code != 400 {
		t.Errorf("malformed body: %d", code)
	}
}

// A self-hosted model behind a private CA: trusted with ca_file, refused
// without it.
func TestUpstreamCustomCA(t *testing.T) {
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, `{"ok":true}`)
	}))
	defer srv.Close()
	caFile := filepath.Join(t.TempDir(), "ca.pem")
	pemBytes := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(caFile, pemBytes, 0o600); err != nil {
		t.Fatal(err)
	}
	call := func(ca string) error {
		s, err := New([]Config{{Name: "vllm", Type: "openai", BaseURL: srv.URL + "/v1", CAFile: ca, Models: []string{"*"}}}, nil)
		if err != nil {
			return err
		}
		defer s.Close()
		u := s.Route("m")
		req, _ := http.NewRequest(http.MethodGet, u.Target("/v1/models", "").String(), nil)
		resp, err := u.Transport.RoundTrip(req)
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	if err := call(caFile); err != nil {
		t.Fatalf("with ca_file: %v", err)
	}
	if err := call(""); err == nil {
		t.Fatal("a certificate from an unknown CA was trusted")
	}
}

// The mock's embeddings keep OpenAI's answer shape and put similar texts
// near each other, so that semantic registry selection can be tried with no
// provider.
func TestMockEmbeddings(t *testing.T) {
	s, _ := New([]Config{{Name: "mock", Type: "mock", Models: []string{"*"}}}, nil)
	u := s.Route("any-embedding-model")
	call := func(body string) (int, []byte) {
		t.Helper()
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, u.Target("/v1/embeddings", "").String(), strings.NewReader(body))
		resp, err := u.Transport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, b
	}
	type answer struct {
		Object string `json:"object"`
		Model  string `json:"model"`
		Data   []struct {
			Object    string    `json:"object"`
			Index     int       `json:"index"`
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
		Usage struct {
			PromptTokens int `json:"prompt_tokens"`
			TotalTokens  int `json:"total_tokens"`
		} `json:"usage"`
	}
	embed := func(body string) answer {
		t.Helper()
		code, b := call(body)
		var a answer
		if err := json.Unmarshal(b, &a); code != 200 || err != nil {
			t.Fatalf("%s: %d %s %v", body, code, b, err)
		}
		return a
	}

	a := embed(`{"model":"m","input":["hotel search in Paris","find hotels in paris","review code changes"]}`)
	if a.Object != "list" || a.Model != "m" || len(a.Data) != 3 || a.Usage.TotalTokens == 0 || a.Usage.PromptTokens != a.Usage.TotalTokens {
		t.Fatalf("answer shape: %+v", a)
	}
	for i, d := range a.Data {
		if d.Object != "embedding" || d.Index != i || len(d.Embedding) != mock.EmbeddingDim {
			t.Fatalf("data[%d]: %+v", i, d)
		}
		if n := dot(d.Embedding, d.Embedding); math.Abs(n-1) > 1e-4 {
			t.Errorf("data[%d] is not normalised: |v|² = %v", i, n)
		}
	}
	hotel, find, review := a.Data[0].Embedding, a.Data[1].Embedding, a.Data[2].Embedding
	if near, far := dot(hotel, find), dot(hotel, review); near <= far+0.2 {
		t.Errorf("cos(hotel search, find hotels) = %.3f, cos(hotel search, review code) = %.3f: want the first clearly larger", near, far)
	}

	// A string input is one text; the same text always gets the same vector.
	one := embed(`{"model":"other","input":"find hotels in paris"}`)
	if len(one.Data) != 1 || !slices.Equal(one.Data[0].Embedding, find) {
		t.Errorf("string input: %+v, want the vector of the same text in an array", one.Data)
	}
	if got := embed(`{"model":"m","input":"x","dimensions":8}`); len(got.Data[0].Embedding) != 8 {
		t.Errorf("dimensions 8: %d", len(got.Data[0].Embedding))
	}
	if got := mock.Embedding("find hotels in paris"); len(got) != mock.EmbeddingDim || math.Abs(dot(got, find)-1) > 1e-4 {
		t.Errorf("mock.Embedding differs from the mock's answer")
	}

	for _, body := range []string{`{`, `{"model":"m"}`, `{"model":"m","input":[1,2]}`, `{"model":"m","input":[]}`, `{"model":"m","input":{"a":1}}`, `{"model":"m","input":"x","dimensions":0}`} {
		if code, b := call(body); code != 400 || !strings.Contains(string(b), `"invalid_request_error"`) {
			t.Errorf("%s: %d %s, want 400", body, code, b)
		}
	}
}

func dot(a, b []float64) float64 {
	var s float64
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

// An Azure upstream with an api_version is asked at its deployments path
// with its key in api-key; an anthropic upstream's key goes as x-api-key;
// and Authorize removes every other credential header.
func TestTargetAndCredentialsPerType(t *testing.T) {
	s, err := New([]Config{
		{Name: "azure", Type: "openai", BaseURL: "https://x.openai.azure.com", APIKey: "az-key", Models: []string{"gpt-4o*"},
			Azure: &Azure{APIVersion: "2024-10-21", Deployments: map[string]string{"gpt-4o": "prod gpt4o"}}},
		{Name: "azure-v1", Type: "openai", BaseURL: "https://y.openai.azure.com/openai/v1", APIKey: "az1-key", Models: []string{"o3"}, Azure: &Azure{}},
		{Name: "claude", Type: "anthropic", BaseURL: "https://api.anthropic.com/v1", APIKey: "ant-key", Models: []string{"claude-*"}},
		{Name: "openai", Type: "openai", BaseURL: "https://api.openai.com/v1", APIKey: "oa-key", Models: []string{"*"}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		model, path, target, header, value string
	}{
		{"gpt-4o", "/v1/chat/completions", "https://x.openai.azure.com/openai/deployments/prod%20gpt4o/chat/completions?api-version=2024-10-21", "Api-Key", "az-key"},
		{"gpt-4o-mini", "/v1/embeddings", "https://x.openai.azure.com/openai/deployments/gpt-4o-mini/embeddings?api-version=2024-10-21", "Api-Key", "az-key"},
		{"gpt-4o/../../x", "/v1/embeddings", "https://x.openai.azure.com/openai/deployments/gpt-4o%2F..%2F..%2Fx/embeddings?api-version=2024-10-21", "Api-Key", "az-key"},
		{"o3", "/v1/chat/completions", "https://y.openai.azure.com/openai/v1/chat/completions", "Api-Key", "az1-key"},
		{"claude-sonnet-4", "/v1/chat/completions", "https://api.anthropic.com/v1/chat/completions", "X-Api-Key", "ant-key"},
		{"gpt-5", "/v1/chat/completions", "https://api.openai.com/v1/chat/completions", "Authorization", "Bearer oa-key"},
	} {
		u := s.Route(tc.model)
		if u == nil { // no glob matches a "/": asked of the Azure upstream directly
			u = s.Route("gpt-4o")
		}
		if got := u.Target(tc.path, tc.model).String(); got != tc.target {
			t.Errorf("%s: target %s, want %s", tc.model, got, tc.target)
		}
		h := http.Header{"Authorization": {"Bearer agent-token"}, "X-Api-Key": {"agent-token"}, "Api-Key": {"agent-token"}}
		u.Authorize(h)
		if len(h) != 1 || h.Get(tc.header) != tc.value {
			t.Errorf("%s: headers %v, want only %s", tc.model, h, tc.header)
		}
	}
}

// An anthropic upstream has no embeddings: it answers a 404 in OpenAI's
// shape without asking the provider, and a request it cannot translate is
// a 400 in OpenAI's shape, also without asking.
func TestAnthropicUpstreamAnswersWhatItCannotAsk(t *testing.T) {
	var asked atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { asked.Add(1) }))
	defer srv.Close()
	s, err := New([]Config{{Name: "claude", Type: "anthropic", BaseURL: srv.URL + "/v1", Models: []string{"*"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	u := s.Route("claude-x")
	for _, tc := range []struct {
		path, body string
		status     int
		msg        string
	}{
		{"/v1/embeddings", `{"model":"claude-x","input":"hi"}`, 404, "no embeddings endpoint"},
		{"/v1/chat/completions", `{"model":"claude-x","messages":[{"role":"user","content":"hi"}],"logit_bias":{"1":2}}`, 400, "logit_bias"},
	} {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, u.Target(tc.path, "claude-x").String(), strings.NewReader(tc.body))
		resp, err := u.Transport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		var e struct {
			Error struct{ Message, Type string }
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != tc.status || json.Unmarshal(b, &e) != nil || !strings.Contains(e.Error.Message, tc.msg) || e.Error.Type == "" {
			t.Errorf("%s: %d %s, want %d naming %q", tc.path, resp.StatusCode, b, tc.status, tc.msg)
		}
	}
	if asked.Load() != 0 {
		t.Errorf("the provider was asked %d times", asked.Load())
	}
}
