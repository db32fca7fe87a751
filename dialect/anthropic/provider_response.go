package anthropic

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	usagereport "github.com/sacpgw/gateway/internal/usage"
)

// The answer side of the gateway as Anthropic's client (see provider.go):
// a Messages answer said as a chat completion, and Anthropic's errors in
// OpenAI's shape. ChunkStream (provider_stream.go) says a streamed answer.

// ProviderResponse translates a Messages answer into a chat completion
// created at the given Unix time. An error means the answer cannot be said
// as a chat completion (a content block or stop reason the translation
// does not know): the provider's failure, for a 502.
func ProviderResponse(body []byte, created int64) ([]byte, error) {
	// Unknown members are allowed (the provider adds fields), and dropped:
	// the translation writes only what it read.
	var m messageIn
	if err := json.Unmarshal(body, &m); err != nil {
		return nil, fmt.Errorf("reading the messages answer: %w", err)
	}
	if m.Type != "message" || m.Role != "assistant" {
		return nil, fmt.Errorf("the answer is a %q of role %q, not an assistant message", m.Type, m.Role)
	}
	var (
		text  strings.Builder
		calls []outCall
	)
	for i, b := range m.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			args, err := callArguments(b.Input)
			if err != nil || b.ID == "" || b.Name == "" {
				return nil, fmt.Errorf("content block %d: a tool_use needs an id, a name and an object input", i)
			}
			calls = append(calls, outCall{ID: b.ID, Type: "function", Function: outFunction{Name: b.Name, Arguments: args}})
		case "thinking", "redacted_thinking":
			// Never asked for (the translation sends no thinking); if a
			// model sends it anyway, the chat form has no place for it.
		default:
			return nil, fmt.Errorf("content block %d: type %q cannot be said as a chat completion", i, b.Type)
		}
	}
	finish, err := finishReason(m.StopReason)
	if err != nil {
		return nil, err
	}
	msg := outMessage{Role: "assistant", ToolCalls: calls}
	if text.Len() > 0 || len(calls) == 0 {
		s := text.String()
		msg.Content = &s
	}
	u := m.Usage.chat()
	return json.Marshal(outCompletion{
		ID: chatID(m.ID), Object: "chat.completion", Created: created, Model: m.Model,
		Choices: []outChoice{{Index: 0, Message: &msg, FinishReason: &finish}},
		Usage:   &u,
	})
}

// messageIn is the part of a Messages answer the translation reads.
type messageIn struct {
	ID         string    `json:"id"`
	Type       string    `json:"type"`
	Role       string    `json:"role"`
	Model      string    `json:"model"`
	Content    []blockIn `json:"content"`
	StopReason *string   `json:"stop_reason"`
	Usage      usageIn   `json:"usage"`
}

type blockIn struct {
	Type  string         `json:"type"`
	Text  string         `json:"text"`
	ID    string         `json:"id"`
	Name  string         `json:"name"`
	Input jsontext.Value `json:"input"`
}

// usageIn is Anthropic's usage: the three input counts add up.
type usageIn struct {
	InputTokens              count `json:"input_tokens"`
	OutputTokens             count `json:"output_tokens"`
	CacheCreationInputTokens count `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     count `json:"cache_read_input_tokens"`
}

// count is one of Anthropic's token counts, read by the gateway's one
// usage reader (internal/usage): n when it is a count (null, which
// Anthropic sends for a cache it did not use, is 0), else bad holds the
// value as it came. The translation does not judge a provider's usage,
// nor let an unreadable count fail the answer: it passes the count on, in
// the chat field it adds to, where the books refuse the report and say why.
type count struct {
	n   int64
	bad jsontext.Value
}

func (c *count) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*c = count{}
		return nil
	}
	n, err := usagereport.Count("", b)
	if err != nil {
		*c = count{bad: bytes.Clone(b)}
		return nil
	}
	*c = count{n: n}
	return nil
}

// chat is the usage in OpenAI's form, where prompt_tokens counts every
// input token, cached ones included (cached_tokens says how many). With an
// unreadable count there are no sums: the first such input count is
// prompt_tokens, an unreadable output count completion_tokens, and there
// is no total.
func (u usageIn) chat() outUsage {
	num := func(n int64) jsontext.Value { return strconv.AppendInt(nil, n, 10) }
	var out outUsage
	prompt := u.InputTokens.n + u.CacheCreationInputTokens.n + u.CacheReadInputTokens.n
	out.PromptTokens = num(prompt)
	for _, c := range []count{u.InputTokens, u.CacheCreationInputTokens, u.CacheReadInputTokens} {
		if c.bad != nil {
			out.PromptTokens = c.bad
			break
		}
	}
	out.CompletionTokens = num(u.OutputTokens.n)
	if u.OutputTokens.bad != nil {
		out.CompletionTokens = u.OutputTokens.bad
	}
	if r := u.CacheReadInputTokens; r.bad != nil || r.n > 0 {
		out.PromptTokensDetails = &cachedDetails{CachedTokens: num(r.n)}
		if r.bad != nil {
			out.PromptTokensDetails.CachedTokens = r.bad
		}
	}
	if u.readable() {
		out.TotalTokens = num(prompt + u.OutputTokens.n)
	}
	return out
}

func (u usageIn) readable() bool {
	return u.InputTokens.bad == nil && u.OutputTokens.bad == nil && u.CacheCreationInputTokens.bad == nil && u.CacheReadInputTokens.bad == nil
}

type (
	outCompletion struct {
		ID      string      `json:"id"`
		Object  string      `json:"object"`
		Created int64       `json:"created"`
		Model   string      `json:"model"`
		Choices []outChoice `json:"choices"`
		Usage   *outUsage   `json:"usage,omitempty"`
	}
	outChoice struct {
		Index        int         `json:"index"`
		Message      *outMessage `json:"message,omitzero"`
		Delta        *outMessage `json:"delta,omitzero"`
		Logprobs     *struct{}   `json:"logprobs"`
		FinishReason *string     `json:"finish_reason"`
	}
	outMessage struct {
		Role      string    `json:"role,omitempty"`
		Content   *string   `json:"content,omitzero"`
		ToolCalls []outCall `json:"tool_calls,omitempty"`
	}
	outCall struct {
		Index    *int        `json:"index,omitempty"`
		ID       string      `json:"id,omitempty"`
		Type     string      `json:"type,omitempty"`
		Function outFunction `json:"function"`
	}
	outFunction struct {
		Name      string `json:"name,omitempty"`
		Arguments string `json:"arguments"`
	}
	// outUsage holds JSON numbers as written (see usageIn.chat).
	outUsage struct {
		PromptTokens        jsontext.Value `json:"prompt_tokens"`
		CompletionTokens    jsontext.Value `json:"completion_tokens"`
		TotalTokens         jsontext.Value `json:"total_tokens,omitzero"`
		PromptTokensDetails *cachedDetails `json:"prompt_tokens_details,omitempty"`
	}
	cachedDetails struct {
		CachedTokens jsontext.Value `json:"cached_tokens"`
	}
)

// callArguments is a tool_use input as a tool call's arguments string.
func callArguments(input jsontext.Value) (string, error) {
	v := input.Clone()
	if err := v.Compact(); err != nil {
		return "", err
	}
	if v.Kind() != '{' {
		return "", errors.New("not an object")
	}
	return string(v), nil
}

// finishReason maps Anthropic's stop_reason. pause_turn (a server tool's
// long turn) never comes, as no server tool is sent; it and an unknown or
// missing reason are errors, since the answer may be incomplete.
func finishReason(stop *string) (string, error) {
	if stop == nil {
		return "", errors.New("the answer has no stop_reason")
	}
	switch *stop {
	case "end_turn", "stop_sequence":
		return "stop", nil
	case "max_tokens", "model_context_window_exceeded":
		return "length", nil
	case "tool_use":
		return "tool_calls", nil
	case "refusal":
		// The provider's safety filter cut the answer short: what Azure's
		// content_filter says, and what the gateway's blocked answers say.
		return "content_filter", nil
	}
	return "", fmt.Errorf("stop_reason %q cannot be said as a finish_reason", *stop)
}

// chatID is a message id as a completion id: "msg_X" becomes
// "chatcmpl-X", which the Messages dialect turns back into "msg_X".
func chatID(id string) string {
	if rest, ok := strings.CutPrefix(id, "msg_"); ok {
		return "chatcmpl-" + rest
	}
	return "chatcmpl-" + id
}

// ProviderError translates an Anthropic error answer of status into an
// OpenAI error body; a body that is no Anthropic error gets a message that
// names the status only (a provider's HTML error page is not passed on).
func ProviderError(status int, body []byte) []byte {
	var e struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	msg := fmt.Sprintf("The provider (Anthropic) answered %d.", status)
	typ := openAIType(status)
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		msg = e.Error.Message
	}
	out, _ := json.Marshal(map[string]any{"error": map[string]any{"message": msg, "type": typ, "param": nil, "code": anthropicCode(e.Error.Type)}})
	return out
}

// openAIType is the OpenAI error type of an HTTP status.
func openAIType(status int) string {
	switch {
	case status == 401:
		return "authentication_error"
	case status == 403:
		return "permission_error"
	case status == 404:
		return "not_found_error"
	case status == 429:
		return "rate_limit_error"
	case status >= 500:
		return "server_error"
	}
	return "invalid_request_error"
}

// anthropicCode passes Anthropic's error type on as the code (overloaded_error
// tells a client more than a bare 529), or null.
func anthropicCode(typ string) any {
	if typ == "" {
		return nil
	}
	return typ
}
