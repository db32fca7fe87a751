package anthropic

import (
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
)

// TestCountRequest: a count_tokens body is read as strictly as a message's
// prompt; what only generation needs is refused by name, not dropped; the
// neutral form carries no max_tokens, and the provider's request is the
// prompt a message would send.
func TestCountRequest(t *testing.T) {
	ok := `{"model":"claude-sonnet-4-5","system":[{"type":"text","text":"Be brief."}],` +
		`"messages":[{"role":"user","content":"Hi"}],` +
		`"tools":[{"name":"get_weather","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto"}}`
	chat, model, err := CountRequest([]byte(ok))
	if err != nil || model != "claude-sonnet-4-5" {
		t.Fatalf("CountRequest: %q %v", model, err)
	}
	if strings.Contains(string(chat), "max_tokens") {
		t.Errorf("the neutral form carries max_tokens: %s", chat)
	}
	out, err := ProviderCountRequest(chat, ProviderOptions{MaxTokens: 4096, PromptCache: true})
	if err != nil {
		t.Fatal(err)
	}
	var sent map[string]any
	if err := json.Unmarshal(out, &sent); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"max_tokens", "stream", "temperature", "metadata"} {
		if _, has := sent[k]; has {
			t.Errorf("the provider's count request has %s: %s", k, out)
		}
	}
	if sent["model"] != "claude-sonnet-4-5" || sent["messages"] == nil || sent["tools"] == nil || sent["tool_choice"] == nil {
		t.Errorf("the provider's count request: %s", out)
	}

	for _, tc := range []struct{ note, body, field string }{
		{"max_tokens", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"x"}]}`, "max_tokens"},
		{"stream", `{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`, "stream"},
		{"sampling", `{"model":"m","temperature":0.5,"messages":[{"role":"user","content":"x"}]}`, "temperature"},
		{"no model", `{"messages":[{"role":"user","content":"x"}]}`, "model"},
		{"no messages", `{"model":"m"}`, "messages"},
		{"a duplicate", `{"model":"m","model":"n","messages":[{"role":"user","content":"x"}]}`, "model"},
		{"a case variant", `{"Model":"m","messages":[{"role":"user","content":"x"}]}`, "Model"},
	} {
		if _, _, err := CountRequest([]byte(tc.body)); err == nil || !strings.Contains(err.Error(), tc.field) {
			t.Errorf("%s: %v, want an error naming %s", tc.note, err, tc.field)
		}
	}
	// A neutral body with generation settings is not a count.
	if _, err := ProviderCountRequest([]byte(`{"model":"m","max_tokens":3,"messages":[{"role":"user","content":"x"}]}`), ProviderOptions{}); err == nil {
		t.Error("a neutral body with max_tokens was counted")
	}
}

func TestCountResponse(t *testing.T) {
	for body, want := range map[string]int64{`{"input_tokens":12}`: 12, `{"input_tokens":0,"other":[1]}`: 0} {
		if got, err := CountResponse([]byte(body)); err != nil || got.InputTokens != want {
			t.Errorf("%s: %d %v", body, got.InputTokens, err)
		}
	}
	for _, bad := range []string{``, `{}`, `{"input_tokens":-1}`, `{"input_tokens":1.5}`, `{"input_tokens":"3"}`,
		`{"input_tokens":1,"input_tokens":2}`, `[1]`, `{"input_tokens":1} x`} {
		if got, err := CountResponse([]byte(bad)); err == nil {
			t.Errorf("%q read as %d", bad, got.InputTokens)
		}
	}
}

// FuzzCountRequest: whatever the body, the count's reading ends in an
// error or a neutral request without max_tokens whose provider form
// translates.
func FuzzCountRequest(f *testing.F) {
	f.Add([]byte(`{"model":"m","messages":[{"role":"user","content":"x"}]}`))
	f.Add([]byte(`{"model":"m","system":"s","messages":[{"role":"user","content":[{"type":"text","text":"a"}]}],"thinking":{"type":"enabled","budget_tokens":2}}`))
	f.Fuzz(func(t *testing.T, body []byte) {
		chat, _, err := CountRequest(body)
		if err != nil {
			return
		}
		if strings.Contains(string(chat), `"max_tokens"`) {
			t.Fatalf("max_tokens in %s", chat)
		}
		if _, err := ProviderCountRequest(chat, ProviderOptions{MaxTokens: 1}); err != nil {
			t.Fatalf("a count the gateway read does not translate: %v\n%s", err, chat)
		}
	})
}
