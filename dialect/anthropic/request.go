package anthropic

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/sacpgw/gateway/dialect/internal/neutral"
)

// Request translates an Anthropic Messages request body into an OpenAI
// Chat Completions request body (the neutral form). stream reports whether
// the client asked for a stream. An error is a client error: its message
// names the field (for a 400 invalid_request_error).
func Request(body []byte) (chat []byte, stream bool, model string, err error) {
	req, err := decodeRequest(body)
	if err != nil {
		return nil, false, "", err
	}
	out, err := req.translate()
	if err != nil {
		return nil, false, "", err
	}
	return neutral.Encode(out)
}

// errorf is a client error about the field at path (see
// neutral.FieldError).
func errorf(path, format string, args ...any) error {
	return neutral.Errorf(path, format, args...)
}

// request is the Anthropic request: every member the package accepts.
// Optional members are pointers (or raw values) so that null reads as
// absent: a null asks for nothing, so accepting it drops nothing.
type request struct {
	Model         *string        `json:"model"`
	MaxTokens     *int64         `json:"max_tokens"`
	Messages      []message      `json:"messages"`
	System        *content       `json:"system"`
	Metadata      *metadata      `json:"metadata"`
	StopSequences []string       `json:"stop_sequences"`
	Stream        *bool          `json:"stream"`
	Temperature   *float64       `json:"temperature"`
	TopP          *float64       `json:"top_p"`
	TopK          jsontext.Value `json:"top_k"` // refused unless null: read only to say so
	Tools         []tool         `json:"tools"`
	ToolChoice    *toolChoice    `json:"tool_choice"`
	Thinking      *thinking      `json:"thinking"`
}

type message struct {
	Role    string   `json:"role"`
	Content *content `json:"content"`
}

// content is a string or an array of blocks (message content, system,
// tool_result content).
type content struct {
	text   *string
	blocks []block
}

// UnmarshalJSONFrom reads the union in the one pass of the decoder, with
// its options (duplicates, UTF-8, unknown members), so the blocks are read
// as strictly as the rest.
func (c *content) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	// Content nests once at most (a tool_result's content in a message's);
	// deeper is no request Anthropic accepts, so it is refused before its
	// blocks are read, whatever their depth.
	if dec.StackDepth() > maxContentDepth {
		if err := dec.SkipValue(); err != nil {
			return err
		}
		return errors.New("content nested too deeply: a tool_result cannot hold blocks with content of their own")
	}
	return neutral.StringOrArray(dec, &c.text, &c.blocks, "must be a string or an array of content blocks")
}

// maxContentDepth is the decoder's depth at a tool_result's content: the
// request object, messages, a message, its content, the block.
const maxContentDepth = 5

// block is every member of every accepted block type; which ones a type
// allows is checked after reading (blockFields), so a member that belongs
// to another type is refused, not ignored.
type block struct {
	Type         string         `json:"type"`
	Text         *string        `json:"text"`
	Citations    jsontext.Value `json:"citations"`
	Source       *imageSource   `json:"source"`
	ID           *string        `json:"id"`
	Name         *string        `json:"name"`
	Input        jsontext.Value `json:"input"`
	ToolUseID    *string        `json:"tool_use_id"`
	Content      *content       `json:"content"`
	IsError      *bool          `json:"is_error"`
	CacheControl *cacheControl  `json:"cache_control"`
	Thinking     *string        `json:"thinking"`
	Signature    *string        `json:"signature"`
	Data         *string        `json:"data"`
}

// blockFields are the members each block type allows besides type.
var blockFields = map[string][]string{
	"text":              {"text", "citations", "cache_control"},
	"image":             {"source", "cache_control"},
	"tool_use":          {"id", "name", "input", "cache_control"},
	"tool_result":       {"tool_use_id", "content", "is_error", "cache_control"},
	"thinking":          {"thinking", "signature"},
	"redacted_thinking": {"data"},
}

// present lists the members the block carries (null counts as absent).
func (b *block) present() []string {
	var p neutral.Members
	p.Add("text", b.Text != nil)
	p.Add("citations", !neutral.IsNull(b.Citations))
	p.Add("source", b.Source != nil)
	p.Add("id", b.ID != nil)
	p.Add("name", b.Name != nil)
	p.Add("input", !neutral.IsNull(b.Input))
	p.Add("tool_use_id", b.ToolUseID != nil)
	p.Add("content", b.Content != nil)
	p.Add("is_error", b.IsError != nil)
	p.Add("cache_control", b.CacheControl != nil)
	p.Add("thinking", b.Thinking != nil)
	p.Add("signature", b.Signature != nil)
	p.Add("data", b.Data != nil)
	return p
}

type imageSource struct {
	Type      string  `json:"type"`
	MediaType *string `json:"media_type"`
	Data      *string `json:"data"`
	URL       *string `json:"url"`
	FileID    *string `json:"file_id"` // read only to refuse it by name
}

// cacheControl is read to check its shape, then dropped (see the package
// documentation).
type cacheControl struct {
	Type string  `json:"type"`
	TTL  *string `json:"ttl"`
}

type metadata struct {
	UserID *string `json:"user_id"`
}

type tool struct {
	Type         *string        `json:"type"`
	Name         string         `json:"name"`
	Description  *string        `json:"description"`
	InputSchema  jsontext.Value `json:"input_schema"`
	CacheControl *cacheControl  `json:"cache_control"`
}

type toolChoice struct {
	Type                   string  `json:"type"`
	Name                   *string `json:"name"`
	DisableParallelToolUse *bool   `json:"disable_parallel_tool_use"`
}

type thinking struct {
	Type         string `json:"type"`
	BudgetTokens *int64 `json:"budget_tokens"`
}

// translate checks what the decoder cannot (required members, ranges,
// which block goes where) and builds the chat request.
func (r *request) translate() (*neutral.ChatRequest, error) {
	out := &neutral.ChatRequest{}
	if r.Model == nil || *r.Model == "" {
		return nil, errorf("model", "field required")
	}
	out.Model = *r.Model
	if r.MaxTokens == nil {
		return nil, errorf("max_tokens", "field required")
	}
	if *r.MaxTokens < 1 {
		return nil, errorf("max_tokens", "must be at least 1")
	}
	out.MaxTokens = r.MaxTokens
	if !neutral.IsNull(r.TopK) {
		return nil, errorf("top_k", "not supported: the gateway's neutral form (OpenAI Chat Completions) has no top-k sampling, and dropping it would change how the answer is sampled; use temperature or top_p")
	}
	if err := neutral.CheckSampling(r.Temperature, 1, r.TopP); err != nil {
		return nil, err
	}
	out.Temperature, out.TopP = r.Temperature, r.TopP
	for i, s := range r.StopSequences {
		if s == "" {
			return nil, errorf("stop_sequences."+strconv.Itoa(i), "must not be empty")
		}
	}
	out.Stop = r.StopSequences
	if r.Stream != nil && *r.Stream {
		// Usage comes last in an OpenAI stream only when asked for; the
		// Anthropic stream's message_delta needs it.
		out.Stream = true
		out.StreamOptions = &neutral.StreamOptions{IncludeUsage: true}
	}
	if r.Metadata != nil && r.Metadata.UserID != nil {
		out.User = *r.Metadata.UserID
	}
	if err := r.Thinking.check(); err != nil {
		return nil, err
	}

	if r.System != nil {
		text, err := systemText(r.System)
		if err != nil {
			return nil, err
		}
		if text != "" {
			out.Messages = append(out.Messages, neutral.ChatMessage{Role: "system", Content: neutral.JSONString(text)})
		}
	}
	if len(r.Messages) == 0 {
		return nil, errorf("messages", "at least one message is required")
	}
	if last := r.Messages[len(r.Messages)-1]; last.Role == "assistant" {
		return nil, errorf("messages."+strconv.Itoa(len(r.Messages)-1), "a final assistant message (a prefill to continue) is not supported: the neutral form starts a new turn instead of continuing one")
	}
	for i := range r.Messages {
		msgs, err := r.Messages[i].translate("messages." + strconv.Itoa(i))
		if err != nil {
			return nil, err
		}
		out.Messages = append(out.Messages, msgs...)
	}

	for i := range r.Tools {
		t, err := r.Tools[i].translate("tools." + strconv.Itoa(i))
		if err != nil {
			return nil, err
		}
		out.Tools = append(out.Tools, t)
	}
	if r.ToolChoice != nil {
		if len(r.Tools) == 0 {
			return nil, errorf("tool_choice", "may only be specified while providing tools")
		}
		choice, parallel, err := r.ToolChoice.translate()
		if err != nil {
			return nil, err
		}
		out.ToolChoice, out.ParallelToolCalls = choice, parallel
	}
	return out, nil
}

func (t *thinking) check() error {
	if t == nil {
		return nil
	}
	switch t.Type {
	case "enabled":
		if t.BudgetTokens == nil {
			return errorf("thinking.budget_tokens", "field required when thinking is enabled")
		}
		if *t.BudgetTokens < 1 {
			return errorf("thinking.budget_tokens", "must be at least 1")
		}
	case "disabled", "adaptive":
		if t.BudgetTokens != nil {
			return errorf("thinking.budget_tokens", "only allowed when thinking is enabled")
		}
	default:
		return errorf("thinking.type", "must be enabled, disabled or adaptive; got %q", t.Type)
	}
	return nil
}

// systemText joins the system prompt's text blocks with newlines (the
// neutral form has one system message; the blocks' boundaries carry only
// cache_control, which is dropped).
func systemText(c *content) (string, error) {
	if c.text != nil {
		return *c.text, nil
	}
	texts := make([]string, 0, len(c.blocks))
	for i := range c.blocks {
		b := &c.blocks[i]
		path := "system." + strconv.Itoa(i)
		if b.Type != "text" {
			return "", errorf(path+".type", "system blocks must be text blocks; got %q", b.Type)
		}
		if err := b.check(path); err != nil {
			return "", err
		}
		texts = append(texts, *b.Text)
	}
	return strings.Join(texts, "\n"), nil
}

// check verifies that the block's members are those of its type and that
// the ones every block of the type needs are there; it does not check
// where the block may appear (the caller does).
func (b *block) check(path string) error {
	allowed, ok := blockFields[b.Type]
	if !ok {
		if b.Type == "" {
			return errorf(path+".type", "field required")
		}
		return errorf(path+".type", "content block type %q is not supported by this gateway (accepted: text, image, tool_use, tool_result, thinking, redacted_thinking)", b.Type)
	}
	if err := neutral.CheckMembers(path, b.present(), allowed, article(b.Type)+" block"); err != nil {
		return err
	}
	if b.CacheControl != nil {
		if err := b.CacheControl.check(path + ".cache_control"); err != nil {
			return err
		}
	}
	switch b.Type {
	case "text":
		if b.Text == nil {
			return errorf(path+".text", "field required")
		}
		if *b.Text == "" {
			return errorf(path+".text", "text content blocks must be non-empty")
		}
		if !neutral.IsNull(b.Citations) && !neutral.IsEmptyArray(b.Citations) {
			return errorf(path+".citations", "citations are not supported: the neutral form has nowhere to carry them")
		}
	case "image":
		if b.Source == nil {
			return errorf(path+".source", "field required")
		}
	case "tool_use":
		if b.ID == nil || *b.ID == "" {
			return errorf(path+".id", "field required")
		}
		if b.Name == nil || *b.Name == "" {
			return errorf(path+".name", "field required")
		}
		if neutral.IsNull(b.Input) {
			return errorf(path+".input", "field required")
		}
		if b.Input.Kind() != '{' {
			return errorf(path+".input", "must be an object")
		}
	case "tool_result":
		if b.ToolUseID == nil || *b.ToolUseID == "" {
			return errorf(path+".tool_use_id", "field required")
		}
	case "thinking":
		if b.Thinking == nil {
			return errorf(path+".thinking", "field required")
		}
	case "redacted_thinking":
		if b.Data == nil {
			return errorf(path+".data", "field required")
		}
	}
	return nil
}

// article is "a" or "an" and the block type, for messages.
func article(typ string) string {
	if strings.HasPrefix(typ, "i") {
		return "an " + typ
	}
	return "a " + typ
}

func (c *cacheControl) check(path string) error {
	if c.Type != "ephemeral" {
		return errorf(path+".type", "must be ephemeral; got %q", c.Type)
	}
	if c.TTL != nil && *c.TTL != "5m" && *c.TTL != "1h" {
		return errorf(path+".ttl", "must be 5m or 1h; got %q", *c.TTL)
	}
	return nil
}

// translate turns one Anthropic message into chat messages: an assistant
// turn is one message (text and tool calls); a user turn is a tool message
// per tool_result, then one user message with the rest, if any.
func (m *message) translate(path string) ([]neutral.ChatMessage, error) {
	if m.Role != "user" && m.Role != "assistant" {
		return nil, errorf(path+".role", "must be user or assistant; got %q", m.Role)
	}
	if m.Content == nil {
		return nil, errorf(path+".content", "field required")
	}
	if m.Content.text != nil {
		if *m.Content.text == "" {
			return nil, errorf(path+".content", "must be non-empty")
		}
		return []neutral.ChatMessage{{Role: m.Role, Content: neutral.JSONString(*m.Content.text)}}, nil
	}
	if len(m.Content.blocks) == 0 {
		return nil, errorf(path+".content", "must be non-empty")
	}
	// Every block is checked before any is translated: the first block
	// that is not well formed is the answer, whatever its role.
	for i := range m.Content.blocks {
		if err := m.Content.blocks[i].check(blockPath(path, i)); err != nil {
			return nil, err
		}
	}
	if m.Role == "assistant" {
		return assistant(path, m.Content.blocks)
	}
	return user(path, m.Content.blocks)
}

// blockPath is the path of the i-th content block of the message at path.
func blockPath(path string, i int) string { return path + ".content." + strconv.Itoa(i) }

// assistant translates an assistant turn's checked blocks.
func assistant(path string, blocks []block) ([]neutral.ChatMessage, error) {
	var texts []string
	var calls []neutral.ChatToolCall
	for i := range blocks {
		b := &blocks[i]
		bpath := blockPath(path, i)
		switch b.Type {
		case "text":
			texts = append(texts, *b.Text)
		case "tool_use":
			args, err := neutral.Object(bpath+".input", b.Input)
			if err != nil {
				return nil, err
			}
			calls = append(calls, neutral.ChatToolCall{ID: *b.ID, Type: "function", Function: neutral.ChatFunction{Name: *b.Name, Arguments: string(args)}})
		case "thinking", "redacted_thinking":
			// Dropped: see the package documentation.
		default:
			return nil, errorf(bpath+".type", "%s block is not allowed in an assistant message", article(b.Type))
		}
	}
	msg := neutral.ChatMessage{Role: "assistant", Content: neutral.TextContent(texts), ToolCalls: calls}
	if len(texts) == 0 && len(calls) == 0 {
		// Only thinking: nothing the neutral form can say. Keeping an empty
		// turn would make the upstream see two user turns as one anyway.
		return nil, nil
	}
	return []neutral.ChatMessage{msg}, nil
}

// user translates a user turn's checked blocks.
func user(path string, blocks []block) ([]neutral.ChatMessage, error) {
	var out []neutral.ChatMessage
	var parts []neutral.ChatPart
	onlyText := true
	for i := range blocks {
		b := &blocks[i]
		bpath := blockPath(path, i)
		switch b.Type {
		case "tool_result":
			// A tool message must follow the assistant's tool calls
			// directly, which is also Anthropic's rule for the blocks.
			if len(parts) > 0 {
				return nil, errorf(bpath, "tool_result blocks must come before any other content in a user message")
			}
			text, err := toolResultText(bpath, b)
			if err != nil {
				return nil, err
			}
			out = append(out, neutral.ChatMessage{Role: "tool", Content: neutral.JSONString(text), ToolCallID: *b.ToolUseID})
		case "text":
			parts = append(parts, neutral.ChatPart{Type: "text", Text: b.Text})
		case "image":
			u, err := b.Source.url(bpath + ".source")
			if err != nil {
				return nil, err
			}
			parts = append(parts, neutral.ChatPart{Type: "image_url", ImageURL: &neutral.ImageURL{URL: u}})
			onlyText = false
		default:
			return nil, errorf(bpath+".type", "%s block is not allowed in a user message", article(b.Type))
		}
	}
	switch {
	case len(parts) == 0:
	case len(parts) == 1 && onlyText:
		out = append(out, neutral.ChatMessage{Role: "user", Content: neutral.JSONString(*parts[0].Text)})
	default:
		out = append(out, neutral.ChatMessage{Role: "user", Content: neutral.MustJSON(parts)})
	}
	return out, nil
}

// toolErrorPrefix marks a tool_result with is_error: true: the neutral
// form's tool message has no flag, and the model must still know.
const toolErrorPrefix = "[tool error] "

func toolResultText(path string, b *block) (string, error) {
	var text string
	if b.Content != nil {
		if b.Content.text != nil {
			text = *b.Content.text
		} else {
			texts := make([]string, 0, len(b.Content.blocks))
			for i := range b.Content.blocks {
				c := &b.Content.blocks[i]
				cpath := path + ".content." + strconv.Itoa(i)
				if err := c.check(cpath); err != nil {
					return "", err
				}
				if c.Type == "image" {
					return "", errorf(cpath+".type", "images in a tool_result are not supported: the neutral form's tool messages carry text only")
				}
				if c.Type != "text" {
					return "", errorf(cpath+".type", "%s block is not allowed in a tool_result", article(c.Type))
				}
				texts = append(texts, *c.Text)
			}
			text = strings.Join(texts, "\n")
		}
	}
	if b.IsError != nil && *b.IsError {
		text = strings.TrimSuffix(toolErrorPrefix+text, " ")
	}
	return text, nil
}

// The media types Anthropic accepts for images.
var imageTypes = []string{"image/jpeg", "image/png", "image/gif", "image/webp"}

// url is the image as the neutral form's image_url: a data: URL for base64
// data, the URL itself otherwise.
func (s *imageSource) url(path string) (string, error) {
	switch s.Type {
	case "base64":
		if s.URL != nil || s.FileID != nil {
			return "", errorf(path, "a base64 source has media_type and data only")
		}
		if s.MediaType == nil || !slices.Contains(imageTypes, *s.MediaType) {
			return "", errorf(path+".media_type", "must be one of %s", strings.Join(imageTypes, ", "))
		}
		if s.Data == nil || *s.Data == "" {
			return "", errorf(path+".data", "field required")
		}
		if !neutral.IsBase64(*s.Data) {
			return "", errorf(path+".data", "must be base64 data")
		}
		return "data:" + *s.MediaType + ";base64," + *s.Data, nil
	case "url":
		if s.MediaType != nil || s.Data != nil || s.FileID != nil {
			return "", errorf(path, "a url source has url only")
		}
		if s.URL == nil || *s.URL == "" {
			return "", errorf(path+".url", "field required")
		}
		if !neutral.IsHTTPURL(*s.URL) {
			return "", errorf(path+".url", "must be an http or https URL")
		}
		return *s.URL, nil
	case "file":
		return "", errorf(path+".type", "file sources are not supported: the gateway has no Files API")
	}
	return "", errorf(path+".type", "must be base64 or url; got %q", s.Type)
}

// maxToolName is the length Anthropic allows a tool's name.
const maxToolName = 128

func (t *tool) translate(path string) (neutral.ChatTool, error) {
	if t.Type != nil && *t.Type != "custom" {
		return neutral.ChatTool{}, errorf(path+".type", "tool type %q is not supported by this gateway (only client tools, type custom, translate to the neutral form)", *t.Type)
	}
	if !neutral.NameOK(t.Name, maxToolName) {
		return neutral.ChatTool{}, errorf(path+".name", "must match ^[a-zA-Z0-9_-]{1,128}$")
	}
	if neutral.IsNull(t.InputSchema) {
		return neutral.ChatTool{}, errorf(path+".input_schema", "field required")
	}
	schema, err := neutral.Object(path+".input_schema", t.InputSchema)
	if err != nil {
		return neutral.ChatTool{}, err
	}
	if t.CacheControl != nil {
		if err := t.CacheControl.check(path + ".cache_control"); err != nil {
			return neutral.ChatTool{}, err
		}
	}
	def := neutral.ChatToolDef{Name: t.Name, Parameters: schema}
	if t.Description != nil {
		def.Description = *t.Description
	}
	return neutral.ChatTool{Type: "function", Function: def}, nil
}

func (c *toolChoice) translate() (jsontext.Value, *bool, error) {
	var choice jsontext.Value
	switch c.Type {
	case "auto":
		choice = neutral.JSONString("auto")
	case "any":
		choice = neutral.JSONString("required")
	case "none":
		choice = neutral.JSONString("none")
		if c.DisableParallelToolUse != nil {
			return nil, nil, errorf("tool_choice.disable_parallel_tool_use", "not allowed with tool_choice none")
		}
	case "tool":
		if c.Name == nil || *c.Name == "" {
			return nil, nil, errorf("tool_choice.name", "field required for tool_choice tool")
		}
		choice = neutral.FunctionChoice(*c.Name)
	default:
		return nil, nil, errorf("tool_choice.type", "must be auto, any, tool or none; got %q", c.Type)
	}
	if c.Name != nil && c.Type != "tool" {
		return nil, nil, errorf("tool_choice.name", "only allowed with tool_choice tool")
	}
	var parallel *bool
	if c.DisableParallelToolUse != nil && *c.DisableParallelToolUse {
		f := false
		parallel = &f
	}
	return choice, parallel, nil
}
