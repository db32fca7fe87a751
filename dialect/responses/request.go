package responses

import (
	"errors"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sacpgw/gateway/dialect/internal/neutral"
)

// Request translates an OpenAI Responses request body that continues no
// earlier response into an OpenAI Chat Completions request body (the
// neutral form): ReadTurn, then Turn.Chat with no history. stream reports
// whether the client asked for a stream. An error is a client error: its
// message names the field (for a 400 invalid_request_error). A request
// with previous_response_id is refused here: only a caller that keeps
// conversations (the gateway, with ReadTurn) can continue one.
func Request(body []byte) (chat []byte, stream bool, model string, err error) {
	t, err := ReadTurn(body)
	if err != nil {
		return nil, false, "", err
	}
	if t.PreviousResponseID != "" {
		return nil, false, "", errorf("previous_response_id", "not supported here: continuing a response needs the conversation the gateway keeps")
	}
	return t.Chat(nil)
}

// Turn is a Responses request read and checked: the neutral request it
// asks for, all but the conversation it continues, which only the caller
// can load (the gateway keeps conversations per agent; this package does
// no I/O).
type Turn struct {
	// PreviousResponseID is the response the request continues; "" when
	// none.
	PreviousResponseID string
	// Store is false when the request said store: false (the response is
	// not to be kept), true otherwise (the API's default).
	Store bool
	// Model and Stream are the request's (as Chat reports them), for what
	// is said of the request before it is translated whole.
	Model  string
	Stream bool

	out    *neutral.ChatRequest  // every member but the messages
	system []neutral.ChatMessage // the instructions
	input  []neutral.ChatMessage // the input items
}

// ReadTurn reads a Responses request strictly and checks all of it (see
// the package documentation); an error is the client's, naming the field.
func ReadTurn(body []byte) (*Turn, error) {
	req, err := decodeRequest(body)
	if err != nil {
		return nil, err
	}
	return req.translate()
}

// Chat is the neutral request of the turn: the instructions first, then
// the conversation it continues (nil: none), then its input. The
// instructions of earlier turns are not in prev (see Next): as in
// OpenAI's API, each request's instructions replace them.
func (t *Turn) Chat(prev *History) (chat []byte, stream bool, model string, err error) {
	out := *t.out
	var history []neutral.ChatMessage
	if prev != nil {
		history = prev.messages
	}
	out.Messages = make([]neutral.ChatMessage, 0, len(t.system)+len(history)+len(t.input))
	out.Messages = append(append(append(out.Messages, t.system...), history...), t.input...)
	return neutral.Encode(&out)
}

// errorf is a client error about the field at path (see
// neutral.FieldError).
func errorf(path, format string, args ...any) error {
	return neutral.Errorf(path, format, args...)
}

// request is the Responses request: every member the package accepts, and
// those it reads only to refuse by name. Optional members are pointers (or
// raw values) so that null reads as absent.
type request struct {
	Model              *string           `json:"model"`
	Input              *input            `json:"input"`
	Instructions       *string           `json:"instructions"`
	MaxOutputTokens    *int64            `json:"max_output_tokens"`
	Temperature        *float64          `json:"temperature"`
	TopP               *float64          `json:"top_p"`
	Tools              []tool            `json:"tools"`
	ToolChoice         *toolChoice       `json:"tool_choice"`
	ParallelToolCalls  *bool             `json:"parallel_tool_calls"`
	Text               *textConfig       `json:"text"`
	Stream             *bool             `json:"stream"`
	User               *string           `json:"user"`
	Metadata           map[string]string `json:"metadata"`
	Store              *bool             `json:"store"`
	Reasoning          *reasoning        `json:"reasoning"`
	Truncation         *string           `json:"truncation"`
	Include            []string          `json:"include"`
	PreviousResponseID *string           `json:"previous_response_id"`
	Conversation       jsontext.Value    `json:"conversation"` // refused unless null
	Background         *bool             `json:"background"`   // refused if true
}

// input is a string (one user message) or an array of input items.
type input struct {
	text  *string
	items []item
}

func (in *input) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	return neutral.StringOrArray(dec, &in.text, &in.items, "must be a string or an array of input items")
}

// item is every member of every accepted input item type; which ones a
// type allows is checked after reading (itemFields). A member no accepted
// type has is refused while reading, for the item's type when that is not
// accepted either (see refusedType).
type item struct {
	Type      *string  `json:"type"`
	Role      *string  `json:"role"`
	Content   *content `json:"content"`
	ID        *string  `json:"id"`
	Status    *string  `json:"status"`
	CallID    *string  `json:"call_id"`
	Name      *string  `json:"name"`
	Arguments *string  `json:"arguments"`
	Output    *content `json:"output"`
}

// The accepted types of input items, content parts, tools (and tool
// choices) and text formats.
var (
	itemTypes   = []string{"message", "function_call", "function_call_output"}
	partTypes   = []string{"input_text", "input_image", "output_text", "refusal"}
	toolTypes   = []string{"function"}
	formatTypes = []string{"text", "json_object", "json_schema"}
)

// itemFields are the members each item type allows besides type.
var itemFields = map[string][]string{
	"message":              {"role", "content", "id", "status"},
	"function_call":        {"call_id", "name", "arguments", "id", "status"},
	"function_call_output": {"call_id", "output", "id", "status"},
}

func (it *item) present() []string {
	var p neutral.Members
	p.Add("role", it.Role != nil)
	p.Add("content", it.Content != nil)
	p.Add("id", it.ID != nil)
	p.Add("status", it.Status != nil)
	p.Add("call_id", it.CallID != nil)
	p.Add("name", it.Name != nil)
	p.Add("arguments", it.Arguments != nil)
	p.Add("output", it.Output != nil)
	return p
}

// content is a string or an array of content parts (a message's content,
// a function_call_output's output).
type content struct {
	text  *string
	parts []part
}

func (c *content) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	return neutral.StringOrArray(dec, &c.text, &c.parts, "must be a string or an array of content parts")
}

// part is every member of every accepted content part type (partFields).
type part struct {
	Type        string         `json:"type"`
	Text        *string        `json:"text"`
	ImageURL    *string        `json:"image_url"`
	FileID      *string        `json:"file_id"`
	Detail      *string        `json:"detail"`
	Annotations jsontext.Value `json:"annotations"`
	Logprobs    jsontext.Value `json:"logprobs"`
	Refusal     *string        `json:"refusal"`
}

var partFields = map[string][]string{
	"input_text":  {"text"},
	"input_image": {"image_url", "file_id", "detail"},
	"output_text": {"text", "annotations", "logprobs"},
	"refusal":     {"refusal"},
}

func (p *part) present() []string {
	var names neutral.Members
	names.Add("text", p.Text != nil)
	names.Add("image_url", p.ImageURL != nil)
	names.Add("file_id", p.FileID != nil)
	names.Add("detail", p.Detail != nil)
	names.Add("annotations", !neutral.IsNull(p.Annotations))
	names.Add("logprobs", !neutral.IsNull(p.Logprobs))
	names.Add("refusal", p.Refusal != nil)
	return names
}

type tool struct {
	Type        string         `json:"type"`
	Name        *string        `json:"name"`
	Description *string        `json:"description"`
	Parameters  jsontext.Value `json:"parameters"`
	Strict      *bool          `json:"strict"`
}

// toolChoice is a mode (auto, none, required) or an object.
type toolChoice struct {
	mode *string
	obj  *toolChoiceObject
}

type toolChoiceObject struct {
	Type string  `json:"type"`
	Name *string `json:"name"`
}

func (c *toolChoice) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	switch dec.PeekKind() {
	case '"':
		var s string
		if err := json.UnmarshalDecode(dec, &s); err != nil {
			return err
		}
		c.mode = &s
		return nil
	case '{':
		c.obj = new(toolChoiceObject)
		return json.UnmarshalDecode(dec, c.obj)
	}
	if err := dec.SkipValue(); err != nil {
		return err
	}
	return errors.New("must be a string (auto, none, required) or an object")
}

type textConfig struct {
	Format    *textFormat `json:"format"`
	Verbosity *string     `json:"verbosity"`
}

type textFormat struct {
	Type        string         `json:"type"`
	Name        *string        `json:"name"`
	Description *string        `json:"description"`
	Schema      jsontext.Value `json:"schema"`
	Strict      *bool          `json:"strict"`
}

type reasoning struct {
	Effort          *string `json:"effort"`
	Summary         *string `json:"summary"`
	GenerateSummary *string `json:"generate_summary"`
}

// translate checks what the decoder cannot (required members, ranges,
// which part goes where) and builds the turn: the chat request but for
// its messages, the instructions and the input apart.
func (r *request) translate() (*Turn, error) {
	out := &neutral.ChatRequest{}
	t := &Turn{out: out, Store: r.Store == nil || *r.Store}
	if r.Model == nil || *r.Model == "" {
		return nil, errorf("model", "field required")
	}
	out.Model, t.Model = *r.Model, *r.Model
	for _, step := range []func(*Turn) error{r.checkState, r.translateOptions, r.translateInput, r.translateTools} {
		if err := step(t); err != nil {
			return nil, err
		}
	}
	return t, nil
}

// checkState checks server-side state first: a request that depends on
// state the gateway does not keep cannot be answered right, whatever else
// it says. A previous response is the caller's to load (Turn.Chat).
func (r *request) checkState(t *Turn) error {
	if r.PreviousResponseID != nil {
		if *r.PreviousResponseID == "" {
			return errorf("previous_response_id", "must be non-empty (or null)")
		}
		t.PreviousResponseID = *r.PreviousResponseID
	}
	if !neutral.IsNull(r.Conversation) {
		return errorf("conversation", "not supported: this gateway keeps no conversation objects; continue a response with previous_response_id, or send the whole conversation in input")
	}
	if r.Background != nil && *r.Background {
		return errorf("background", "not supported: this gateway answers in the request (or its stream) and keeps nothing to poll")
	}
	if r.Truncation != nil {
		switch *r.Truncation {
		case "disabled":
		case "auto":
			return errorf("truncation", "auto is not supported: the neutral form cannot drop input items to fit the context window; trim the input, or leave truncation disabled")
		default:
			return errorf("truncation", "must be auto or disabled; got %q", *r.Truncation)
		}
	}
	for i, v := range r.Include {
		// Encrypted reasoning is what stateless clients (store: false, as
		// the Codex CLI) ask for to carry reasoning across turns. The
		// neutral form's answers hold no reasoning items, so there is
		// none to include: asking for it changes nothing. Anything else
		// would be output the answer cannot carry.
		if v != "reasoning.encrypted_content" {
			return errorf("include."+strconv.Itoa(i), "%q is not supported: the gateway's answers carry no additional output data (reasoning.encrypted_content is accepted: there is none)", v)
		}
	}
	return nil
}

// translateOptions checks and sets the request's options: the token
// limit, sampling, streaming, user, metadata, reasoning and text format.
func (r *request) translateOptions(t *Turn) error {
	out := t.out
	if r.MaxOutputTokens != nil {
		if *r.MaxOutputTokens < 1 {
			return errorf("max_output_tokens", "must be at least 1")
		}
		out.MaxTokens = r.MaxOutputTokens
	}
	if err := neutral.CheckSampling(r.Temperature, 2, r.TopP); err != nil {
		return err
	}
	out.Temperature, out.TopP = r.Temperature, r.TopP
	if r.Stream != nil && *r.Stream {
		// Usage comes last in an OpenAI stream only when asked for; the
		// final response event needs it.
		out.Stream, t.Stream = true, true
		out.StreamOptions = &neutral.StreamOptions{IncludeUsage: true}
	}
	if r.User != nil {
		out.User = *r.User
	}
	if err := checkMetadata(r.Metadata); err != nil {
		return err
	}
	if r.Reasoning != nil {
		effort, err := r.Reasoning.translate()
		if err != nil {
			return err
		}
		out.ReasoningEffort = effort
	}
	if r.Text != nil {
		format, verbosity, err := r.Text.translate()
		if err != nil {
			return err
		}
		out.ResponseFormat, out.Verbosity = format, verbosity
	}
	return nil
}

// translateInput sets the instructions and the input of the turn.
func (r *request) translateInput(t *Turn) error {
	if r.Instructions != nil && *r.Instructions != "" {
		t.system = []neutral.ChatMessage{{Role: "system", Content: neutral.JSONString(*r.Instructions)}}
	}
	if r.Input == nil {
		return errorf("input", "field required")
	}
	if r.Input.text != nil {
		if *r.Input.text == "" {
			return errorf("input", "must be non-empty")
		}
		t.input = []neutral.ChatMessage{{Role: "user", Content: neutral.JSONString(*r.Input.text)}}
	} else {
		if len(r.Input.items) == 0 {
			return errorf("input", "at least one input item is required")
		}
		// The input is translated on its own: a function_call at its start
		// is a turn of its own, never merged into the instructions or the
		// last message of a continued conversation.
		for i := range r.Input.items {
			var err error
			t.input, err = r.Input.items[i].translate("input."+strconv.Itoa(i), t.input, 0)
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// translateTools sets the tools, the tool choice and parallel_tool_calls.
func (r *request) translateTools(t *Turn) error {
	out := t.out
	for i := range r.Tools {
		tool, err := r.Tools[i].translate("tools." + strconv.Itoa(i))
		if err != nil {
			return err
		}
		out.Tools = append(out.Tools, tool)
	}
	if r.ToolChoice != nil {
		choice, err := r.ToolChoice.translate(len(r.Tools) > 0)
		if err != nil {
			return err
		}
		out.ToolChoice = choice
	}
	if r.ParallelToolCalls != nil && len(r.Tools) > 0 {
		// Without tools it says nothing, and the neutral form refuses it.
		out.ParallelToolCalls = r.ParallelToolCalls
	}
	return nil
}

// checkMetadata holds metadata to the API's limits; it is then dropped
// (see the package documentation).
func checkMetadata(m map[string]string) error {
	if len(m) > 16 {
		return errorf("metadata", "at most 16 keys")
	}
	for k, v := range m {
		if len(k) > 64 {
			return errorf("metadata."+k, "keys are at most 64 characters")
		}
		if len(v) > 512 {
			return errorf("metadata."+k, "values are at most 512 characters")
		}
	}
	return nil
}

var efforts = []string{"none", "minimal", "low", "medium", "high", "xhigh"}

func (r *reasoning) translate() (string, error) {
	for _, s := range []struct {
		name string
		v    *string
	}{{"summary", r.Summary}, {"generate_summary", r.GenerateSummary}} {
		if s.v != nil && !slices.Contains([]string{"auto", "concise", "detailed"}, *s.v) {
			return "", errorf("reasoning."+s.name, "must be auto, concise or detailed; got %q", *s.v)
		}
	}
	if r.Effort == nil {
		return "", nil
	}
	if !slices.Contains(efforts, *r.Effort) {
		return "", errorf("reasoning.effort", "must be one of %s; got %q", strings.Join(efforts, ", "), *r.Effort)
	}
	return *r.Effort, nil
}

func (t *textConfig) translate() (jsontext.Value, string, error) {
	var verbosity string
	if t.Verbosity != nil {
		if !slices.Contains([]string{"low", "medium", "high"}, *t.Verbosity) {
			return nil, "", errorf("text.verbosity", "must be low, medium or high; got %q", *t.Verbosity)
		}
		verbosity = *t.Verbosity
	}
	f := t.Format
	if f == nil {
		return nil, verbosity, nil
	}
	if f.Type != "json_schema" {
		for _, m := range []struct {
			name string
			ok   bool
		}{{"name", f.Name != nil}, {"description", f.Description != nil}, {"schema", !neutral.IsNull(f.Schema)}, {"strict", f.Strict != nil}} {
			if m.ok {
				return nil, "", errorf("text.format."+m.name, "only allowed with format json_schema")
			}
		}
	}
	switch f.Type {
	case "text":
		// The default: the neutral form answers in text unless told.
		return nil, verbosity, nil
	case "json_object":
		return neutral.MustJSON(struct {
			Type string `json:"type"`
		}{"json_object"}), verbosity, nil
	case "json_schema":
		if f.Name == nil || *f.Name == "" {
			return nil, "", errorf("text.format.name", "field required")
		}
		if !neutral.NameOK(*f.Name, maxName) {
			return nil, "", errorf("text.format.name", "must match ^[a-zA-Z0-9_-]{1,64}$")
		}
		if neutral.IsNull(f.Schema) {
			return nil, "", errorf("text.format.schema", "field required")
		}
		schema, err := neutral.Object("text.format.schema", f.Schema)
		if err != nil {
			return nil, "", err
		}
		type jsonSchema struct {
			Name        string         `json:"name"`
			Description *string        `json:"description,omitempty"`
			Schema      jsontext.Value `json:"schema"`
			Strict      *bool          `json:"strict,omitempty"`
		}
		return neutral.MustJSON(struct {
			Type       string     `json:"type"`
			JSONSchema jsonSchema `json:"json_schema"`
		}{"json_schema", jsonSchema{Name: *f.Name, Description: f.Description, Schema: schema, Strict: f.Strict}}), verbosity, nil
	case "":
		return nil, "", errorf("text.format.type", "field required")
	}
	return nil, "", typeError("text.format.type", "text format", f.Type, formatTypes)
}

// translate appends the item to msgs as chat messages: a message item is
// one message; a function_call joins the assistant message before it (at
// index first or later), so that the calls of one turn are one message, as
// the neutral form requires; a function_call_output is a tool message.
func (it *item) translate(path string, msgs []neutral.ChatMessage, first int) ([]neutral.ChatMessage, error) {
	typ := "message"
	if it.Type != nil {
		typ = *it.Type
	}
	allowed, ok := itemFields[typ]
	if !ok {
		return nil, typeError(path+".type", "input item", typ, itemTypes)
	}
	if err := neutral.CheckMembers(path, it.present(), allowed, article(typ)+" item"); err != nil {
		return nil, err
	}
	if it.Status != nil && !slices.Contains([]string{"in_progress", "completed", "incomplete"}, *it.Status) {
		return nil, errorf(path+".status", "must be in_progress, completed or incomplete; got %q", *it.Status)
	}
	switch typ {
	case "message":
		m, err := it.message(path)
		if err != nil {
			return nil, err
		}
		return append(msgs, m), nil
	case "function_call":
		if it.CallID == nil || *it.CallID == "" {
			return nil, errorf(path+".call_id", "field required")
		}
		if it.Name == nil || *it.Name == "" {
			return nil, errorf(path+".name", "field required")
		}
		if it.Arguments == nil {
			return nil, errorf(path+".arguments", "field required")
		}
		call := neutral.ChatToolCall{ID: *it.CallID, Type: "function", Function: neutral.ChatFunction{Name: *it.Name, Arguments: *it.Arguments}}
		if n := len(msgs); n > first && msgs[n-1].Role == "assistant" {
			msgs[n-1].ToolCalls = append(msgs[n-1].ToolCalls, call)
			return msgs, nil
		}
		return append(msgs, neutral.ChatMessage{Role: "assistant", Content: jsontext.Value("null"), ToolCalls: []neutral.ChatToolCall{call}}), nil
	default: // function_call_output
		if it.CallID == nil || *it.CallID == "" {
			return nil, errorf(path+".call_id", "field required")
		}
		if it.Output == nil {
			return nil, errorf(path+".output", "field required")
		}
		var text jsontext.Value
		if it.Output.text != nil {
			text = neutral.JSONString(*it.Output.text)
		} else {
			texts := make([]string, 0, len(it.Output.parts))
			for i := range it.Output.parts {
				p := &it.Output.parts[i]
				ppath := path + ".output." + strconv.Itoa(i)
				if err := p.check(ppath); err != nil {
					return nil, err
				}
				if p.Type == "input_image" {
					return nil, errorf(ppath+".type", "images in a function_call_output are not supported: the neutral form's tool messages carry text only")
				}
				if p.Type != "input_text" {
					return nil, errorf(ppath+".type", "%s part is not allowed in a function_call_output", article(p.Type))
				}
				texts = append(texts, *p.Text)
			}
			text = neutral.TextContent(texts)
			if len(texts) == 0 {
				text = neutral.JSONString("")
			}
		}
		return append(msgs, neutral.ChatMessage{Role: "tool", Content: text, ToolCallID: *it.CallID}), nil
	}
}

// The parts each role's messages may hold.
var roleParts = map[string][]string{
	"user":      {"input_text", "input_image"},
	"system":    {"input_text"},
	"developer": {"input_text"},
	"assistant": {"output_text", "refusal"},
}

func (it *item) message(path string) (neutral.ChatMessage, error) {
	if it.Role == nil {
		return neutral.ChatMessage{}, errorf(path+".role", "field required")
	}
	role := *it.Role
	allowed, ok := roleParts[role]
	if !ok {
		return neutral.ChatMessage{}, errorf(path+".role", "must be user, assistant, system or developer; got %q", role)
	}
	if it.Content == nil {
		return neutral.ChatMessage{}, errorf(path+".content", "field required")
	}
	if it.Content.text != nil {
		if *it.Content.text == "" {
			return neutral.ChatMessage{}, errorf(path+".content", "must be non-empty")
		}
		return neutral.ChatMessage{Role: role, Content: neutral.JSONString(*it.Content.text)}, nil
	}
	if len(it.Content.parts) == 0 {
		return neutral.ChatMessage{}, errorf(path+".content", "must be non-empty")
	}
	var parts []neutral.ChatPart
	onlyText := true
	for i := range it.Content.parts {
		p := &it.Content.parts[i]
		ppath := path + ".content." + strconv.Itoa(i)
		if err := p.check(ppath); err != nil {
			return neutral.ChatMessage{}, err
		}
		if !slices.Contains(allowed, p.Type) {
			return neutral.ChatMessage{}, errorf(ppath+".type", "%s part is not allowed in %s message (accepted: %s)", article(p.Type), article(role), strings.Join(allowed, ", "))
		}
		switch p.Type {
		case "input_text", "output_text":
			parts = append(parts, neutral.ChatPart{Type: "text", Text: p.Text})
		case "refusal":
			parts = append(parts, neutral.ChatPart{Type: "text", Text: p.Refusal})
		case "input_image":
			img, err := p.image(ppath)
			if err != nil {
				return neutral.ChatMessage{}, err
			}
			parts = append(parts, neutral.ChatPart{Type: "image_url", ImageURL: img})
			onlyText = false
		}
	}
	if onlyText {
		texts := make([]string, len(parts))
		for i := range parts {
			texts[i] = *parts[i].Text
		}
		return neutral.ChatMessage{Role: role, Content: neutral.TextContent(texts)}, nil
	}
	return neutral.ChatMessage{Role: role, Content: neutral.MustJSON(parts)}, nil
}

// check verifies that the part's members are those of its type and that
// the ones every part of the type needs are there; the caller checks where
// the part may appear.
func (p *part) check(path string) error {
	allowed, ok := partFields[p.Type]
	if !ok {
		if p.Type == "" {
			return errorf(path+".type", "field required")
		}
		return typeError(path+".type", "content part", p.Type, partTypes)
	}
	if err := neutral.CheckMembers(path, p.present(), allowed, article(p.Type)+" part"); err != nil {
		return err
	}
	switch p.Type {
	case "input_text", "output_text":
		if p.Text == nil {
			return errorf(path+".text", "field required")
		}
		if !neutral.IsNull(p.Annotations) && !neutral.IsEmptyArray(p.Annotations) {
			return errorf(path+".annotations", "annotations are not supported: the neutral form has nowhere to carry them")
		}
		if !neutral.IsNull(p.Logprobs) && !neutral.IsEmptyArray(p.Logprobs) {
			return errorf(path+".logprobs", "logprobs are not supported in input: the neutral form has nowhere to carry them")
		}
	case "refusal":
		if p.Refusal == nil {
			return errorf(path+".refusal", "field required")
		}
	}
	return nil
}

// image is an input_image as the neutral form's image_url.
func (p *part) image(path string) (*neutral.ImageURL, error) {
	if p.FileID != nil {
		return nil, errorf(path+".file_id", "not supported: the gateway has no Files API; send image_url")
	}
	if p.ImageURL == nil || *p.ImageURL == "" {
		return nil, errorf(path+".image_url", "field required")
	}
	u := *p.ImageURL
	if rest, ok := strings.CutPrefix(u, "data:"); ok {
		media, data, ok := strings.Cut(rest, ";base64,")
		if !ok || !strings.HasPrefix(media, "image/") || !neutral.IsBase64(data) || data == "" {
			return nil, errorf(path+".image_url", "a data URL must be data:image/<type>;base64,<data>")
		}
	} else if !neutral.IsHTTPURL(u) {
		return nil, errorf(path+".image_url", "must be an http or https URL or a base64 data URL")
	}
	img := &neutral.ImageURL{URL: u}
	if p.Detail != nil {
		if !slices.Contains([]string{"auto", "low", "high"}, *p.Detail) {
			return nil, errorf(path+".detail", "must be auto, low or high; got %q", *p.Detail)
		}
		img.Detail = *p.Detail
	}
	return img, nil
}

func (t *tool) translate(path string) (neutral.ChatTool, error) {
	if t.Type != "function" {
		if t.Type == "" {
			return neutral.ChatTool{}, errorf(path+".type", "field required")
		}
		return neutral.ChatTool{}, typeError(path+".type", "tool", t.Type, toolTypes)
	}
	if t.Name == nil || *t.Name == "" {
		return neutral.ChatTool{}, errorf(path+".name", "field required")
	}
	if !neutral.NameOK(*t.Name, maxName) {
		return neutral.ChatTool{}, errorf(path+".name", "must match ^[a-zA-Z0-9_-]{1,64}$")
	}
	def := neutral.ChatToolDef{Name: *t.Name, Strict: t.Strict}
	if t.Description != nil {
		def.Description = *t.Description
	}
	if !neutral.IsNull(t.Parameters) {
		schema, err := neutral.Object(path+".parameters", t.Parameters)
		if err != nil {
			return neutral.ChatTool{}, err
		}
		// The chat request omits an empty schema ({}), as it omits none.
		if string(schema) != "{}" {
			def.Parameters = schema
		}
	}
	return neutral.ChatTool{Type: "function", Function: def}, nil
}

func (c *toolChoice) translate(tools bool) (jsontext.Value, error) {
	if c.mode != nil {
		switch *c.mode {
		case "auto", "none":
			if !tools {
				// Without tools both say what the answer will be anyway,
				// and the neutral form refuses a choice without tools.
				return nil, nil
			}
			return neutral.JSONString(*c.mode), nil
		case "required":
			if !tools {
				return nil, errorf("tool_choice", "required needs tools")
			}
			return neutral.JSONString("required"), nil
		}
		return nil, errorf("tool_choice", "must be auto, none, required or an object; got %q", *c.mode)
	}
	o := c.obj
	if o.Type != "function" {
		if o.Type == "" {
			return nil, errorf("tool_choice.type", "field required")
		}
		return nil, typeError("tool_choice.type", "tool choice", o.Type, toolTypes)
	}
	if o.Name == nil || *o.Name == "" {
		return nil, errorf("tool_choice.name", "field required")
	}
	if !tools {
		return nil, errorf("tool_choice", "a function choice needs tools")
	}
	return neutral.FunctionChoice(*o.Name), nil
}

// maxName is the length OpenAI allows a function's or a schema's name.
const maxName = 64

func article(typ string) string {
	switch typ[0] {
	case 'a', 'e', 'i', 'o':
		return "an " + typ
	}
	return "a " + typ
}
