package responses

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"

	"github.com/sacpgw/gateway/dialect/internal/neutral"
)

// Response translates an OpenAI chat completion (JSON) into an OpenAI
// Responses response body.
//
// The completion comes from the gateway's own pipeline, which has read it
// strictly already; it is read here with json v2's defaults (no duplicate
// names, valid UTF-8) and unknown members allowed, since providers add
// fields the translation has no use for. An error means the answer cannot
// be said in the Responses form (no choice, several, a tool call without id
// or name, a missing or unknown finish_reason): a failure of the upstream,
// for a 502, never a client error.
func Response(chat []byte) ([]byte, error) {
	return ResponseWith(chat, Meta{})
}

// ResponseWith is Response for the response m describes: its id, the
// response it continues, and, when m.Keep is set, whether it was kept
// (Keep is called with the answer before the body is returned).
func ResponseWith(chat []byte, m Meta) ([]byte, error) {
	c, ch, err := neutral.ReadCompletion[apiError](chat, "Responses")
	if err != nil {
		return nil, err
	}
	status, incomplete, err := finishStatus(ch.FinishReason)
	if err != nil {
		return nil, err
	}
	suffix := m.Suffix
	if suffix == "" {
		suffix = idSuffix(c.ID, chat)
	}
	var output []any
	var parts []any
	if ch.Message.Content != nil && *ch.Message.Content != "" {
		parts = append(parts, outputText{Type: "output_text", Text: *ch.Message.Content, Annotations: []any{}})
	}
	if ch.Message.Refusal != nil && *ch.Message.Refusal != "" {
		parts = append(parts, refusalPart{Type: "refusal", Refusal: *ch.Message.Refusal})
	}
	if len(parts) > 0 {
		output = append(output, messageItem{ID: "msg_" + suffix, Type: "message", Status: "completed", Role: "assistant", Content: parts})
	}
	for i, tc := range ch.Message.ToolCalls {
		if tc.ID == "" || tc.Function.Name == "" {
			return nil, fmt.Errorf("tool call %d has no id or no name", i)
		}
		output = append(output, functionCallItem{ID: callItemID(suffix, len(output)), Type: "function_call", Status: "completed",
			Arguments: tc.Function.Arguments, CallID: tc.ID, Name: tc.Function.Name})
	}
	if status == "incomplete" && len(output) > 0 {
		// The answer was cut in its last item.
		output[len(output)-1] = withStatus(output[len(output)-1], "incomplete")
	}
	resp := newResponse(suffix, c.Created, c.Model, status, output)
	resp.IncompleteDetails = incomplete
	resp.Usage = responsesUsage(c.Usage)
	resp.PreviousResponseID, resp.Store = m.previous(), m.Store
	if m.Keep != nil {
		a, err := answerOf(resp.ID, status, output)
		if err != nil {
			return nil, err
		}
		resp.Store = m.Keep(a)
	}
	return json.Marshal(resp)
}

// completion is the part of an OpenAI chat completion, or of a stream
// chunk, that the translation reads.
type completion = neutral.Completion[apiError]

// The choices of a completion or chunk are the neutral form's.
type (
	choice   = neutral.Choice
	toolCall = neutral.ToolCall
)

type usage = neutral.Usage

// responses is the usage in the Responses API's terms: the same counts
// under other names (input_tokens, like prompt_tokens, includes the cached
// tokens; output_tokens, like completion_tokens, the reasoning tokens).
// No usage is null: a count of 0 would be a false one; so is a report
// the books refused as unreadable.
func responsesUsage(u *usage) *usageOut {
	if u == nil || !u.Known {
		return nil
	}
	out := &usageOut{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens, TotalTokens: u.PromptTokens + u.CompletionTokens}
	if cached, ok := u.Cached(); ok {
		out.InputTokensDetails.CachedTokens = cached
	}
	if reasoning, ok := u.Reasoning(); ok {
		out.OutputTokensDetails.ReasoningTokens = reasoning
	}
	return out
}

// responseOut is the Response object, with every member the SDKs require:
// those that echo the request are the API's defaults (see the package
// documentation).
type responseOut struct {
	ID                 string             `json:"id"`
	Object             string             `json:"object"`
	CreatedAt          int64              `json:"created_at"`
	Status             string             `json:"status"`
	Background         bool               `json:"background"`
	Error              *responseError     `json:"error"`
	IncompleteDetails  *incompleteDetails `json:"incomplete_details"`
	Instructions       *string            `json:"instructions"`
	MaxOutputTokens    *int64             `json:"max_output_tokens"`
	Metadata           map[string]string  `json:"metadata"`
	Model              string             `json:"model"`
	Output             []any              `json:"output"`
	ParallelToolCalls  bool               `json:"parallel_tool_calls"`
	PreviousResponseID *string            `json:"previous_response_id"`
	Reasoning          reasoningOut       `json:"reasoning"`
	Store              bool               `json:"store"`
	Temperature        float64            `json:"temperature"`
	Text               textOut            `json:"text"`
	ToolChoice         string             `json:"tool_choice"`
	Tools              []any              `json:"tools"`
	TopP               float64            `json:"top_p"`
	Truncation         string             `json:"truncation"`
	Usage              *usageOut          `json:"usage"`
	User               *string            `json:"user"`
}

type responseError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

type incompleteDetails struct {
	Reason string `json:"reason"`
}

type reasoningOut struct {
	Effort  *string `json:"effort"`
	Summary *string `json:"summary"`
}

type textOut struct {
	Format struct {
		Type string `json:"type"`
	} `json:"format"`
}

type usageOut struct {
	InputTokens        int64 `json:"input_tokens"`
	InputTokensDetails struct {
		CachedTokens int64 `json:"cached_tokens"`
	} `json:"input_tokens_details"`
	OutputTokens        int64 `json:"output_tokens"`
	OutputTokensDetails struct {
		ReasoningTokens int64 `json:"reasoning_tokens"`
	} `json:"output_tokens_details"`
	TotalTokens int64 `json:"total_tokens"`
}

type messageItem struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Status  string `json:"status"`
	Role    string `json:"role"`
	Content []any  `json:"content"`
}

type outputText struct {
	Type        string `json:"type"`
	Text        string `json:"text"`
	Annotations []any  `json:"annotations"`
}

type refusalPart struct {
	Type    string `json:"type"`
	Refusal string `json:"refusal"`
}

type functionCallItem struct {
	ID        string `json:"id"`
	Type      string `json:"type"`
	Status    string `json:"status"`
	Arguments string `json:"arguments"`
	CallID    string `json:"call_id"`
	Name      string `json:"name"`
}

// newResponse is a Response object; output nil is [].
func newResponse(suffix string, created int64, model, status string, output []any) responseOut {
	if output == nil {
		output = []any{}
	}
	r := responseOut{
		ID: "resp_" + suffix, Object: "response", CreatedAt: created, Status: status,
		Metadata: map[string]string{}, Model: model, Output: output, ParallelToolCalls: true,
		Temperature: 1, ToolChoice: "auto", Tools: []any{}, TopP: 1, Truncation: "disabled",
	}
	r.Text.Format.Type = "text"
	return r
}

func withStatus(item any, status string) any {
	switch it := item.(type) {
	case messageItem:
		it.Status = status
		return it
	case functionCallItem:
		it.Status = status
		return it
	}
	return item
}

// finishStatus maps an OpenAI finish_reason to the response's status and
// incomplete_details (see the package documentation).
func finishStatus(finish *string) (string, *incompleteDetails, error) {
	if finish == nil {
		return "", nil, errors.New("the chat completion has no finish_reason: the answer may be incomplete")
	}
	switch *finish {
	case "stop", "tool_calls", "function_call":
		return "completed", nil, nil
	case "length":
		return "incomplete", &incompleteDetails{Reason: "max_output_tokens"}, nil
	case "content_filter":
		return "incomplete", &incompleteDetails{Reason: "content_filter"}, nil
	}
	return "", nil, fmt.Errorf("unknown finish_reason %q", *finish)
}

// idSuffix is the completion's id without OpenAI's prefix, or, for a
// completion without one, a digest of its JSON (stable, so the same answer
// gets the same ids however it is sliced).
func idSuffix(id string, raw []byte) string {
	if id = strings.TrimPrefix(id, "chatcmpl-"); id != "" {
		return id
	}
	sum := sha256.Sum256(raw)
	return hex.EncodeToString(sum[:12])
}

// callItemID is the id of the function_call item at an output index.
func callItemID(suffix string, index int) string {
	return "fc_" + suffix + "_" + strconv.Itoa(index)
}
