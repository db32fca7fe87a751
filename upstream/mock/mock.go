// Package mock is the built-in mock provider: a deterministic
// OpenAI-compatible provider that answers in process, behind an upstream of
// type mock. The same request always gets the same answer, with no network
// and no key, streaming included. It serves demos, the quickstart and tests,
// so it answers what clients rely on truthfully: tool calls, structured
// outputs (json_schema, json_object), embeddings as floats or base64, and
// OpenAI's 400s for what OpenAI refuses (see chat and embeddings).
package mock

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"

	"github.com/sacpgw/gateway/upstream/internal/inproc"
)

// Base is the API root of the mock; it is never dialled.
const Base = "http://mock.invalid/v1"

// protocolMarker is how the mock recognises an injected SACP protocol prompt,
// so that the quickstart's protocol agent gets a valid SACP answer.
const protocolMarker = "SYSTEM PROTOCOL: RESPONSE FORMAT"

// Provider is the mock as an http.RoundTripper: it answers POST
// {Base}/chat/completions and {Base}/embeddings, and 404s the rest.
type Provider struct{}

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

// RoundTrip answers req in process.
func (m Provider) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := req.Context().Err(); err != nil {
		return nil, err
	}
	body, err := inproc.ReadBody(req)
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
		return inproc.Response(req, http.StatusNotFound, "application/json",
			[]byte(`{"error":{"message":"mock: unknown endpoint","type":"invalid_request_error","code":"not_found","param":null}}`)), nil
	}
}

// mockBadRequest is a 400 in OpenAI's error shape, naming the parameter at
// fault as OpenAI does, so that clients' error handling can be tried.
func mockBadRequest(req *http.Request, msg, param string) *http.Response {
	return inproc.OpenAIError(req, http.StatusBadRequest, "invalid_request_error", "invalid_request", param, "mock: "+msg)
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
func (m Provider) chat(req *http.Request, body []byte) *http.Response {
	var in mockRequest
	if err := json.Unmarshal(body, &in); err != nil {
		return inproc.Response(req, http.StatusBadRequest, "application/json",
			[]byte(`{"error":{"message":"mock: malformed JSON","type":"invalid_request_error","code":"invalid_request","param":null}}`))
	}
	n := 1
	if in.N != nil {
		if *in.N < 1 || *in.N > maxMockChoices {
			return mockBadRequest(req, fmt.Sprintf("n must be from 1 to %d", maxMockChoices), "n")
		}
		n = *in.N
	}
	p := readPrompt(in.Messages)
	results := toolResults(in.Messages)
	calls, msg, param := in.pickTools(p.user, len(results) > 0)
	if msg != "" {
		return mockBadRequest(req, msg, param)
	}
	content, msg, param := in.content(p, results)
	if msg != "" {
		return mockBadRequest(req, msg, param)
	}
	a := newAnswer(&in, body, n, content, calls, p.chars)
	if !in.Stream {
		return inproc.Response(req, http.StatusOK, "application/json", a.completion())
	}
	includeUsage := in.StreamOptions != nil && in.StreamOptions.IncludeUsage
	return inproc.Response(req, http.StatusOK, "text/event-stream", a.chunks(includeUsage))
}

// prompt is what the mock reads of a conversation: the system (and
// developer) text, the last user message, all texts, and their length.
type prompt struct {
	system, user string
	all          string
	chars        int
}

func readPrompt(msgs []mockMessage) prompt {
	var p prompt
	var all strings.Builder
	for _, msg := range msgs {
		text := contentText(msg.Content)
		p.chars += len(text)
		all.WriteString(text + "\n")
		switch msg.Role {
		case "system", "developer":
			p.system += text
		case "user":
			p.user = text
		}
	}
	p.all = all.String()
	return p
}

// content is the text of the answer (rules 2 to 5 of chat), or the message
// and parameter of a 400.
func (in *mockRequest) content(p prompt, results []string) (content, msg, param string) {
	user := p.user
	content = "This is a deterministic mock answer to: " + clip(user, 200)
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
			if !strings.Contains(strings.ToLower(p.all), "json") {
				return "", `'messages' must contain the word 'json' in some form, to use 'response_format' of type 'json_object'`, "messages"
			}
			obj := map[string]any{"echo": clip(user, 200), "words": len(strings.Fields(user))}
			if len(results) > 0 {
				obj["tool_results"] = clip(content, 200)
			}
			b, _ := json.Marshal(obj)
			content = string(b)
		case "json_schema":
			if rf.JSONSchema == nil || rf.JSONSchema.Name == "" {
				return "", "response_format json_schema needs json_schema.name", "response_format.json_schema"
			}
			b, _ := json.Marshal(newSchemaGen(rf.JSONSchema.Schema, user).document())
			content = string(b)
		default:
			return "", `response_format.type must be "text", "json_object" or "json_schema"`, "response_format.type"
		}
	}
	if strings.Contains(p.system, protocolMarker) {
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
	return content, "", ""
}

// created is every answer's "created" time: a fixed one keeps answers
// deterministic.
const created = 1700000000

// answer is one chat completion: n copies of the same content or tool
// calls, written as one JSON object or as a chunk stream.
type answer struct {
	id, model, content, finish string
	n                          int
	calls                      []mockCall
	msgs                       []mockMessage
	usage                      map[string]int
}

func newAnswer(in *mockRequest, body []byte, n int, content string, calls []mockCall, promptChars int) *answer {
	sum := sha256.Sum256(body)
	a := &answer{id: "chatcmpl-mock-" + hex.EncodeToString(sum[:6]), model: in.Model,
		content: content, finish: "stop", n: n, calls: calls, msgs: in.Messages}
	completion := tokens(len(content))
	if len(calls) > 0 {
		a.finish = "tool_calls"
		chars := 0
		for _, c := range calls {
			chars += len(c.name) + len(c.arguments)
		}
		completion = tokens(chars)
	}
	a.usage = map[string]int{"prompt_tokens": tokens(promptChars), "completion_tokens": n * completion}
	a.usage["total_tokens"] = a.usage["prompt_tokens"] + a.usage["completion_tokens"]
	return a
}

// choiceCalls are the tool calls of choice c: each choice's calls get their
// own ids, as a provider's would.
func (a *answer) choiceCalls(c int) []mockCall {
	if c == 0 || len(a.calls) == 0 {
		return a.calls
	}
	out := make([]mockCall, len(a.calls))
	for i, call := range a.calls {
		out[i] = call
		out[i].id = toolCallID(a.msgs, call.name, i, c)
	}
	return out
}

// completion is the answer as a chat.completion object.
func (a *answer) completion() []byte {
	choices := make([]any, a.n)
	for c := range choices {
		message := map[string]any{"role": "assistant", "content": a.content}
		if cc := a.choiceCalls(c); len(cc) > 0 {
			list := make([]any, len(cc))
			for i, call := range cc {
				list[i] = map[string]any{"id": call.id, "type": "function",
					"function": map[string]any{"name": call.name, "arguments": call.arguments}}
			}
			message = map[string]any{"role": "assistant", "content": nil, "tool_calls": list}
		}
		choices[c] = map[string]any{"index": c, "finish_reason": a.finish, "message": message}
	}
	out, _ := json.Marshal(map[string]any{
		"id": a.id, "object": "chat.completion", "created": created, "model": a.model,
		"choices": choices,
		"usage":   a.usage,
	})
	return out
}

// chunks is the answer as chat.completion.chunk events, choice after
// choice, then the usage when asked for, then [DONE].
func (a *answer) chunks(includeUsage bool) []byte {
	var buf bytes.Buffer
	chunk := func(index int, delta map[string]any, finish any, u any) {
		choices := []any{}
		if delta != nil {
			choices = append(choices, map[string]any{"index": index, "delta": delta, "finish_reason": finish})
		}
		c := map[string]any{"id": a.id, "object": "chat.completion.chunk", "created": created, "model": a.model, "choices": choices}
		if u != nil {
			c["usage"] = u
		}
		b, _ := json.Marshal(c)
		buf.WriteString("data: ")
		buf.Write(b)
		buf.WriteString("\n\n")
	}
	for c := 0; c < a.n; c++ {
		cc := a.choiceCalls(c)
		if len(cc) == 0 {
			chunk(c, map[string]any{"role": "assistant", "content": ""}, nil, nil)
			for _, piece := range splitWords(a.content, 3) {
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
	if includeUsage {
		chunk(0, nil, nil, a.usage)
	}
	buf.WriteString("data: [DONE]\n\n")
	return buf.Bytes()
}
