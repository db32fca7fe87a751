package app

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go"
	"github.com/openai/openai-go/option"
	"github.com/openai/openai-go/responses"

	"github.com/sacpgw/gateway/audit"
)

// TestResponsesDialect: the official OpenAI client's Responses API, pointed
// at the gateway, gets the whole governance of a chat call from the
// provider (the mock): an answer, a stream, a tool call, and refusals in
// OpenAI's error shape.
func TestResponsesDialect(t *testing.T) {
	g := newA2A(t, a2aOpts{})
	client := openai.NewClient(option.WithBaseURL(g.srv.URL+"/v1"), option.WithAPIKey("tok-outsider"), option.WithMaxRetries(0))
	ctx := context.Background()
	params := responses.ResponseNewParams{
		Model:        "mock-1",
		Instructions: openai.String("You are terse."),
		Input:        responses.ResponseNewParamsInputUnion{OfString: openai.String("Hello from the Responses API")},
	}
	resp, err := client.Responses.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(resp.OutputText(), "Hello from the Responses API") || resp.Status != "completed" || resp.Usage.OutputTokens == 0 {
		t.Fatalf("response %+v", resp)
	}

	stream := client.Responses.NewStreaming(ctx, params)
	var text strings.Builder
	completed := false
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.output_text.delta":
			text.WriteString(ev.AsResponseOutputTextDelta().Delta)
		case "response.completed":
			completed = true
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if !completed || text.String() != resp.OutputText() {
		t.Errorf("stream text %q (completed %v), want the answer's %q", text.String(), completed, resp.OutputText())
	}

	// A tool call: the mock calls a tool the message names.
	tp := params
	tp.Input = responses.ResponseNewParamsInputUnion{OfString: openai.String("Use get_weather for city Paris")}
	tp.Tools = []responses.ToolUnionParam{{OfFunction: &responses.FunctionToolParam{Name: "get_weather",
		Parameters: map[string]any{"type": "object", "properties": map[string]any{"city": map[string]any{"type": "string"}}, "required": []string{"city"}}}}}
	resp, err = client.Responses.New(ctx, tp)
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	for _, item := range resp.Output {
		if item.Type == "function_call" && item.Name == "get_weather" && strings.Contains(item.Arguments, "Paris") {
			calls++
		}
	}
	if calls != 1 {
		t.Errorf("output %+v: want one get_weather call", resp.Output)
	}

	// What needs state the gateway does not keep is refused by name, not
	// dropped; a response it does not keep is OpenAI's 404.
	var apiErr *openai.Error
	bp := params
	bp.Background = openai.Bool(true)
	if _, err := client.Responses.New(ctx, bp); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadRequest || !strings.Contains(apiErr.Message, "background") {
		t.Errorf("background: %v, want a 400 naming it", err)
	}
	sp := params
	sp.PreviousResponseID = openai.String("resp_123")
	if _, err := client.Responses.New(ctx, sp); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusNotFound ||
		apiErr.Code != "previous_response_not_found" || apiErr.Message != "Previous response with id 'resp_123' not found." {
		t.Errorf("previous_response_id of no response: %v, want OpenAI's 404", err)
	}
	bad := openai.NewClient(option.WithBaseURL(g.srv.URL+"/v1"), option.WithAPIKey("wrong"), option.WithMaxRetries(0))
	if _, err := bad.Responses.New(ctx, params); !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusUnauthorized {
		t.Errorf("a wrong key: %v, want 401", err)
	}

	found := false
	for _, e := range g.entries(audit.KindLLMResponse) {
		if summaryOf(e)["dialect"] == "responses" {
			found = true
		}
	}
	if !found {
		t.Error("no llm.response entry says dialect responses")
	}
}
