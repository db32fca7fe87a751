package anthropic

import (
	"fmt"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sacpgw/gateway/dialect/internal/neutral"
)

// Token counting (POST /v1/messages/count_tokens): the request is a
// Messages request's prompt, without what only generation needs
// (max_tokens, stream, sampling, stop sequences, metadata); the answer is
// {"input_tokens": N}.
//
// The gateway governs it as a message: CountRequest reads it as strictly,
// into the neutral form (no max_tokens), so the same stages check and
// redact it; an anthropic upstream says it back with ProviderCountRequest
// and counts it, anything else is estimated.

// countRequest is the count_tokens request: every member it accepts.
type countRequest struct {
	Model      *string     `json:"model"`
	Messages   []message   `json:"messages"`
	System     *content    `json:"system"`
	Tools      []tool      `json:"tools"`
	ToolChoice *toolChoice `json:"tool_choice"`
	Thinking   *thinking   `json:"thinking"`
}

// CountRequest translates a count_tokens request body into the neutral
// form, without max_tokens. An error is the client's: it names the field
// (a 400 invalid_request_error).
func CountRequest(body []byte) (chat []byte, model string, err error) {
	c, err := neutral.Decode[countRequest](body, nil)
	if err != nil {
		return nil, "", err
	}
	// The message's own checks and translation, max_tokens aside: it
	// bounds the answer, and a count has none.
	one := int64(1)
	r := request{Model: c.Model, MaxTokens: &one, Messages: c.Messages, System: c.System,
		Tools: c.Tools, ToolChoice: c.ToolChoice, Thinking: c.Thinking}
	out, err := r.translate()
	if err != nil {
		return nil, "", err
	}
	out.MaxTokens = nil
	chat, _, model, err = neutral.Encode(out)
	return chat, model, err
}

// countOut is the count_tokens request sent to the provider.
type countOut struct {
	Model      string         `json:"model"`
	System     jsontext.Value `json:"system,omitempty"`
	Messages   []turn         `json:"messages"`
	Tools      []toolOut      `json:"tools,omitempty"`
	ToolChoice *toolChoiceOut `json:"tool_choice,omitempty"`
}

// ProviderCountRequest says a neutral request (CountRequest's, after the
// pipeline) as a count_tokens request, translated as ProviderRequest
// translates a message, so the provider counts the prompt a message
// would send. Generation settings are refused by name, as they cannot be
// counted: the neutral body carries none unless something other than
// CountRequest made it.
func ProviderCountRequest(chat []byte, o ProviderOptions) ([]byte, error) {
	req, err := neutral.Decode[providerChat](chat, untranslatable)
	if err != nil {
		return nil, err
	}
	for name, set := range map[string]bool{
		"max_tokens": req.MaxTokens != nil || req.MaxCompletionTokens != nil, "stream": req.Stream != nil && *req.Stream,
		"temperature": req.Temperature != nil, "top_p": req.TopP != nil, "stop": !neutral.IsNull(req.Stop),
	} {
		if set {
			return nil, neutral.Errorf(name, "not part of a token count")
		}
	}
	o.MaxTokens = 1 // required by the translation, not sent
	m, err := req.translate(o)
	if err != nil {
		return nil, err
	}
	body, err := json.Marshal(countOut{Model: m.Model, System: m.System, Messages: m.Messages, Tools: m.Tools, ToolChoice: m.ToolChoice})
	if err != nil {
		return nil, fmt.Errorf("encoding the count_tokens request: %w", err)
	}
	return body, nil
}

// TokenCount is count_tokens' answer.
type TokenCount struct {
	InputTokens int64 `json:"input_tokens"`
}

// CountResponse reads a provider's count_tokens answer: an object whose
// input_tokens is a whole number of zero or more. Other members are not
// read, and are not passed on: the gateway answers with what it checked.
func CountResponse(raw []byte) (TokenCount, error) {
	var c struct {
		InputTokens *int64 `json:"input_tokens"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return TokenCount{}, fmt.Errorf("count_tokens answer: %w", err)
	}
	if c.InputTokens == nil || *c.InputTokens < 0 {
		return TokenCount{}, fmt.Errorf("count_tokens answer: no input_tokens of zero or more")
	}
	return TokenCount{InputTokens: *c.InputTokens}, nil
}
