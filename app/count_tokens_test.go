package app

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	aoption "github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/proxy"
)

// newCountGateway is a gateway whose claude-* models go to a native
// Anthropic upstream and mock-* to the built-in mock, with request
// redaction on, for an agent that may use both and one with a tight rate.
func newCountGateway(t *testing.T) (*a2a, *fakeAnthropic) {
	t.Helper()
	dir := t.TempDir()
	fake := newFakeAnthropic(t)
	gw := `listen: "127.0.0.1:0"
upstreams:
  - {name: claude, type: anthropic, base_url: ` + fake.srv.URL + `/v1, api_key: ` + anthropicKey + `, max_retries: 0, models: ["claude-*"]}
  - {name: mock, type: mock, models: ["mock-*"]}
policy:
  dir: ` + policyDir(a2aOpts{}) + `
audit:
  dir: ` + filepath.Join(dir, "audit") + `
  chain: count
  fail_mode: closed
`
	agents := `agents:
  coder:
    type: code-generator
    token_sha256: "` + roster.HashTokenHex("tok-coder") + `"
    rate_limit: 100000/minute
    models: ["claude-*", "mock-*"]
  sacp:
    type: code-generator
    response_format: json_standard
    token_sha256: "` + roster.HashTokenHex("tok-sacp") + `"
    models: ["claude-*", "mock-*"]
  slow:
    type: code-generator
    token_sha256: "` + roster.HashTokenHex("tok-slow") + `"
    rate_limit: 1/minute
    models: ["mock-*"]
`
	protocol := "protocol:\n  redaction:\n    requests: true\n    detectors: [email]\n"
	return serveApp(t, dir, filepath.Join(dir, "audit"), map[string]string{config.GatewayFile: gw, config.AgentsFile: agents, config.ProtocolFile: protocol}), fake
}

// TestCountTokens: POST /v1/messages/count_tokens through the gateway with
// Anthropic's official client. A model of an anthropic upstream is counted
// by the provider (the prompt redacted first, the gateway's key, no
// max_tokens); any other model is estimated by the gateway; the header
// says which. It is governed as a message: the model allow-list, the rate
// limit, the audit trail; every error, an unknown path under /v1/messages
// included, is in Anthropic's shape.
func TestCountTokens(t *testing.T) {
	g, fake := newCountGateway(t)
	ctx := context.Background()
	client := func(tok string) *anthropic.Client {
		c := anthropic.NewClient(aoption.WithBaseURL(g.srv.URL), aoption.WithAPIKey(tok), aoption.WithMaxRetries(0))
		return &c
	}
	params := func(model string) anthropic.MessageCountTokensParams {
		return anthropic.MessageCountTokensParams{
			Model:    anthropic.Model(model),
			System:   anthropic.MessageCountTokensParamsSystemUnion{OfTextBlockArray: []anthropic.TextBlockParam{{Text: "Be brief."}}},
			Messages: []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Write to ceo@example.com about the outage of last night."))},
		}
	}

	t.Run("passed to the anthropic upstream", func(t *testing.T) {
		fake.set(func(map[string]any) (int, string, string) {
			return 200, "application/json", `{"input_tokens": 27, "later_field": {"x": 1}}`
		})
		var resp *http.Response
		n, err := client("tok-coder").Messages.CountTokens(ctx, params("claude-sonnet-4-5"), aoption.WithResponseInto(&resp))
		if err != nil {
			t.Fatal(err)
		}
		if n.InputTokens != 27 || resp.Header.Get(proxy.CountSourceHeader) != proxy.CountFromUpstream {
			t.Errorf("count %d, %s %q; want the provider's 27", n.InputTokens, proxy.CountSourceHeader, resp.Header.Get(proxy.CountSourceHeader))
		}
		if strings.Contains(n.RawJSON(), "later_field") {
			t.Errorf("the answer passed on members the gateway did not read: %s", n.RawJSON())
		}
		reqs := fake.requests()
		if len(reqs) != 1 {
			t.Fatalf("the provider got %d requests", len(reqs))
		}
		got := reqs[0]
		if got.path != "/v1/messages/count_tokens" || got.header.Get("X-Api-Key") != anthropicKey || got.header.Get("Anthropic-Version") == "" {
			t.Errorf("the provider got %s with headers %v", got.path, got.header)
		}
		if strings.Contains(got.raw, "ceo@example.com") || !strings.Contains(got.raw, "outage of last night") {
			t.Errorf("the prompt was not redacted before it left: %s", got.raw)
		}
		if _, err := client("tok-sacp").Messages.CountTokens(ctx, params("claude-sonnet-4-5")); err != nil {
			t.Fatal(err)
		}
		if sys := str(fake.requests()[1].body["system"]); !strings.Contains(sys, "SYSTEM PROTOCOL") {
			t.Errorf("a protocol agent's count was asked without the protocol prompt: system %q", sys)
		}
		for _, k := range []string{"max_tokens", "stream", "temperature"} {
			if _, ok := got.body[k]; ok {
				t.Errorf("the count request carries %s: %s", k, got.raw)
			}
		}
		if got.body["model"] != "claude-sonnet-4-5" || got.body["system"] != "Be brief." {
			t.Errorf("the provider got %s", got.raw)
		}
	})

	t.Run("estimated for another provider", func(t *testing.T) {
		before := len(fake.requests())
		var resp *http.Response
		n, err := client("tok-coder").Messages.CountTokens(ctx, params("mock-1"), aoption.WithResponseInto(&resp))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Header.Get(proxy.CountSourceHeader) != proxy.CountEstimated || n.InputTokens < 10 || n.InputTokens > 60 {
			t.Errorf("count %d, %s %q; want an estimate", n.InputTokens, proxy.CountSourceHeader, resp.Header.Get(proxy.CountSourceHeader))
		}
		if len(fake.requests()) != before {
			t.Error("an estimate asked the anthropic upstream")
		}
		// A protocol agent's messages carry the protocol prompt: its count
		// does too.
		withProtocol, err := client("tok-sacp").Messages.CountTokens(ctx, params("mock-1"))
		if err != nil {
			t.Fatal(err)
		}
		if withProtocol.InputTokens < n.InputTokens+100 {
			t.Errorf("a protocol agent's count %d, a plain agent's %d: the protocol prompt is not counted", withProtocol.InputTokens, n.InputTokens)
		}
	})

	t.Run("the provider's refusal in Anthropic's shape", func(t *testing.T) {
		fake.set(func(map[string]any) (int, string, string) {
			return 400, "application/json", `{"type":"error","error":{"type":"invalid_request_error","message":"messages: too many images"}}`
		})
		_, err := client("tok-coder").Messages.CountTokens(ctx, params("claude-sonnet-4-5"))
		checkAnthropicError(t, err, http.StatusBadRequest, "invalid_request_error", "too many images")
	})

	t.Run("refusals in Anthropic's shape", func(t *testing.T) {
		_, err := client("tok-coder").Messages.CountTokens(ctx, params("gpt-4o"))
		checkAnthropicError(t, err, http.StatusNotFound, "not_found_error", "gpt-4o")
		_, err = client("wrong").Messages.CountTokens(ctx, params("mock-1"))
		checkAnthropicError(t, err, http.StatusUnauthorized, "authentication_error", "")
		// max_tokens is a message's, not a count's: refused, not dropped.
		_, err = client("tok-coder").Messages.CountTokens(ctx, params("mock-1"), aoption.WithJSONSet("max_tokens", 10))
		checkAnthropicError(t, err, http.StatusBadRequest, "invalid_request_error", "max_tokens")
		_, err = client("tok-coder").Messages.CountTokens(ctx, anthropic.MessageCountTokensParams{Model: "mock-1"})
		checkAnthropicError(t, err, http.StatusBadRequest, "invalid_request_error", "messages")
		// The rate limit: one request a minute.
		if _, err := client("tok-slow").Messages.CountTokens(ctx, params("mock-1")); err != nil {
			t.Fatal(err)
		}
		_, err = client("tok-slow").Messages.CountTokens(ctx, params("mock-1"))
		checkAnthropicError(t, err, http.StatusTooManyRequests, "rate_limit_error", "")
	})

	t.Run("unknown paths under /v1/messages", func(t *testing.T) {
		for _, c := range []struct{ method, path string }{
			{http.MethodPost, "/v1/messages/batches"}, {http.MethodPost, "/v1/messages/count_token"},
			{http.MethodPost, "/v1/messages/x/y"}, {http.MethodGet, "/v1/messages/count_tokens"},
		} {
			method, path := c.method, c.path
			status, body, _ := g.do(method, path, "tok-coder", `{}`)
			var e struct {
				Type  string `json:"type"`
				Error struct {
					Type    string `json:"type"`
					Message string `json:"message"`
				} `json:"error"`
			}
			if status != http.StatusNotFound || json.Unmarshal(body, &e) != nil || e.Type != "error" || e.Error.Type != "not_found_error" || e.Error.Message == "" {
				t.Errorf("%s %s: %d %s, want Anthropic's 404", method, path, status, body)
			}
		}
	})

	t.Run("audited", func(t *testing.T) {
		var sources []string // the upstream of each count answered: "" when estimated
		for _, e := range g.entries(audit.KindLLMResponse) {
			s := summaryOf(e)
			if s["dialect"] == "anthropic" && s["status"] == float64(200) {
				sources = append(sources, str(s["upstream"]))
			}
		}
		var routes int
		for _, e := range g.entries(audit.KindLLMRequest) {
			if summaryOf(e)["route"] == "/v1/messages/count_tokens" {
				routes++
			}
		}
		if !slices.Contains(sources, "claude") || !slices.Contains(sources, "") || routes < 3 {
			t.Errorf("llm.response upstreams %q, %d llm.request entries of the route", sources, routes)
		}
	})
}

// checkAnthropicError: err is an Anthropic API error of status and type
// (Anthropic's shape), its message holding want.
func checkAnthropicError(t *testing.T, err error, status int, typ, want string) {
	t.Helper()
	var apiErr *anthropic.Error
	if !errors.As(err, &apiErr) {
		t.Fatalf("%v, want an API error %d", err, status)
	}
	var e struct {
		Type  string `json:"type"`
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if apiErr.StatusCode != status || json.Unmarshal([]byte(apiErr.RawJSON()), &e) != nil || e.Type != "error" || e.Error.Type != typ || !strings.Contains(e.Error.Message, want) {
		t.Errorf("error %d %s; want %d %s with %q", apiErr.StatusCode, apiErr.RawJSON(), status, typ, want)
	}
}
