package app

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"

	"github.com/sacpgw/gateway/audit"
)

// TestAnthropicMessagesDialect: the official Anthropic SDK, pointed at the
// gateway with the agent's gateway token as its key, gets the whole
// governance of a chat call (identity, model allow-list, limits, Rego,
// audit) from an OpenAI-compatible provider (the built-in mock): a plain
// answer, a stream, a tool call, and errors in its own shape.
func TestAnthropicMessagesDialect(t *testing.T) {
	g := newA2A(t, a2aOpts{})
	client := func(key string) *anthropic.Client {
		c := anthropic.NewClient(option.WithBaseURL(g.srv.URL), option.WithAPIKey(key), option.WithMaxRetries(0))
		return &c
	}
	ctx := context.Background()
	params := anthropic.MessageNewParams{
		Model:     "mock-1",
		MaxTokens: 256,
		System:    []anthropic.TextBlockParam{{Text: "You are terse."}},
		Messages:  []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Hello from Claude"))},
	}

	msg, err := client("tok-outsider").Messages.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if msg.Role != "assistant" || len(msg.Content) != 1 || !strings.Contains(msg.Content[0].Text, "Hello from Claude") ||
		msg.StopReason != anthropic.StopReasonEndTurn || msg.Usage.OutputTokens == 0 {
		t.Fatalf("message %+v", msg)
	}

	// A stream, accumulated as the SDK does.
	stream := client("tok-outsider").Messages.NewStreaming(ctx, params)
	var acc anthropic.Message
	for stream.Next() {
		if err := acc.Accumulate(stream.Current()); err != nil {
			t.Fatal(err)
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Content) != 1 || acc.Content[0].Text != msg.Content[0].Text || acc.StopReason != anthropic.StopReasonEndTurn {
		t.Errorf("stream accumulated %+v, want the same text as the JSON answer", acc)
	}

	// A tool call: the mock calls a tool the message names.
	tp := params
	tp.Messages = []anthropic.MessageParam{anthropic.NewUserMessage(anthropic.NewTextBlock("Use get_weather for city Paris"))}
	tp.Tools = []anthropic.ToolUnionParam{{OfTool: &anthropic.ToolParam{Name: "get_weather", Description: anthropic.String("Weather of a city"),
		InputSchema: anthropic.ToolInputSchemaParam{Properties: map[string]any{"city": map[string]any{"type": "string"}}, Required: []string{"city"}}}}}
	msg, err = client("tok-outsider").Messages.New(ctx, tp)
	if err != nil {
		t.Fatal(err)
	}
	if msg.StopReason != anthropic.StopReasonToolUse || len(msg.Content) == 0 || msg.Content[len(msg.Content)-1].Type != "tool_use" ||
		msg.Content[len(msg.Content)-1].Name != "get_weather" || !strings.Contains(string(msg.Content[len(msg.Content)-1].Input), "Paris") {
		t.Errorf("tool call %+v", msg)
	}

	// Errors reach the SDK in Anthropic's shape, with the right status.
	var apiErr *anthropic.Error
	if _, err := client("wrong-key").Messages.New(ctx, params); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong key: %v, want 401", err)
	}
	// A parameter the neutral form cannot carry is refused, not dropped.
	if _, err := client("tok-outsider").Messages.New(ctx, params, option.WithJSONSet("top_k", 1)); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Error(), "top_k") {
		t.Errorf("top_k: %v, want a 400 naming top_k", err)
	}

	// Governed as any chat call: on the audit trail, with the dialect.
	found := false
	for _, e := range g.entries(audit.KindLLMResponse) {
		if summaryOf(e)["dialect"] == "anthropic" {
			found = true
		}
	}
	if !found {
		t.Error("no llm.response entry says dialect anthropic")
	}
}
