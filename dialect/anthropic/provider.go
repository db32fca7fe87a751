package anthropic

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sacpgw/gateway/dialect/internal/neutral"
)

// This file is the other direction: the gateway as Anthropic's client.
// An anthropic upstream is asked in the neutral form (an OpenAI Chat
// Completions request, after every stage of the pipeline ran on it);
// ProviderRequest says it as a Messages request, ProviderResponse and
// ChunkStream say Anthropic's answer as a chat completion or chunk stream,
// and ProviderError says its errors in OpenAI's shape. The pipeline then
// reads, checks and redacts that answer like any other provider's.
//
// The request is read strictly, as a client's would be: a field the
// Messages API cannot carry is refused by name (the upstream then answers
// 400 in OpenAI's shape), never dropped, since an agent that set seed,
// logprobs or response_format relies on what they mean.

// ProviderOptions are an anthropic upstream's settings that shape its
// requests.
type ProviderOptions struct {
	// MaxTokens is max_tokens for a request without one (Anthropic
	// requires it; OpenAI's default is the model's limit).
	MaxTokens int64
	// PromptCache marks the request's stable prefix for Anthropic's prompt
	// cache: a cache breakpoint on the system prompt (which Anthropic
	// caches with the tools before it), or on the last tool when there is
	// no system prompt. Agents on OpenAI's SDKs cannot ask for it
	// themselves, and the protocol prompt the gateway injects is the same
	// on every call: what a cache is for.
	PromptCache bool
}

// ProviderRequest translates a chat completions request into a Messages
// request. includeUsage reports whether the client asked for the stream's
// usage chunk (ChunkStream writes it only then). An error is the client's:
// a 400 that names the field.
func ProviderRequest(chat []byte, o ProviderOptions) (body []byte, stream, includeUsage bool, err error) {
	req, err := neutral.Decode[providerChat](chat, untranslatable)
	if err != nil {
		return nil, false, false, err
	}
	out, err := req.translate(o)
	if err != nil {
		return nil, false, false, err
	}
	body, err = json.Marshal(out)
	if err != nil {
		return nil, false, false, fmt.Errorf("encoding the messages request: %w", err)
	}
	return body, out.Stream, req.StreamOptions != nil && req.StreamOptions.IncludeUsage, nil
}

// untranslatable names the chat request's fields that are known, but that
// the Messages API has no equivalent for, with the reason.
func untranslatable(_ []byte, p jsontext.Pointer) error {
	if p.Parent() != "" {
		return nil
	}
	name := p.LastToken()
	why := map[string]string{
		"seed":               "the Messages API has no seeded sampling",
		"logprobs":           "the Messages API returns no log probabilities",
		"top_logprobs":       "the Messages API returns no log probabilities",
		"presence_penalty":   "the Messages API has no presence penalty",
		"frequency_penalty":  "the Messages API has no frequency penalty",
		"logit_bias":         "the Messages API has no logit bias",
		"modalities":         "the Messages API answers in text only",
		"audio":              "the Messages API answers in text only",
		"prediction":         "the Messages API has no predicted outputs",
		"service_tier":       "service tiers are the provider account's, not the agent's",
		"web_search_options": "server-side web search is not offered through the gateway",
		"metadata":           "the Messages API stores no completions",
		"reasoning_effort":   "the gateway does not translate reasoning effort into Anthropic's extended thinking",
		"verbosity":          "the Messages API has no verbosity setting",
		"functions":          "the legacy functions field is not translated; use tools",
		"function_call":      "the legacy function_call field is not translated; use tool_choice",
		"input":              "an embeddings field: an anthropic upstream has no embeddings",
		"encoding_format":    "an embeddings field: an anthropic upstream has no embeddings",
		"dimensions":         "an embeddings field: an anthropic upstream has no embeddings",
	}[name]
	if why == "" {
		return nil
	}
	return neutral.Errorf(name, "not supported by this model's provider (Anthropic): %s", why)
}

// providerChat is the part of the chat request an anthropic upstream can
// carry.
type providerChat struct {
	Model               string                 `json:"model"`
	Messages            []providerMessage      `json:"messages"`
	MaxTokens           *int64                 `json:"max_tokens"`
	MaxCompletionTokens *int64                 `json:"max_completion_tokens"`
	Temperature         *float64               `json:"temperature"`
	TopP                *float64               `json:"top_p"`
	N                   *int64                 `json:"n"`
	Stop                jsontext.Value         `json:"stop"`
	Stream              *bool                  `json:"stream"`
	StreamOptions       *neutral.StreamOptions `json:"stream_options"`
	Tools               []providerTool         `json:"tools"`
	ToolChoice          jsontext.Value         `json:"tool_choice"`
	ParallelToolCalls   *bool                  `json:"parallel_tool_calls"`
	ResponseFormat      *struct {
		Type string `json:"type"`
	} `json:"response_format"`
	User  *string `json:"user"`
	Store *bool   `json:"store"`
}

type providerMessage struct {
	Role       string                 `json:"role"`
	Content    jsontext.Value         `json:"content"`
	ToolCalls  []neutral.ChatToolCall `json:"tool_calls"`
	ToolCallID string                 `json:"tool_call_id"`
	Refusal    *string                `json:"refusal"`
}

type providerTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string         `json:"name"`
		Description string         `json:"description"`
		Parameters  jsontext.Value `json:"parameters"`
		Strict      *bool          `json:"strict"`
	} `json:"function"`
}

// providerPart is one part of a chat message's content.
// The parts of other types are read to be refused by their type.
type providerPart struct {
	Type       string            `json:"type"`
	Text       *string           `json:"text"`
	ImageURL   *neutral.ImageURL `json:"image_url"`
	InputAudio jsontext.Value    `json:"input_audio"`
	File       jsontext.Value    `json:"file"`
	Refusal    *string           `json:"refusal"`
}

// messagesRequest is the Messages request sent to the provider.
type messagesRequest struct {
	Model         string         `json:"model"`
	MaxTokens     int64          `json:"max_tokens"`
	System        jsontext.Value `json:"system,omitempty"`
	Messages      []turn         `json:"messages"`
	StopSequences []string       `json:"stop_sequences,omitempty"`
	Temperature   *float64       `json:"temperature,omitempty"`
	TopP          *float64       `json:"top_p,omitempty"`
	Tools         []toolOut      `json:"tools,omitempty"`
	ToolChoice    *toolChoiceOut `json:"tool_choice,omitempty"`
	Metadata      *metadataOut   `json:"metadata,omitempty"`
	Stream        bool           `json:"stream,omitzero"`
}

// turn is one message of the Messages request.
type turn struct {
	Role    string     `json:"role"`
	Content []blockOut `json:"content"`
}

// blockOut is one content block of a turn.
type blockOut struct {
	Type      string         `json:"type"`
	Text      *string        `json:"text,omitempty"`
	Source    *sourceOut     `json:"source,omitempty"`
	ID        string         `json:"id,omitempty"`
	Name      string         `json:"name,omitempty"`
	Input     jsontext.Value `json:"input,omitzero"`
	ToolUseID string         `json:"tool_use_id,omitempty"`
	Content   []blockOut     `json:"content,omitempty"`
}

// sourceOut is an image block's source.
type sourceOut struct {
	Type      string `json:"type"`
	MediaType string `json:"media_type,omitempty"`
	Data      string `json:"data,omitempty"`
	URL       string `json:"url,omitempty"`
}

type metadataOut struct {
	UserID string `json:"user_id"`
}

type toolOut struct {
	Name         string           `json:"name"`
	Description  string           `json:"description,omitempty"`
	InputSchema  jsontext.Value   `json:"input_schema"`
	CacheControl *cacheBreakpoint `json:"cache_control,omitempty"`
}

// cacheBreakpoint is Anthropic's cache_control: the prompt up to and with
// the block that carries it is cached (five minutes, renewed on use).
type cacheBreakpoint struct {
	Type string `json:"type"`
}

// systemBlock is the system prompt as a text block, to carry a breakpoint.
type systemBlock struct {
	Type         string           `json:"type"`
	Text         string           `json:"text"`
	CacheControl *cacheBreakpoint `json:"cache_control,omitempty"`
}

type toolChoiceOut struct {
	Type                   string `json:"type"`
	Name                   string `json:"name,omitempty"`
	DisableParallelToolUse bool   `json:"disable_parallel_tool_use,omitzero"`
}

func (r *providerChat) translate(o ProviderOptions) (*messagesRequest, error) {
	out := &messagesRequest{Model: r.Model}
	if r.Model == "" {
		return nil, neutral.Errorf("model", "required")
	}
	switch {
	case r.MaxTokens != nil && r.MaxCompletionTokens != nil && *r.MaxTokens != *r.MaxCompletionTokens:
		return nil, neutral.Errorf("max_completion_tokens", "differs from max_tokens; set one")
	case r.MaxCompletionTokens != nil:
		out.MaxTokens = *r.MaxCompletionTokens
	case r.MaxTokens != nil:
		out.MaxTokens = *r.MaxTokens
	default:
		out.MaxTokens = o.MaxTokens
	}
	if out.MaxTokens < 1 {
		return nil, neutral.Errorf("max_tokens", "must be at least 1")
	}
	if r.N != nil && *r.N != 1 {
		return nil, neutral.Errorf("n", "the Messages API gives one answer per request; n must be 1")
	}
	if r.Temperature != nil {
		// Anthropic's scale ends at 1; OpenAI's 1.5 has no equivalent,
		// and clamping it would answer more deterministically than asked.
		if t := *r.Temperature; t < 0 || t > 1 || math.IsNaN(t) {
			return nil, neutral.Errorf("temperature", "must be between 0 and 1 for this model's provider (Anthropic)")
		}
		out.Temperature = r.Temperature
	}
	if r.TopP != nil {
		if p := *r.TopP; p < 0 || p > 1 || math.IsNaN(p) {
			return nil, neutral.Errorf("top_p", "must be between 0 and 1")
		}
		out.TopP = r.TopP
	}
	stops, err := stopSequences(r.Stop)
	if err != nil {
		return nil, err
	}
	out.StopSequences = stops
	out.Stream = r.Stream != nil && *r.Stream
	if r.StreamOptions != nil && !out.Stream {
		return nil, neutral.Errorf("stream_options", "only with stream: true")
	}
	if r.ResponseFormat != nil && r.ResponseFormat.Type != "text" {
		return nil, neutral.Errorf("response_format.type", "%q is not supported by this model's provider (Anthropic): the Messages API has no structured output mode", r.ResponseFormat.Type)
	}
	if r.Store != nil && *r.Store {
		return nil, neutral.Errorf("store", "the Messages API stores no completions")
	}
	if r.User != nil && *r.User != "" {
		out.Metadata = &metadataOut{UserID: *r.User}
	}
	for i := range r.Tools {
		t, err := r.Tools[i].translate("tools." + strconv.Itoa(i))
		if err != nil {
			return nil, err
		}
		out.Tools = append(out.Tools, t)
	}
	if out.ToolChoice, err = providerToolChoice(r.ToolChoice, r.ParallelToolCalls); err != nil {
		return nil, err
	}
	system, msgs, err := turns(r.Messages)
	if err != nil {
		return nil, err
	}
	out.Messages = msgs
	switch {
	case system != "" && o.PromptCache:
		out.System = neutral.MustJSON([]systemBlock{{Type: "text", Text: system, CacheControl: &cacheBreakpoint{Type: "ephemeral"}}})
	case system != "":
		out.System = neutral.JSONString(system)
	case o.PromptCache && len(out.Tools) > 0:
		out.Tools[len(out.Tools)-1].CacheControl = &cacheBreakpoint{Type: "ephemeral"}
	}
	return out, nil
}

// stopSequences reads stop: a string, an array of strings, or null.
func stopSequences(v jsontext.Value) ([]string, error) {
	if neutral.IsNull(v) {
		return nil, nil
	}
	var one string
	if json.Unmarshal(v, &one) == nil {
		return []string{one}, nil
	}
	var many []string
	if err := json.Unmarshal(v, &many); err != nil {
		return nil, neutral.Errorf("stop", "expected a string or an array of strings")
	}
	return many, nil
}

func (t *providerTool) translate(path string) (toolOut, error) {
	if t.Type != "function" {
		return toolOut{}, neutral.Errorf(path+".type", "only function tools can be translated, not %q", t.Type)
	}
	f := &t.Function
	if f.Name == "" {
		return toolOut{}, neutral.Errorf(path+".function.name", "required")
	}
	if f.Strict != nil && *f.Strict {
		// Strict mode promises arguments that fit the schema; the Messages
		// API makes no such promise, and the agent would not know.
		return toolOut{}, neutral.Errorf(path+".function.strict", "strict function calling is not supported by this model's provider (Anthropic)")
	}
	schema := f.Parameters
	switch {
	case neutral.IsNull(schema):
		schema = jsontext.Value(`{"type":"object","properties":{}}`)
	case schema.Kind() != '{':
		return toolOut{}, neutral.Errorf(path+".function.parameters", "must be a JSON Schema object")
	}
	return toolOut{Name: f.Name, Description: f.Description, InputSchema: schema}, nil
}

// providerToolChoice translates tool_choice and parallel_tool_calls.
func providerToolChoice(v jsontext.Value, parallel *bool) (*toolChoiceOut, error) {
	var out *toolChoiceOut
	if !neutral.IsNull(v) {
		var s string
		if json.Unmarshal(v, &s) == nil {
			switch s {
			case "auto":
				out = &toolChoiceOut{Type: "auto"}
			case "required":
				out = &toolChoiceOut{Type: "any"}
			case "none":
				out = &toolChoiceOut{Type: "none"}
			default:
				return nil, neutral.Errorf("tool_choice", "want auto, required, none or a function, not %q", s)
			}
		} else {
			var fn struct {
				Type     string `json:"type"`
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			}
			if err := json.Unmarshal(v, &fn, json.RejectUnknownMembers(true)); err != nil || fn.Type != "function" || fn.Function.Name == "" {
				return nil, neutral.Errorf("tool_choice", "want auto, required, none or {\"type\":\"function\",\"function\":{\"name\":...}}")
			}
			out = &toolChoiceOut{Type: "tool", Name: fn.Function.Name}
		}
	}
	if parallel != nil && !*parallel {
		if out == nil {
			out = &toolChoiceOut{Type: "auto"}
		}
		if out.Type != "none" {
			out.DisableParallelToolUse = true
		}
	}
	return out, nil
}

// turns translates the conversation. The leading system and developer
// messages become the system prompt (the gateway's protocol prompt is
// among them); one later in the conversation is refused, as the Messages
// API takes instructions only before it. Consecutive messages of one role
// become one turn (tool results first, as Anthropic requires them to
// follow the tool calls directly).
func turns(msgs []providerMessage) (string, []turn, error) {
	if len(msgs) == 0 {
		return "", nil, neutral.Errorf("messages", "at least one message is required")
	}
	var system []string
	i := 0
	for ; i < len(msgs) && (msgs[i].Role == "system" || msgs[i].Role == "developer"); i++ {
		text, err := plainText("messages."+strconv.Itoa(i)+".content", msgs[i].Content)
		if err != nil {
			return "", nil, err
		}
		if text != "" {
			system = append(system, text)
		}
	}
	var out []turn
	add := func(role string, blocks ...blockOut) {
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			return
		}
		out = append(out, turn{Role: role, Content: blocks})
	}
	for ; i < len(msgs); i++ {
		m := &msgs[i]
		path := "messages." + strconv.Itoa(i)
		if m.Refusal != nil && m.Role != "assistant" {
			return "", nil, neutral.Errorf(path+".refusal", "only an assistant message has a refusal")
		}
		if m.ToolCallID != "" && m.Role != "tool" {
			return "", nil, neutral.Errorf(path+".tool_call_id", "only a tool message has a tool_call_id")
		}
		if len(m.ToolCalls) > 0 && m.Role != "assistant" {
			return "", nil, neutral.Errorf(path+".tool_calls", "only an assistant message has tool calls")
		}
		switch m.Role {
		case "system", "developer":
			return "", nil, neutral.Errorf(path+".role", "a %s message after the conversation began cannot be translated: the Messages API takes instructions only before it", m.Role)
		case "user":
			blocks, err := userBlocks(path+".content", m.Content)
			if err != nil {
				return "", nil, err
			}
			if len(blocks) > 0 {
				add("user", blocks...)
			}
		case "assistant":
			blocks, err := assistantBlocks(path, m)
			if err != nil {
				return "", nil, err
			}
			// An empty assistant turn (a re-ask quoting an empty answer)
			// says nothing, and Anthropic refuses empty content.
			if len(blocks) > 0 {
				add("assistant", blocks...)
			}
		case "tool":
			if m.ToolCallID == "" {
				return "", nil, neutral.Errorf(path+".tool_call_id", "required")
			}
			text, err := plainText(path+".content", m.Content)
			if err != nil {
				return "", nil, err
			}
			// The result as one text block, as Anthropic's SDKs send it;
			// an empty one has none (Anthropic refuses empty text).
			result := blockOut{Type: "tool_result", ToolUseID: m.ToolCallID}
			if text != "" {
				result.Content = []blockOut{{Type: "text", Text: &text}}
			}
			add("user", result)
		default:
			return "", nil, neutral.Errorf(path+".role", "want system, developer, user, assistant or tool, not %q", m.Role)
		}
	}
	if len(out) == 0 {
		return "", nil, neutral.Errorf("messages", "no user message to answer")
	}
	if out[len(out)-1].Role == "assistant" {
		// Anthropic would continue that text; a chat client asks for a
		// new turn and would glue the two together.
		return "", nil, neutral.Errorf("messages", "the last message is the assistant's: this model's provider (Anthropic) would continue it rather than answer")
	}
	return strings.Join(system, "\n\n"), out, nil
}

// plainText is a content that must be text: a string, or text parts
// (joined), or null.
func plainText(path string, v jsontext.Value) (string, error) {
	if neutral.IsNull(v) {
		return "", nil
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		return s, nil
	}
	var parts []providerPart
	if err := json.Unmarshal(v, &parts, json.RejectUnknownMembers(true)); err != nil {
		return "", neutral.Errorf(path, "expected a string or text parts")
	}
	texts := make([]string, 0, len(parts))
	for j, p := range parts {
		if p.Type != "text" || p.Text == nil || p.ImageURL != nil || p.InputAudio != nil || p.File != nil || p.Refusal != nil {
			return "", neutral.Errorf(path+"."+strconv.Itoa(j), "only text parts can be translated here")
		}
		texts = append(texts, *p.Text)
	}
	return strings.Join(texts, "\n"), nil
}

// userBlocks translates a user message's content: text and images.
func userBlocks(path string, v jsontext.Value) ([]blockOut, error) {
	if neutral.IsNull(v) {
		return nil, neutral.Errorf(path, "a user message needs content")
	}
	var s string
	if json.Unmarshal(v, &s) == nil {
		if s == "" {
			return nil, nil
		}
		return []blockOut{{Type: "text", Text: &s}}, nil
	}
	var parts []providerPart
	if err := json.Unmarshal(v, &parts, json.RejectUnknownMembers(true)); err != nil {
		return nil, neutral.Errorf(path, "expected a string or content parts (text, image_url)")
	}
	var out []blockOut
	for j, p := range parts {
		pp := path + "." + strconv.Itoa(j)
		switch {
		case p.InputAudio != nil || p.File != nil || p.Refusal != nil:
			return nil, neutral.Errorf(pp+".type", "only text and image_url parts can be translated, not %q", p.Type)
		case p.Type == "text" && p.Text != nil && p.ImageURL == nil:
			if *p.Text != "" {
				out = append(out, blockOut{Type: "text", Text: p.Text})
			}
		case p.Type == "image_url" && p.ImageURL != nil && p.Text == nil:
			src, err := imageFromURL(pp+".image_url.url", p.ImageURL.URL)
			if err != nil {
				return nil, err
			}
			out = append(out, blockOut{Type: "image", Source: src})
		default:
			return nil, neutral.Errorf(pp+".type", "only text and image_url parts can be translated, not %q", p.Type)
		}
	}
	return out, nil
}

// imageFromURL is an image part's URL as Anthropic's image source: a
// base64 data: URL of a type Anthropic reads, or an http(s) URL.
func imageFromURL(path, u string) (*sourceOut, error) {
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		media, data, ok := strings.Cut(rest, ";base64,")
		switch {
		case !ok:
			return nil, neutral.Errorf(path, "a data: URL must be base64")
		case media != "image/jpeg" && media != "image/png" && media != "image/gif" && media != "image/webp":
			return nil, neutral.Errorf(path, "image type %q: want image/jpeg, image/png, image/gif or image/webp", media)
		case !neutral.IsBase64(data):
			return nil, neutral.Errorf(path, "the data: URL's data is not base64")
		}
		return &sourceOut{Type: "base64", MediaType: media, Data: data}, nil
	}
	if strings.HasPrefix(u, "https://") || strings.HasPrefix(u, "http://") {
		return &sourceOut{Type: "url", URL: u}, nil
	}
	return nil, neutral.Errorf(path, "want a data: URL or an http(s) URL")
}

// assistantBlocks translates an assistant message: its text, then its
// tool calls as tool_use blocks.
func assistantBlocks(path string, m *providerMessage) ([]blockOut, error) {
	text, err := plainText(path+".content", m.Content)
	if err != nil {
		return nil, err
	}
	if m.Refusal != nil && *m.Refusal != "" {
		if text != "" {
			text += "\n"
		}
		text += *m.Refusal
	}
	var out []blockOut
	if text != "" {
		out = append(out, blockOut{Type: "text", Text: &text})
	}
	for j, tc := range m.ToolCalls {
		tp := path + ".tool_calls." + strconv.Itoa(j)
		if tc.Type != "function" || tc.ID == "" || tc.Function.Name == "" {
			return nil, neutral.Errorf(tp, "a tool call needs type function, an id and a name")
		}
		input := jsontext.Value(`{}`)
		if strings.TrimSpace(tc.Function.Arguments) != "" {
			input = jsontext.Value(tc.Function.Arguments)
			if err := input.Compact(); err != nil || input.Kind() != '{' {
				return nil, neutral.Errorf(tp+".function.arguments", "must be a JSON object (Anthropic's tool input is one)")
			}
		}
		out = append(out, blockOut{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: input})
	}
	return out, nil
}
