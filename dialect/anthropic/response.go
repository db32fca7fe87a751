package anthropic

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sacpgw/gateway/dialect/internal/neutral"
)

// Response translates an OpenAI chat completion (JSON) into an Anthropic
// Messages response body.
//
// The completion comes from the gateway's own pipeline, which has read it
// strictly already; it is read here with json v2's defaults (no duplicate
// names, valid UTF-8) and unknown members allowed, since providers add
// fields the translation has no use for. An error means the answer cannot
// be said in Anthropic's form (no choice, several, arguments that are no
// JSON object, an unknown finish_reason): a failure of the upstream, for a
// 502, never a client error.
func Response(chat []byte) ([]byte, error) {
	c, ch, err := neutral.ReadCompletion[apiError](chat, "Messages")
	if err != nil {
		return nil, err
	}
	content := []any{}
	if text := answerText(ch.Message); text != "" {
		content = append(content, textBlock{Type: "text", Text: text})
	}
	for i, tc := range ch.Message.ToolCalls {
		if tc.ID == "" || tc.Function.Name == "" {
			return nil, fmt.Errorf("tool call %d has no id or no name", i)
		}
		input, err := toolInput(tc.Function.Arguments)
		if err != nil {
			return nil, fmt.Errorf("tool call %d (%s): %w", i, tc.Function.Name, err)
		}
		content = append(content, toolUseBlock{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: input})
	}
	reason, err := stopReason(ch.FinishReason, len(ch.Message.ToolCalls) > 0)
	if err != nil {
		return nil, err
	}
	msg := messageOut{
		ID: messageID(c.ID, chat), Type: "message", Role: "assistant", Model: c.Model,
		Content: content, StopReason: &reason, Usage: usageOf(c.Usage),
	}
	return json.Marshal(msg)
}

// completion is the part of an OpenAI chat completion, or of a stream
// chunk, that the translation reads.
type completion = neutral.Completion[apiError]

// The choices of a completion or chunk are the neutral form's.
type (
	choice   = neutral.Choice
	answer   = neutral.Answer
	toolCall = neutral.ToolCall
)

// answerText is the answer's text; a refusal (OpenAI's separate field for a
// model that declines) is the text when there is no other, so the client
// sees why the answer is empty.
func answerText(a *answer) string {
	if a.Content != nil && *a.Content != "" {
		return *a.Content
	}
	if a.Refusal != nil {
		return *a.Refusal
	}
	return ""
}

type usage = neutral.Usage

// usageOf is the usage in Anthropic's terms, where the input counts add
// up: input_tokens excludes the cache reads that OpenAI's prompt_tokens
// includes (see the package documentation).
func usageOf(u *usage) usageOut {
	if u == nil || !u.Known {
		// No report, or one the books refused: Anthropic's shape has no
		// way to say "unknown" but zeros.
		return usageOut{}
	}
	out := usageOut{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
	if cached, ok := u.Cached(); ok {
		out.InputTokens -= cached
		out.CacheReadInputTokens = &cached
	}
	return out
}

type messageOut struct {
	ID           string   `json:"id"`
	Type         string   `json:"type"`
	Role         string   `json:"role"`
	Model        string   `json:"model"`
	Content      []any    `json:"content"`
	StopReason   *string  `json:"stop_reason"`
	StopSequence *string  `json:"stop_sequence"`
	Usage        usageOut `json:"usage"`
}

type usageOut struct {
	InputTokens          int64  `json:"input_tokens"`
	CacheReadInputTokens *int64 `json:"cache_read_input_tokens,omitempty"`
	OutputTokens         int64  `json:"output_tokens"`
}

type textBlock struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type toolUseBlock struct {
	Type  string         `json:"type"`
	ID    string         `json:"id"`
	Name  string         `json:"name"`
	Input jsontext.Value `json:"input"`
}

// toolInput is a tool call's arguments as Anthropic's input: a JSON
// object ("" is a call without arguments: {}).
func toolInput(args string) (jsontext.Value, error) {
	if strings.TrimSpace(args) == "" {
		return jsontext.Value("{}"), nil
	}
	v := jsontext.Value(args)
	if !v.IsValid() {
		return nil, errors.New("its arguments are not valid JSON")
	}
	if v.Kind() != '{' {
		return nil, errors.New("its arguments are not a JSON object")
	}
	v = v.Clone()
	if err := v.Compact(); err != nil {
		return nil, err
	}
	return v, nil
}

// stopReason maps an OpenAI finish_reason to Anthropic's stop_reason (see
// the package documentation); tools says the answer has tool calls.
func stopReason(finish *string, tools bool) (string, error) {
	if finish == nil {
		return "", errors.New("the chat completion has no finish_reason: the answer may be incomplete")
	}
	switch *finish {
	case "stop":
		// Some providers finish a tool call with stop; the client must
		// still run the tools it was given.
		if tools {
			return "tool_use", nil
		}
		return "end_turn", nil
	case "length":
		return "max_tokens", nil
	case "tool_calls", "function_call":
		return "tool_use", nil
	case "content_filter":
		return "refusal", nil
	}
	return "", fmt.Errorf("unknown finish_reason %q", *finish)
}

// messageID is "msg_" and the completion's id without OpenAI's prefix,
// or, for a completion without one, a digest of its JSON (stable, so the
// same answer gets the same id however it is sliced).
func messageID(id string, raw []byte) string {
	if id = strings.TrimPrefix(id, "chatcmpl-"); id != "" {
		return "msg_" + id
	}
	sum := sha256.Sum256(raw)
	return "msg_" + hex.EncodeToString(sum[:12])
}
