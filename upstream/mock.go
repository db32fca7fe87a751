package upstream

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// mockBase is the API root of the built-in mock; it is never dialled.
const mockBase = "http://mock.invalid/v1"

// protocolMarker is how the mock recognises an injected SACP protocol prompt,
// so that the quickstart's protocol agent gets a valid SACP answer.
const protocolMarker = "SYSTEM PROTOCOL: RESPONSE FORMAT"

// mock is a deterministic OpenAI-compatible provider that answers in
// process: the same request always gets the same answer, with no network
// and no key, streaming included. It serves demos, the quickstart and tests,
// so it answers what clients rely on truthfully: tool calls, structured
// outputs (json_schema, json_object), embeddings as floats or base64, and
// OpenAI's 400s for what OpenAI refuses (see chat and embeddings).
type mock struct{}

func newMock(Config) (http.RoundTripper, *url.URL, error) {
	base, _ := url.Parse(mockBase)
	return mock{}, base, nil
}

type mockRequest struct {
	Model         string        `json:"model"`
	Messages      []mockMessage `json:"messages"`
	Stream        bool          `json:"stream"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
	N                 *int            `json:"n"`
	Tools             []mockTool      `json:"tools"`
	ToolChoice        json.RawMessage `json:"tool_choice"`
	ParallelToolCalls *bool           `json:"parallel_tool_calls"`
	ResponseFormat    *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
		} `json:"json_schema"`
	} `json:"response_format"`

	Input          json.RawMessage `json:"input"`
	Dimensions     *int            `json:"dimensions"`
	EncodingFormat json.RawMessage `json:"encoding_format"`
}

type mockMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	Name       string          `json:"name,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	} `json:"tool_calls,omitempty"`
}

type mockTool struct {
	Type     string `json:"type"`
	Function struct {
		Name       string          `json:"name"`
		Parameters json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// mockCall is one tool call of an answer.
type mockCall struct {
	id, name, arguments string
}

// maxMockChoices bounds "n", as OpenAI's API does.
const maxMockChoices = 128

func (m mock) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	body, err := readBody(req)
	if err != nil {
		return nil, err
	}
	p := req.URL.Path
	switch {
	case req.Method == http.MethodPost && strings.HasSuffix(p, "/chat/completions"):
		return m.chat(req, body), nil
	case req.Method == http.MethodPost && strings.HasSuffix(p, "/embeddings"):
		return m.embeddings(req, body), nil
	default:
		return mockResponse(req, http.StatusNotFound, "application/json",
			[]byte(`{"error":{"message":"mock: unknown endpoint","type":"invalid_request_error","code":"not_found","param":null}}`)), nil
	}
}

// mockBadRequest is a 400 in OpenAI's error shape, naming the parameter at
// fault as OpenAI does, so that clients' error handling can be tried.
func mockBadRequest(req *http.Request, msg, param string) *http.Response {
	return openAIError(req, http.StatusBadRequest, "invalid_request_error", "invalid_request", param, "mock: "+msg)
}

// chat answers a chat completion. What the answer is, first match wins:
//
//  1. tool calls, when the request's function tools and tool_choice call for
//     them (see pickTools); they come first even under the SACP protocol,
//     whose gateway passes tool calls through unchecked;
//  2. the SACP answer, when the injected protocol prompt is present;
//  3. a JSON document generated from response_format's json_schema (see
//     schemaGen), or a small echo object for json_object;
//  4. the tool results, when the conversation ends with tool messages;
//  5. the plain echo text.
//
// "n" choices are n copies of the one deterministic answer.
func (m mock) chat(req *http.Request, body []byte) *http.Response {
	var in mockRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return mockResponse(req, http.StatusBadRequest, "application/json",
			[]byte(`{"error":{"message":"mock: malformed JSON","type":"invalid_request_error","code":"invalid_request","param":null}}`))
	}
	n := 1
	if in.N != nil {
		if *in.N < 1 || *in.N > maxMockChoices {
			return mockBadRequest(req, fmt.Sprintf("n must be from 1 to %d", maxMockChoices), "n")
		}
		n = *in.N
	}
	var system, user string
	var allText strings.Builder
	promptChars := 0
	for _, msg := range in.Messages {
		text := contentText(msg.Content)
		promptChars += len(text)
		allText.WriteString(text + "\n")
		switch msg.Role {
		case "system", "developer":
			system += text
		case "user":
			user = text
		}
	}
	results := toolResults(in.Messages)

	calls, msg, param := in.pickTools(user, len(results) > 0)
	if msg != "" {
		return mockBadRequest(req, msg, param)
	}
	content := "This is a deterministic mock answer to: " + clip(user, 200)
	if len(results) > 0 {
		content = strings.Join(results, "\n")
	}
	if rf := in.ResponseFormat; rf != nil {
		switch rf.Type {
		case "text":
		case "json_object":
			// OpenAI refuses json_object unless a message says "JSON", so
			// that the model is told to write it; the mock refuses too, for
			// clients to meet that error before a real provider does.
			if !strings.Contains(strings.ToLower(allText.String()), "json") {
				return mockBadRequest(req, `'messages' must contain the word 'json' in some form, to use 'response_format' of type 'json_object'`, "messages")
			}
			obj := map[string]any{"echo": clip(user, 200), "words": len(strings.Fields(user))}
			if len(results) > 0 {
				obj["tool_results"] = clip(content, 200)
			}
			b, _ := json.Marshal(obj)
			content = string(b)
		case "json_schema":
			if rf.JSONSchema == nil || rf.JSONSchema.Name == "" {
				return mockBadRequest(req, "response_format json_schema needs json_schema.name", "response_format.json_schema")
			}
			b, _ := json.Marshal(newSchemaGen(rf.JSONSchema.Schema, user).document())
			content = string(b)
		default:
			return mockBadRequest(req, `response_format.type must be "text", "json_object" or "json_schema"`, "response_format.type")
		}
	}
	if strings.Contains(system, protocolMarker) {
		message := "Mock answer to: " + clip(user, 200)
		if len(results) > 0 {
			message = clip(strings.Join(results, "\n"), 400)
		}
		obj := map[string]any{
			"thought": "Mock provider: answering deterministically in the SACP format.",
			"status":  "success",
			"data":    map[string]any{"echo": clip(user, 200), "words": len(strings.Fields(user))},
			"message": message,
		}
		b, _ := json.Marshal(obj)
		content = string(b)
	}
	sum := sha256.Sum256(body)
	id := "chatcmpl-mock-" + hex.EncodeToString(sum[:6])
	completion := tokens(len(content))
	finish := "stop"
	if len(calls) > 0 {
		finish = "tool_calls"
		chars := 0
		for _, c := range calls {
			chars += len(c.name) + len(c.arguments)
		}
		completion = tokens(chars)
	}
	usage := map[string]int{"prompt_tokens": tokens(promptChars), "completion_tokens": n * completion}
	usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
	// Each choice's tool calls get their own ids, as a provider's would.
	choiceCalls := func(c int) []mockCall {
		if c == 0 || len(calls) == 0 {
			return calls
		}
		out := make([]mockCall, len(calls))
		for i, call := range calls {
			out[i] = call
			out[i].id = toolCallID(in.Messages, call.name, i, c)
		}
		return out
	}
	const created = 1700000000
	if !in.Stream {
		choices := make([]any, n)
		for c := range choices {
			message := map[string]any{"role": "assistant", "content": content}
			if cc := choiceCalls(c); len(cc) > 0 {
				list := make([]any, len(cc))
				for i, call := range cc {
					list[i] = map[string]any{"id": call.id, "type": "function",
						"function": map[string]any{"name": call.name, "arguments": call.arguments}}
				}
				message = map[string]any{"role": "assistant", "content": nil, "tool_calls": list}
			}
			choices[c] = map[string]any{"index": c, "finish_reason": finish, "message": message}
		}
		out, _ := json.Marshal(map[string]any{
			"id": id, "object": "chat.completion", "created": created, "model": in.Model,
			"choices": choices,
			"usage":   usage,
		})
		return mockResponse(req, http.StatusOK, "application/json", out)
	}
	var buf bytes.Buffer
	chunk := func(index int, delta map[string]any, finish any, u any) {
		choices := []any{}
		if delta != nil {
			choices = append(choices, map[string]any{"index": index, "delta": delta, "finish_reason": finish})
		}
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": created, "model": in.Model, "choices": choices}
		if u != nil {
			c["usage"] = u
		}
		b, _ := json.Marshal(c)
		buf.WriteString("data: ")
		buf.Write(b)
		buf.WriteString("\n\n")
	}
	for c := 0; c < n; c++ {
		cc := choiceCalls(c)
		if len(cc) == 0 {
			chunk(c, map[string]any{"role": "assistant", "content": ""}, nil, nil)
			for _, piece := range splitWords(content, 3) {
				chunk(c, map[string]any{"content": piece}, nil, nil)
			}
			chunk(c, map[string]any{}, "stop", nil)
			continue
		}
		// As OpenAI streams tool calls: a call's first delta has its index,
		// id, type, name and empty arguments; the arguments follow in
		// fragments that carry the index only.
		for i, call := range cc {
			head := map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": call.id, "type": "function",
				"function": map[string]any{"name": call.name, "arguments": ""}}}}
			if i == 0 {
				head["role"] = "assistant"
				head["content"] = nil
			}
			chunk(c, head, nil, nil)
			for _, frag := range fragments(call.arguments, 16) {
				chunk(c, map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": frag}}}}, nil, nil)
			}
		}
		chunk(c, map[string]any{}, "tool_calls", nil)
	}
	if in.StreamOptions != nil && in.StreamOptions.IncludeUsage {
		chunk(0, nil, nil, usage)
	}
	buf.WriteString("data: [DONE]\n\n")
	return mockResponse(req, http.StatusOK, "text/event-stream", buf.Bytes())
}

// toolResults are the texts answering the tool messages that end the
// conversation ("The tool <name> returned: <content>"), in order: a model
// answers those results after its tool calls. A result is named after the
// call it answers (tool_call_id), else the message's name.
func toolResults(msgs []mockMessage) []string {
	first := len(msgs)
	for first > 0 && msgs[first-1].Role == "tool" {
		first--
	}
	if first == len(msgs) {
		return nil
	}
	names := map[string]string{}
	for i := first - 1; i >= 0; i-- {
		if msgs[i].Role == "assistant" && len(msgs[i].ToolCalls) > 0 {
			for _, c := range msgs[i].ToolCalls {
				names[c.ID] = c.Function.Name
			}
			break
		}
	}
	var out []string
	for _, msg := range msgs[first:] {
		name := names[msg.ToolCallID]
		if name == "" {
			name = msg.Name
		}
		if name == "" {
			name = "unknown"
		}
		out = append(out, "The tool "+name+" returned: "+clip(contentText(msg.Content), 200))
	}
	return out
}

// pickTools decides the tool calls of the answer, or the message and
// parameter of a 400. The rule, deterministic:
//
//   - only function tools count; the others (custom tools) are ignored;
//   - tool_choice "none": no call;
//   - tool_choice naming a function: that function (a name not in tools is a
//     400, as OpenAI's);
//   - tool_choice "required": the tools the last user message mentions,
//     else the first tool (without tools, a 400);
//   - tool_choice "auto" or absent: the tools the last user message
//     mentions, unless the conversation ends with tool results, which are
//     then answered in text. A forced choice ("required" or named) calls
//     again even after tool results, as forcing means for OpenAI too;
//   - a tool is mentioned when its name appears in the message as a whole
//     word, case-insensitively ("use get_weather"; not "get_weathers"), and
//     mentioned tools are called in the order of their first mention;
//   - parallel_tool_calls false keeps the first call only.
//
// Unsupported tool_choice objects (allowed_tools, custom) count as "auto".
func (in *mockRequest) pickTools(user string, answered bool) (calls []mockCall, msg, param string) {
	var tools []mockTool
	seen := map[string]bool{}
	for _, t := range in.Tools {
		if t.Type == "function" && t.Function.Name != "" && !seen[t.Function.Name] {
			seen[t.Function.Name] = true
			tools = append(tools, t)
		}
	}
	mode, named := "auto", ""
	if len(in.ToolChoice) > 0 && string(in.ToolChoice) != "null" {
		var s string
		var obj struct {
			Type     string `json:"type"`
			Function struct {
				Name string `json:"name"`
			} `json:"function"`
		}
		switch {
		case json.Unmarshal(in.ToolChoice, &s) == nil:
			if s != "none" && s != "auto" && s != "required" {
				return nil, `tool_choice must be "none", "auto", "required" or a function`, "tool_choice"
			}
			mode = s
		case json.Unmarshal(in.ToolChoice, &obj) == nil && obj.Type == "function":
			mode, named = "function", obj.Function.Name
		}
	}
	var picked []mockTool
	switch mode {
	case "none":
		return nil, "", ""
	case "function":
		for _, t := range tools {
			if t.Function.Name == named {
				picked = []mockTool{t}
			}
		}
		if picked == nil {
			return nil, fmt.Sprintf("tool_choice names function %q, which is not in tools", named), "tool_choice"
		}
	case "required":
		if len(tools) == 0 {
			return nil, `tool_choice "required" needs function tools`, "tool_choice"
		}
		if picked = mentioned(tools, user); picked == nil {
			picked = tools[:1]
		}
	default:
		if answered {
			return nil, "", ""
		}
		picked = mentioned(tools, user)
	}
	if in.ParallelToolCalls != nil && !*in.ParallelToolCalls && len(picked) > 1 {
		picked = picked[:1]
	}
	for i, t := range picked {
		args := []byte("{}")
		// Arguments are a JSON object; parameters that are not an object
		// schema (or none) get the empty one.
		if v, ok := newSchemaGen(t.Function.Parameters, user).document().(*jsonObject); ok {
			args, _ = json.Marshal(v)
		}
		calls = append(calls, mockCall{id: toolCallID(in.Messages, t.Function.Name, i, 0), name: t.Function.Name, arguments: string(args)})
	}
	return calls, "", ""
}

// mentioned returns the tools whose names appear in text as whole words,
// in the order of their first appearance (tools order on ties).
func mentioned(tools []mockTool, text string) []mockTool {
	type hit struct {
		at   int
		tool mockTool
	}
	var hits []hit
	for _, t := range tools {
		if at := findWord(text, t.Function.Name, 0); at >= 0 {
			hits = append(hits, hit{at, t})
		}
	}
	slices.SortStableFunc(hits, func(a, b hit) int { return a.at - b.at })
	var out []mockTool
	for _, h := range hits {
		out = append(out, h.tool)
	}
	return out
}

// toolCallID derives a call's id from the conversation (whitespace does not
// count: messages are re-encoded), the function, the call's position and
// the choice, and not from "stream": a streamed answer and a JSON one to
// the same conversation carry the same ids, and a new turn gets new ones.
func toolCallID(msgs []mockMessage, name string, call, choice int) string {
	b, _ := json.Marshal(msgs)
	h := sha256.New()
	h.Write(b)
	fmt.Fprintf(h, "\x00%s\x00%d\x00%d", name, call, choice)
	return "call_" + hex.EncodeToString(h.Sum(nil)[:12])
}

// fragments cuts s into pieces of at most size bytes, on rune boundaries.
func fragments(s string, size int) []string {
	var out []string
	for len(s) > size {
		n := size
		for n > 0 && !utf8.RuneStart(s[n]) {
			n--
		}
		if n == 0 {
			n = size
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	if s != "" {
		out = append(out, s)
	}
	return out
}

func (m mock) embeddings(req *http.Request, body []byte) *http.Response {
	bad := func(msg, param string) *http.Response { return mockBadRequest(req, msg, param) }
	var in mockRequest
	if err := json.Unmarshal(body, &in); err != nil || len(in.Input) == 0 {
		return bad("want model and input", "input")
	}
	// input is a string or an array of strings, as OpenAI's; token arrays
	// are not understood, and are refused rather than embedded as "".
	var inputs []string
	if err := json.Unmarshal(in.Input, &inputs); err != nil {
		var one string
		if err := json.Unmarshal(in.Input, &one); err != nil {
			return bad("input must be a string or an array of strings", "input")
		}
		inputs = []string{one}
	}
	if len(inputs) == 0 {
		return bad("input must not be empty", "input")
	}
	dim := MockEmbeddingDim
	if in.Dimensions != nil {
		if *in.Dimensions < 1 || *in.Dimensions > maxMockDim {
			return bad(fmt.Sprintf("dimensions must be from 1 to %d", maxMockDim), "dimensions")
		}
		dim = *in.Dimensions
	}
	// "float" is the default; "base64" is what OpenAI's Node SDK asks for
	// unless told otherwise, and decodes; anything else is refused as
	// OpenAI refuses it, rather than answered in a format the client did
	// not ask for.
	format := "float"
	if len(in.EncodingFormat) > 0 && string(in.EncodingFormat) != "null" {
		if json.Unmarshal(in.EncodingFormat, &format) != nil || format != "float" && format != "base64" {
			return bad(`encoding_format must be "float" or "base64"`, "encoding_format")
		}
	}
	data := make([]any, len(inputs))
	chars := 0
	for i, s := range inputs {
		chars += len(s)
		vec := mockEmbedding(s, dim)
		for j, x := range vec {
			// Six decimals keep the answer short; the vector stays
			// normalised to within 1e-5.
			vec[j] = math.Round(x*1e6) / 1e6
		}
		var emb any = vec
		if format == "base64" {
			// The same (rounded) values as float32, little-endian, as
			// OpenAI encodes them: both formats decode to one vector.
			raw := make([]byte, 4*len(vec))
			for j, x := range vec {
				binary.LittleEndian.PutUint32(raw[4*j:], math.Float32bits(float32(x)))
			}
			emb = base64.StdEncoding.EncodeToString(raw)
		}
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": emb}
	}
	out, _ := json.Marshal(map[string]any{
		"object": "list", "data": data, "model": in.Model,
		"usage": map[string]int{"prompt_tokens": tokens(chars), "total_tokens": tokens(chars)},
	})
	return mockResponse(req, http.StatusOK, "application/json", out)
}

// MockEmbeddingDim is the length of the mock's embeddings when the request
// sets no "dimensions". 256, not fewer: an agent's profile has a hundred
// features or more, and in 64 buckets their collisions drown the signal
// (measured: 64 dimensions ranked a short query's agent second).
const MockEmbeddingDim = 256

// maxMockDim bounds "dimensions" (OpenAI's largest model has 3072).
const maxMockDim = 4096

// MockEmbedding is the mock provider's embedding of text with
// MockEmbeddingDim dimensions (unrounded), for tests that need the vectors
// the mock answers without going through it.
func MockEmbedding(text string) []float64 { return mockEmbedding(text, MockEmbeddingDim) }

// mockEmbedding is a hashed bag of features, L2-normalised, so that texts
// sharing words, or parts of words ("hotel", "hotels"), are near and others
// are not, with no model: the same text always gets the same vector.
//
// Words are the maximal runs of letters and digits of the lowercased text.
// Each word is a feature of weight 1 ("w:" + word), and so is each character
// trigram of the word padded with one space on either side (" ho", "hot",
// ..., "ls "; "c:" + trigram). A feature adds its weight
// to bucket FNV-1a-64(feature) mod dim, negated when the hash's top bit is
// set: signed hashing, so that collisions cancel out on average instead of
// making unrelated texts look alike. A text without letters or digits gets
// the zero vector.
func mockEmbedding(text string, dim int) []float64 {
	vec := make([]float64, dim)
	add := func(feature string, w float64) {
		h := fnv.New64a()
		h.Write([]byte(feature))
		sum := h.Sum64()
		if sum>>63 == 1 {
			w = -w
		}
		vec[sum%uint64(dim)] += w
	}
	words := strings.FieldsFunc(strings.ToLower(text), func(r rune) bool { return !unicode.IsLetter(r) && !unicode.IsDigit(r) })
	for _, w := range words {
		add("w:"+w, 1)
		padded := []rune(" " + w + " ")
		for i := 0; i+3 <= len(padded); i++ {
			add("c:"+string(padded[i:i+3]), 1)
		}
	}
	var norm float64
	for _, x := range vec {
		norm += x * x
	}
	if norm == 0 {
		return vec
	}
	norm = math.Sqrt(norm)
	for i := range vec {
		vec[i] /= norm
	}
	return vec
}

func mockResponse(req *http.Request, status int, ctype string, body []byte) *http.Response {
	h := http.Header{}
	h.Set("Content-Type", ctype)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	return &http.Response{
		Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
		Request: req,
	}
}

// contentText flattens a message content (a string or an array of parts).
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	_ = json.Unmarshal(raw, &parts)
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(p.Text)
	}
	return b.String()
}

func tokens(chars int) int { return (chars + 3) / 4 }

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	// Cut on a rune boundary.
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n] + "..."
}

// splitWords cuts s into pieces of n words, keeping the spaces, so that the
// concatenated pieces are exactly s.
func splitWords(s string, n int) []string {
	var out []string
	words, start := 0, 0
	for i := 0; i < len(s); i++ {
		if s[i] == ' ' {
			words++
			if words%n == 0 {
				out = append(out, s[start:i+1])
				start = i + 1
			}
		}
	}
	if start < len(s) {
		out = append(out, s[start:])
	}
	return out
}

// schemaGen builds a deterministic JSON value from a JSON Schema: the
// arguments of the mock's tool calls (from a tool's parameters) and its
// response_format json_schema answers. The supported subset, which covers
// OpenAI's strict mode and what Pydantic and Zod emit:
//
//   - type (a name or a list: the first that is not "null"), or, without
//     type, the one its keywords imply (properties: object; items: array;
//     minimum: number; else string);
//   - const, then enum: its first value, or the value the user's message
//     gives for the property (see below) when it is one of them;
//   - objects: the required properties, in properties order, then required
//     names without a schema (from additionalProperties unless it is false),
//     then optional properties up to minProperties; additionalProperties
//     false is honoured since nothing undeclared is written;
//   - arrays: one element, or minItems, at most maxItems; prefixItems, then
//     items; nested deeper than 8 levels, as few as minItems allows, so
//     that recursive schemas end; with several elements each gets a
//     different value, for uniqueItems (not a format string, a const or a
//     one-value enum);
//   - strings: the word that follows the property's name in the user's
//     message ("city Paris", "city: Paris", "city is 'New York'"), else
//     "example"; a known format (date-time, date, time, email, uri,
//     hostname, ipv4, ipv6, uuid) gets a fixed valid sample instead;
//     minLength and maxLength are met by padding or cutting;
//   - numbers and integers: 1, moved into minimum/maximum (exclusive too)
//     and onto multipleOf; booleans: true; null: null;
//   - $ref to this document ("#", "#/$defs/x", "#/definitions/x"), with
//     sibling keywords; allOf, merged; anyOf and oneOf: their first branch
//     that is not just null (a oneOf whose branches overlap can then match
//     twice).
//
// Not supported, and ignored: pattern, patternProperties, propertyNames,
// dependentRequired/Schemas, if/then/else, not, contains, uniqueItems among
// objects, maxProperties, remote $refs, $anchor and $dynamicRef. The value
// is then the best the rules above give, which may not validate.
type schemaGen struct {
	root json.RawMessage
	text string // the user's last message, for string values
}

func newSchemaGen(schema json.RawMessage, text string) *schemaGen {
	return &schemaGen{root: schema, text: text}
}

// document is the value of the whole schema.
func (g *schemaGen) document() any { return g.value(g.root, "", 0, 0) }

// maxSchemaDepth stops a self-referencing schema that the array rule
// cannot end (a required object member that is itself).
const maxSchemaDepth = 64

// schemaNode is one schema object, its keywords not yet decoded.
type schemaNode map[string]json.RawMessage

func parseSchema(raw json.RawMessage) schemaNode {
	var s schemaNode
	// A boolean schema or none at all is the empty schema.
	if json.Unmarshal(raw, &s) != nil || s == nil {
		s = schemaNode{}
	}
	return s
}

func (s schemaNode) has(k string) bool { _, ok := s[k]; return ok }

func (s schemaNode) num(k string) (float64, bool) {
	var f float64
	if raw, ok := s[k]; ok && json.Unmarshal(raw, &f) == nil {
		return f, true
	}
	return 0, false
}

func (s schemaNode) str(k string) string {
	var v string
	_ = json.Unmarshal(s[k], &v)
	return v
}

func (s schemaNode) list(k string) []json.RawMessage {
	var v []json.RawMessage
	_ = json.Unmarshal(s[k], &v)
	return v
}

func (s schemaNode) strings(k string) []string {
	var v []string
	if json.Unmarshal(s[k], &v) != nil {
		var one string
		if json.Unmarshal(s[k], &one) == nil {
			v = []string{one}
		}
	}
	return v
}

func (s schemaNode) without(keys ...string) schemaNode {
	out := make(schemaNode, len(s))
	for k, v := range s {
		if !slices.Contains(keys, k) {
			out[k] = v
		}
	}
	return out
}

// merge adds b's keywords to a's: a's win, except properties and required,
// which are joined (a's first).
func merge(a, b schemaNode) schemaNode {
	out := a.without()
	for k, v := range b {
		switch {
		case k == "properties" && a.has(k):
			obj := &jsonObject{}
			for _, src := range []json.RawMessage{a[k], v} {
				var m map[string]json.RawMessage
				_ = json.Unmarshal(src, &m)
				for _, key := range objectKeys(src) {
					if !obj.has(key) {
						obj.add(key, m[key])
					}
				}
			}
			out[k], _ = json.Marshal(obj)
		case k == "required" && a.has(k):
			req := a.strings(k)
			for _, r := range b.strings(k) {
				if !slices.Contains(req, r) {
					req = append(req, r)
				}
			}
			out[k], _ = json.Marshal(req)
		case !a.has(k):
			out[k] = v
		}
	}
	return out
}

// resolve folds $ref, allOf, anyOf and oneOf into one schema.
func (g *schemaGen) resolve(s schemaNode, depth int) schemaNode {
	for range maxSchemaDepth {
		switch {
		case s.has("$ref"):
			s = merge(s.without("$ref"), g.pointer(s.str("$ref")))
		case s.has("allOf"):
			out := s.without("allOf")
			for _, sub := range s.list("allOf") {
				if depth < maxSchemaDepth {
					out = merge(out, g.resolve(parseSchema(sub), depth+1))
				}
			}
			s = out
		case s.has("anyOf") || s.has("oneOf"):
			key := "anyOf"
			if !s.has(key) {
				key = "oneOf"
			}
			branches := s.list(key)
			var pick schemaNode
			for _, b := range branches {
				if sub := parseSchema(b); pick == nil || schemaTypeOf(pick) == "null" {
					pick = sub
				}
			}
			if pick == nil {
				pick = schemaNode{}
			}
			s = merge(s.without(key), pick)
		default:
			return s
		}
	}
	return s
}

// pointer resolves a $ref within the document; any other is the empty
// schema.
func (g *schemaGen) pointer(ref string) schemaNode {
	if ref != "#" && !strings.HasPrefix(ref, "#/") {
		return schemaNode{}
	}
	cur := g.root
	for _, tok := range strings.Split(strings.TrimPrefix(ref, "#"), "/")[1:] {
		if t, err := url.PathUnescape(tok); err == nil {
			tok = t
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		var obj map[string]json.RawMessage
		var arr []json.RawMessage
		switch {
		case json.Unmarshal(cur, &obj) == nil:
			cur = obj[tok]
		case json.Unmarshal(cur, &arr) == nil:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(arr) {
				return schemaNode{}
			}
			cur = arr[i]
		default:
			return schemaNode{}
		}
	}
	return parseSchema(cur)
}

// schemaTypeOf is the type a schema asks for, or implies.
func schemaTypeOf(s schemaNode) string {
	types := s.strings("type")
	for _, t := range types {
		if t != "null" {
			return t
		}
	}
	if len(types) > 0 {
		return "null"
	}
	switch {
	case s.has("properties") || s.has("required") || s.has("additionalProperties") || s.has("minProperties"):
		return "object"
	case s.has("items") || s.has("prefixItems") || s.has("minItems") || s.has("maxItems"):
		return "array"
	case s.has("minimum") || s.has("maximum") || s.has("exclusiveMinimum") || s.has("exclusiveMaximum") || s.has("multipleOf"):
		return "number"
	}
	return "string"
}

// value generates the value of schema raw for a property named prop ("" at
// the root and in arrays of unnamed things); variant tells sibling array
// elements apart.
func (g *schemaGen) value(raw json.RawMessage, prop string, variant, depth int) any {
	if depth > maxSchemaDepth {
		return nil
	}
	s := g.resolve(parseSchema(raw), depth)
	if c, ok := s["const"]; ok {
		return c
	}
	if enum := s.list("enum"); len(enum) > 0 {
		if w, ok := wordAfter(g.text, prop); ok {
			for _, e := range enum {
				var v string
				if json.Unmarshal(e, &v) == nil && strings.EqualFold(v, w) {
					return e
				}
			}
		}
		return enum[variant%len(enum)]
	}
	switch schemaTypeOf(s) {
	case "object":
		return g.object(s, variant, depth)
	case "array":
		return g.array(s, prop, variant, depth)
	case "integer":
		return schemaNumber(s, true, variant)
	case "number":
		return schemaNumber(s, false, variant)
	case "boolean":
		return variant%2 == 0
	case "null":
		return nil
	}
	return g.string(s, prop, variant)
}

func (g *schemaGen) object(s schemaNode, variant, depth int) *jsonObject {
	var props map[string]json.RawMessage
	_ = json.Unmarshal(s["properties"], &props)
	order := objectKeys(s["properties"])
	required := s.strings("required")
	out := &jsonObject{}
	for _, k := range order {
		if slices.Contains(required, k) {
			out.add(k, g.value(props[k], k, variant, depth+1))
		}
	}
	extra, closed := s["additionalProperties"], string(s["additionalProperties"]) == "false"
	for _, k := range required {
		if _, ok := props[k]; !ok && !out.has(k) && !closed {
			out.add(k, g.value(extra, k, variant, depth+1))
		}
	}
	if minProps, ok := s.num("minProperties"); ok {
		for _, k := range order {
			if float64(len(out.keys)) >= minProps {
				break
			}
			if !out.has(k) {
				out.add(k, g.value(props[k], k, variant, depth+1))
			}
		}
	}
	return out
}

// maxMockItems bounds a generated array whatever minItems asks.
const maxMockItems = 1024

func (g *schemaGen) array(s schemaNode, prop string, variant, depth int) []any {
	n := 1
	if depth > 8 {
		n = 0
	}
	if x, ok := s.num("minItems"); ok && x > float64(n) {
		n = int(min(x, maxMockItems))
	}
	if x, ok := s.num("maxItems"); ok && x < float64(n) {
		n = max(int(x), 0)
	}
	prefix := s.list("prefixItems")
	items := s["items"]
	if tuple := s.list("items"); len(tuple) > 0 && len(prefix) == 0 {
		// draft 4 to 2019-09 tuples: items as a list
		prefix, items = tuple, s["additionalItems"]
	}
	if string(items) == "false" {
		n = min(n, len(prefix))
	}
	out := make([]any, n)
	for i := range out {
		sub := items
		if i < len(prefix) {
			sub = prefix[i]
		}
		out[i] = g.value(sub, prop, variant+i, depth+1)
	}
	return out
}

// formatSamples are fixed valid values of the string formats the mock
// knows; the date is the mock's "created" time.
var formatSamples = map[string]string{
	"date-time": "2023-11-14T22:13:20Z",
	"date":      "2023-11-14",
	"time":      "22:13:20Z",
	"email":     "user@example.com",
	"uri":       "https://example.com/",
	"hostname":  "example.com",
	"ipv4":      "192.0.2.1",
	"ipv6":      "2001:db8::1",
	"uuid":      "00000000-0000-4000-8000-000000000000",
}

func (g *schemaGen) string(s schemaNode, prop string, variant int) string {
	v, ok := formatSamples[s.str("format")]
	if !ok {
		v = "example"
		if w, found := wordAfter(g.text, prop); found {
			v = w
		}
		if variant > 0 {
			v += "-" + strconv.Itoa(variant+1)
		}
	}
	r := []rune(v)
	if x, ok := s.num("maxLength"); ok && float64(len(r)) > x {
		r = r[:max(int(x), 0)]
	}
	if x, ok := s.num("minLength"); ok && float64(len(r)) < x {
		r = append(r, []rune(strings.Repeat("x", int(min(x, maxMockItems))-len(r)))...)
	}
	return string(r)
}

// schemaNumber is 1 (plus the variant), moved into the schema's bounds and
// onto its multipleOf when it can be.
func schemaNumber(s schemaNode, integer bool, variant int) json.Number {
	lo, hi := math.Inf(-1), math.Inf(1)
	loEx, hiEx := false, false
	if x, ok := s.num("minimum"); ok {
		lo = x
	}
	if x, ok := s.num("exclusiveMinimum"); ok && x >= lo {
		lo, loEx = x, true
	}
	if x, ok := s.num("maximum"); ok {
		hi = x
	}
	if x, ok := s.num("exclusiveMaximum"); ok && x <= hi {
		hi, hiEx = x, true
	}
	if integer {
		if loEx {
			lo = math.Floor(lo) + 1
		} else {
			lo = math.Ceil(lo)
		}
		if hiEx {
			hi = math.Ceil(hi) - 1
		} else {
			hi = math.Floor(hi)
		}
		loEx, hiEx = false, false
	}
	inside := func(v float64) bool {
		return v >= lo && v <= hi && !(loEx && v == lo) && !(hiEx && v == hi)
	}
	v := float64(1 + variant)
	if !inside(v) {
		switch {
		case v <= lo && !loEx:
			v = lo
		case v <= lo && inside(lo+1):
			v = lo + 1
		case v >= hi && !hiEx:
			v = hi
		case v >= hi && inside(hi-1):
			v = hi - 1
		default:
			v = lo + (hi-lo)/2
		}
	}
	if m, ok := s.num("multipleOf"); ok && m > 0 {
		k := math.Ceil(v / m)
		for _, c := range []float64{k, k + 1, k - 1, k - 2} {
			// Rounding to 12 digits keeps 3 × 0.1 at "0.3", which a
			// validator's exact arithmetic accepts as a multiple of 0.1.
			if x, _ := strconv.ParseFloat(strconv.FormatFloat(c*m, 'g', 12, 64), 64); inside(x) {
				v = x
				break
			}
		}
	}
	if integer && !math.IsInf(v, 0) && !math.IsNaN(v) {
		return json.Number(strconv.FormatFloat(math.Round(v), 'f', -1, 64))
	}
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return "1"
	}
	if math.Abs(v) < 1e21 {
		return json.Number(strconv.FormatFloat(v, 'f', -1, 64))
	}
	return json.Number(strconv.FormatFloat(v, 'g', -1, 64))
}

// jsonObject is a JSON object that keeps its members in insertion order,
// so that a generated document follows its schema's property order, as a
// model's answer does.
type jsonObject struct {
	keys []string
	vals []any
}

func (o *jsonObject) add(k string, v any) {
	o.keys = append(o.keys, k)
	o.vals = append(o.vals, v)
}

func (o *jsonObject) has(k string) bool { return slices.Contains(o.keys, k) }

func (o *jsonObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(o.vals[i])
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// objectKeys lists the member names of a JSON object in document order
// (once each), which decoding into a map loses.
func objectKeys(raw json.RawMessage) []string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			break
		}
		k, _ := t.(string)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			break
		}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// isWordRune tells the runes of a name ("get_weather") from separators.
func isWordRune(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) || r == '_' }

// findWord is the byte offset of the first whole-word, case-insensitive
// occurrence of word in text at or after from, or -1.
func findWord(text, word string, from int) int {
	if word == "" {
		return -1
	}
	for i := from; i+len(word) <= len(text); i++ {
		if !utf8.RuneStart(text[i]) || !strings.EqualFold(text[i:i+len(word)], word) {
			continue
		}
		before, _ := utf8.DecodeLastRuneInString(text[:i])
		after, _ := utf8.DecodeRuneInString(text[i+len(word):])
		if (i == 0 || !isWordRune(before)) && (i+len(word) == len(text) || !isWordRune(after)) {
			return i
		}
	}
	return -1
}

// linkWords may sit between a property's name and its value in a message
// ("city is Paris", "unit to celsius", "city of Paris").
var linkWords = []string{"is", "are", "of", "as", "to", "equals"}

// wordAfter is the value a message gives for a property: the word after
// its name, past separators (":", "=") and link words, or the quoted text
// there; trailing punctuation is not part of it.
func wordAfter(text, name string) (string, bool) {
	for at := findWord(text, name, 0); at >= 0; at = findWord(text, name, at+1) {
		rest := text[at+len(name):]
		for {
			rest = strings.TrimLeft(rest, " \t\r\n:=")
			f, tail, _ := strings.Cut(rest, " ")
			if slices.Contains(linkWords, strings.ToLower(f)) && tail != "" {
				rest = tail
				continue
			}
			break
		}
		if rest != "" && (rest[0] == '"' || rest[0] == '\'') {
			if end := strings.IndexByte(rest[1:], rest[0]); end > 0 {
				return rest[1 : 1+end], true
			}
		}
		f, _, _ := strings.Cut(rest, " ")
		f, _, _ = strings.Cut(f, "\n")
		if f = strings.TrimRight(f, ".,;:!?)\"'"); f != "" {
			return f, true
		}
	}
	return "", false
}
