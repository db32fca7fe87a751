package neutral

import (
	"fmt"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// ChatRequest is the chat request, in the order a reader expects. Every
// member a dialect does not set is omitted.
type ChatRequest struct {
	Model             string         `json:"model"`
	Messages          []ChatMessage  `json:"messages"`
	MaxTokens         *int64         `json:"max_tokens,omitempty"`
	Stop              []string       `json:"stop,omitempty"`
	Temperature       *float64       `json:"temperature,omitempty"`
	TopP              *float64       `json:"top_p,omitempty"`
	Tools             []ChatTool     `json:"tools,omitempty"`
	ToolChoice        jsontext.Value `json:"tool_choice,omitempty"`
	ParallelToolCalls *bool          `json:"parallel_tool_calls,omitempty"`
	ResponseFormat    jsontext.Value `json:"response_format,omitempty"`
	ReasoningEffort   string         `json:"reasoning_effort,omitempty"`
	Verbosity         string         `json:"verbosity,omitempty"`
	Stream            bool           `json:"stream,omitzero"`
	StreamOptions     *StreamOptions `json:"stream_options,omitempty"`
	User              string         `json:"user,omitempty"`
}

// StreamOptions is the chat request's stream_options.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// ChatMessage is one message of the chat request.
type ChatMessage struct {
	Role string `json:"role"`
	// Content is a string, an array of parts, or null (an assistant turn
	// of tool calls only).
	Content    jsontext.Value `json:"content"`
	ToolCalls  []ChatToolCall `json:"tool_calls,omitempty"`
	ToolCallID string         `json:"tool_call_id,omitempty"`
}

// ChatPart is one part of a message's content.
type ChatPart struct {
	Type     string    `json:"type"`
	Text     *string   `json:"text,omitempty"`
	ImageURL *ImageURL `json:"image_url,omitempty"`
}

// ImageURL is an image part's image.
type ImageURL struct {
	URL    string `json:"url"`
	Detail string `json:"detail,omitempty"`
}

// ChatToolCall is a tool call of an assistant message.
type ChatToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function ChatFunction `json:"function"`
}

// ChatFunction is the function a tool call calls.
type ChatFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// ChatTool is a tool of the chat request.
type ChatTool struct {
	Type     string      `json:"type"`
	Function ChatToolDef `json:"function"`
}

// ChatToolDef is a function tool's definition. Parameters is omitted only
// when nil: a dialect that drops an empty schema leaves it nil.
type ChatToolDef struct {
	Name        string         `json:"name"`
	Description string         `json:"description,omitempty"`
	Parameters  jsontext.Value `json:"parameters,omitzero"`
	Strict      *bool          `json:"strict,omitempty"`
}

// Encode is a translated request's body, with what the gateway's pipeline
// needs to know of it: whether it asks for a stream, and its model.
func Encode(out *ChatRequest) (chat []byte, stream bool, model string, err error) {
	chat, err = json.Marshal(out)
	if err != nil {
		// Every string in out came from a strictly read body or is the
		// dialect's own; a failure here is a bug, not the client's.
		return nil, false, "", fmt.Errorf("encoding the chat request: %w", err)
	}
	return chat, out.Stream, out.Model, nil
}
