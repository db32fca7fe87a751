package upstream

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/config"
)

func TestConfigKnowsEveryType(t *testing.T) {
	var types []string
	for name := range constructors() {
		types = append(types, name)
	}
	slices.Sort(types)
	if !slices.Equal(types, config.UpstreamTypes()) {
		t.Fatalf("constructors %v != config.UpstreamTypes %v", types, config.UpstreamTypes())
	}
}

func TestRouteAndTarget(t *testing.T) {
	s, err := New([]config.Upstream{
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
	if got := s.Route("llama-3").Target("/v1/chat/completions").String(); got != "http://vllm:8000/v1/chat/completions" {
		t.Errorf("target = %s", got)
	}
	if got := s.Route("gpt-4o").Target("/v1/embeddings").String(); got != "https://x.openai.azure.com/openai/v1/embeddings" {
		t.Errorf("target = %s", got)
	}
	if m := s.Models(); len(m) != 1 || m[0].ID != "gpt-4o" {
		t.Errorf("literal models = %v", m)
	}
}

func TestMockIsDeterministicAndStreams(t *testing.T) {
	s, _ := New([]config.Upstream{{Name: "mock", Type: "mock", Models: []string{"*"}}}, nil)
	u := s.Route("mock-1")
	call := func(body string) (int, string) {
		req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, u.Target("/v1/chat/completions").String(), strings.NewReader(body))
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
		s, err := New([]config.Upstream{{Name: "vllm", Type: "openai", BaseURL: srv.URL + "/v1", CAFile: ca, Models: []string{"*"}}}, nil)
		if err != nil {
			return err
		}
		defer s.Close()
		u := s.Route("m")
		req, _ := http.NewRequest(http.MethodGet, u.Target("/v1/models").String(), nil)
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
