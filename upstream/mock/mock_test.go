package mock_test

import (
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/openai/openai-go"
	"github.com/openai/openai-go/option"
	"github.com/openai/openai-go/shared"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/sacpgw/gateway/upstream"
	"github.com/sacpgw/gateway/upstream/mock"
)

// callMock sends one request to the mock as the gateway does, through the
// upstream's (retrying) transport.
func callMock(t *testing.T, path, body string) (int, string) {
	t.Helper()
	s, err := upstream.New([]upstream.Config{{Name: "mock", Type: "mock", Models: []string{"*"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	u := s.Route("m")
	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, u.Target(path, "").String(), strings.NewReader(body))
	resp, err := u.Transport.RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// mockClient is the official OpenAI Go client talking to the mock.
func mockClient(t *testing.T) openai.Client {
	t.Helper()
	s, err := upstream.New([]upstream.Config{{Name: "mock", Type: "mock", Models: []string{"*"}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return openai.NewClient(option.WithBaseURL("http://mock.invalid/v1/"), option.WithAPIKey("test"),
		option.WithHTTPClient(&http.Client{Transport: s.Route("m").Transport}), option.WithMaxRetries(0))
}

// decodeBase64Embedding reads OpenAI's base64 embedding: little-endian
// float32s.
func decodeBase64Embedding(t *testing.T, s string) []float32 {
	t.Helper()
	raw, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(raw)%4 != 0 {
		t.Fatalf("base64 embedding %q: %v, %d bytes", s, err, len(raw))
	}
	out := make([]float32, len(raw)/4)
	for i := range out {
		out[i] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*i:]))
	}
	return out
}

func TestMockEmbeddingsBase64(t *testing.T) {
	type answer struct {
		Data []struct {
			Index     int             `json:"index"`
			Embedding json.RawMessage `json:"embedding"`
		} `json:"data"`
		Usage struct {
			TotalTokens int `json:"total_tokens"`
		} `json:"usage"`
	}
	embed := func(body string) answer {
		t.Helper()
		code, b := callMock(t, "/v1/embeddings", body)
		var a answer
		if err := json.Unmarshal([]byte(b), &a); code != 200 || err != nil {
			t.Fatalf("%s: %d %s %v", body, code, b, err)
		}
		return a
	}
	cases := []struct {
		name, fields string
		n, dim       int
	}{
		{"one string", `"input":"find hotels in paris"`, 1, mock.EmbeddingDim},
		{"array", `"input":["a","b b","ünïcode 東京"]`, 3, mock.EmbeddingDim},
		{"dimensions", `"input":"x y z","dimensions":8`, 1, 8},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			float := embed(`{"model":"m",` + tc.fields + `}`)
			explicit := embed(`{"model":"m","encoding_format":"float",` + tc.fields + `}`)
			null := embed(`{"model":"m","encoding_format":null,` + tc.fields + `}`)
			b64 := embed(`{"model":"m","encoding_format":"base64",` + tc.fields + `}`)
			if len(float.Data) != tc.n || len(b64.Data) != tc.n || b64.Usage != float.Usage {
				t.Fatalf("float %+v, base64 %+v", float, b64)
			}
			for i := range float.Data {
				if string(explicit.Data[i].Embedding) != string(float.Data[i].Embedding) || string(null.Data[i].Embedding) != string(float.Data[i].Embedding) {
					t.Errorf("data[%d]: float is not the default", i)
				}
				var fv []float64
				var s string
				if err := json.Unmarshal(float.Data[i].Embedding, &fv); err != nil {
					t.Fatalf("float data[%d]: %v", i, err)
				}
				if err := json.Unmarshal(b64.Data[i].Embedding, &s); err != nil {
					t.Fatalf("base64 data[%d] is not a string: %s", i, b64.Data[i].Embedding)
				}
				bv := decodeBase64Embedding(t, s)
				if len(bv) != tc.dim || len(fv) != tc.dim || b64.Data[i].Index != i {
					t.Fatalf("data[%d]: %d float32s, %d floats, want %d", i, len(bv), len(fv), tc.dim)
				}
				var norm float64
				for j := range fv {
					// float32 both ways, as a client storing float32 sees them.
					if float32(fv[j]) != bv[j] {
						t.Fatalf("data[%d][%d]: float %v, base64 %v", i, j, fv[j], bv[j])
					}
					norm += float64(bv[j]) * float64(bv[j])
				}
				if math.Abs(norm-1) > 1e-4 {
					t.Errorf("data[%d]: |v|² = %v", i, norm)
				}
			}
		})
	}

	for _, format := range []string{`""`, `"FLOAT"`, `"binary"`, `1`, `["base64"]`} {
		code, b := callMock(t, "/v1/embeddings", `{"model":"m","input":"x","encoding_format":`+format+`}`)
		var e struct {
			Error struct{ Type, Param string }
		}
		if json.Unmarshal([]byte(b), &e); code != 400 || e.Error.Type != "invalid_request_error" || e.Error.Param != "encoding_format" {
			t.Errorf("encoding_format %s: %d %s, want a 400 naming encoding_format", format, code, b)
		}
	}
}

// The official client asks for base64 and reads the string itself (the Go
// SDK does not decode it; the Node SDK does, the same way).
func TestMockEmbeddingsOpenAIClient(t *testing.T) {
	client := mockClient(t)
	inputs := []string{"hotel search in Paris", "review code changes"}
	ask := func(format openai.EmbeddingNewParamsEncodingFormat) *openai.CreateEmbeddingResponse {
		t.Helper()
		resp, err := client.Embeddings.New(context.Background(), openai.EmbeddingNewParams{
			Model: "mock-embed", Input: openai.EmbeddingNewParamsInputUnion{OfArrayOfStrings: inputs}, EncodingFormat: format,
		})
		if err != nil || len(resp.Data) != len(inputs) {
			t.Fatalf("%s: %v %+v", format, err, resp)
		}
		return resp
	}
	float := ask(openai.EmbeddingNewParamsEncodingFormatFloat)
	b64 := ask(openai.EmbeddingNewParamsEncodingFormatBase64)
	for i := range inputs {
		var s string
		if err := json.Unmarshal([]byte(b64.Data[i].JSON.Embedding.Raw()), &s); err != nil {
			t.Fatalf("data[%d]: %q is not a base64 string", i, b64.Data[i].JSON.Embedding.Raw())
		}
		got := decodeBase64Embedding(t, s)
		want := float.Data[i].Embedding
		if len(got) != mock.EmbeddingDim || len(want) != mock.EmbeddingDim {
			t.Fatalf("data[%d]: %d and %d dimensions", i, len(got), len(want))
		}
		for j := range want {
			if float32(want[j]) != got[j] {
				t.Fatalf("data[%d][%d]: float %v, base64 %v", i, j, want[j], got[j])
			}
		}
	}
}

const mockTools = `[
 {"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{
   "city":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]},"days":{"type":"integer","minimum":1}},
   "required":["city","unit"],"additionalProperties":false}}},
 {"type":"function","function":{"name":"search_hotels","parameters":{"type":"object","properties":{
   "query":{"type":"string"},"max_results":{"type":"integer","minimum":5},
   "filters":{"type":"object","properties":{"stars":{"type":"array","items":{"type":"integer"},"minItems":2,"uniqueItems":true},"pool":{"type":"boolean"}},"required":["stars","pool"]}},
   "required":["query","max_results","filters"]}}},
 {"type":"function","function":{"name":"ping"}}
]`

// chatAnswer is the part of a chat completion the tests read.
type chatAnswer struct {
	ID      string `json:"id"`
	Choices []struct {
		Index        int    `json:"index"`
		FinishReason string `json:"finish_reason"`
		Message      struct {
			Role      string          `json:"role"`
			Content   json.RawMessage `json:"content"`
			ToolCalls []wireToolCall  `json:"tool_calls"`
		} `json:"message"`
	} `json:"choices"`
	Usage struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		TotalTokens      int `json:"total_tokens"`
	} `json:"usage"`
}

type wireToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

func chat(t *testing.T, body string) chatAnswer {
	t.Helper()
	code, b := callMock(t, "/v1/chat/completions", body)
	var a chatAnswer
	if err := json.Unmarshal([]byte(b), &a); code != 200 || err != nil || len(a.Choices) == 0 {
		t.Fatalf("%s: %d %s %v", body, code, b, err)
	}
	return a
}

func (a chatAnswer) content(t *testing.T, i int) string {
	t.Helper()
	var s string
	if err := json.Unmarshal(a.Choices[i].Message.Content, &s); err != nil {
		t.Fatalf("choices[%d] content %s is not a string", i, a.Choices[i].Message.Content)
	}
	return s
}

// streamed is a stream put back together per choice, as a client does.
type streamed struct {
	content map[int]string
	finish  map[int]string
	calls   map[int][]wireToolCall
	usage   json.RawMessage
	done    bool
}

// assemble reads a stream; it fails the test where the stream breaks
// OpenAI's rules for tool call deltas: a call's first delta has id, type,
// name and empty arguments; the next ones only the index and arguments.
func assemble(t *testing.T, body string) streamed {
	t.Helper()
	s := streamed{content: map[int]string{}, finish: map[int]string{}, calls: map[int][]wireToolCall{}}
	for _, ev := range strings.Split(body, "\n\n") {
		if ev == "" {
			continue
		}
		data, ok := strings.CutPrefix(ev, "data: ")
		if !ok {
			t.Fatalf("event %q", ev)
		}
		if data == "[DONE]" {
			s.done = true
			continue
		}
		var c struct {
			Object  string `json:"object"`
			Choices []struct {
				Index int `json:"index"`
				Delta struct {
					Content   *string `json:"content"`
					ToolCalls []struct {
						Index    *int    `json:"index"`
						ID       *string `json:"id"`
						Type     *string `json:"type"`
						Function struct {
							Name      *string `json:"name"`
							Arguments *string `json:"arguments"`
						} `json:"function"`
					} `json:"tool_calls"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
			Usage json.RawMessage `json:"usage"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil || c.Object != "chat.completion.chunk" {
			t.Fatalf("chunk %s: %v", data, err)
		}
		if c.Usage != nil {
			s.usage = c.Usage
		}
		for _, ch := range c.Choices {
			if ch.Delta.Content != nil {
				s.content[ch.Index] += *ch.Delta.Content
			}
			if ch.FinishReason != nil {
				s.finish[ch.Index] = *ch.FinishReason
			}
			for _, d := range ch.Delta.ToolCalls {
				calls := s.calls[ch.Index]
				switch {
				case d.Index == nil:
					t.Fatalf("tool call delta without index: %s", data)
				case *d.Index == len(calls):
					if d.ID == nil || d.Type == nil || d.Function.Name == nil || d.Function.Arguments == nil || *d.Function.Arguments != "" {
						t.Fatalf("first delta of a tool call: %s", data)
					}
					var w wireToolCall
					w.ID, w.Type, w.Function.Name = *d.ID, *d.Type, *d.Function.Name
					s.calls[ch.Index] = append(calls, w)
				case *d.Index == len(calls)-1:
					if d.ID != nil || d.Type != nil || d.Function.Name != nil || d.Function.Arguments == nil {
						t.Fatalf("argument delta: %s", data)
					}
					calls[*d.Index].Function.Arguments += *d.Function.Arguments
				default:
					t.Fatalf("tool call index out of order: %s", data)
				}
			}
		}
	}
	if !s.done {
		t.Fatalf("stream does not end with [DONE]: %s", body)
	}
	return s
}

func compileSchema(t *testing.T, schema string) *jsonschema.Schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(schema))
	if err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("mem:///schema.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("mem:///schema.json")
	if err != nil {
		t.Fatalf("schema %s: %v", schema, err)
	}
	return sch
}

func validate(t *testing.T, sch *jsonschema.Schema, doc string) error {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(strings.NewReader(doc))
	if err != nil {
		t.Fatalf("%q is not JSON: %v", doc, err)
	}
	return sch.Validate(inst)
}

func TestMockToolCalls(t *testing.T) {
	var tools []struct {
		Function struct {
			Name       string          `json:"name"`
			Parameters json.RawMessage `json:"parameters"`
		} `json:"function"`
	}
	if err := json.Unmarshal([]byte(mockTools), &tools); err != nil {
		t.Fatal(err)
	}
	params := map[string]*jsonschema.Schema{}
	for _, tool := range tools {
		if tool.Function.Parameters != nil {
			params[tool.Function.Name] = compileSchema(t, string(tool.Function.Parameters))
		}
	}
	user := func(text string) string { return `[{"role":"user","content":` + jsonString(text) + `}]` }
	afterTool := `[{"role":"user","content":"Use get_weather for city Paris"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"{\"temp_c\":21}"}]`
	type call struct{ name, args string } // args "" when any valid arguments do
	cases := []struct {
		name, messages, extra string
		want                  []call
		text                  string // the answer's content when no call is wanted
	}{
		{"mentioned tool", user("Use get_weather for city Paris."), ``,
			[]call{{"get_weather", `{"city":"Paris","unit":"celsius"}`}}, ""},
		{"mention in any case, quoted value, enum from the message", user(`Please GET_WEATHER: city "New York", unit Fahrenheit`), ``,
			[]call{{"get_weather", `{"city":"New York","unit":"fahrenheit"}`}}, ""},
		{"several mentions, in message order", user("search_hotels for query spa, then get_weather"), ``,
			[]call{{"search_hotels", `{"query":"spa","max_results":5,"filters":{"stars":[1,2],"pool":true}}`}, {"get_weather", `{"city":"example","unit":"celsius"}`}}, ""},
		{"parallel_tool_calls false keeps the first", user("search_hotels for query spa, then get_weather"), `,"parallel_tool_calls":false`,
			[]call{{"search_hotels", ""}}, ""},
		{"no mention", user("what is the weather in Paris?"), ``,
			nil, "This is a deterministic mock answer to: what is the weather in Paris?"},
		{"a longer word is no mention", user("forget_weather and get_weathers"), ``, nil, ""},
		{"required without mention calls the first tool", user("hello"), `,"tool_choice":"required"`,
			[]call{{"get_weather", `{"city":"example","unit":"celsius"}`}}, ""},
		{"required with a mention", user("ping please"), `,"tool_choice":"required"`, []call{{"ping", `{}`}}, ""},
		{"named function over the mention", user("use get_weather"), `,"tool_choice":{"type":"function","function":{"name":"ping"}}`,
			[]call{{"ping", `{}`}}, ""},
		{"none", user("use get_weather"), `,"tool_choice":"none"`, nil, "This is a deterministic mock answer to: use get_weather"},
		{"tool result is answered in text", afterTool, ``, nil, `The tool get_weather returned: {"temp_c":21}`},
		{"tool result, forced choice calls again", afterTool, `,"tool_choice":"required"`,
			[]call{{"get_weather", `{"city":"Paris","unit":"celsius"}`}}, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"m","messages":` + tc.messages + `,"tools":` + mockTools + tc.extra
			a := chat(t, body+`}`)
			ch := a.Choices[0]
			if len(tc.want) == 0 {
				if ch.FinishReason != "stop" || len(ch.Message.ToolCalls) != 0 {
					t.Fatalf("want a text answer: %+v", ch)
				}
				if got := a.content(t, 0); tc.text != "" && got != tc.text {
					t.Errorf("content %q, want %q", got, tc.text)
				}
			} else {
				if ch.FinishReason != "tool_calls" || string(ch.Message.Content) != "null" || len(ch.Message.ToolCalls) != len(tc.want) {
					t.Fatalf("want %d tool calls: %+v", len(tc.want), ch)
				}
				ids := map[string]bool{}
				for i, w := range tc.want {
					got := ch.Message.ToolCalls[i]
					if got.Function.Name != w.name || got.Type != "function" || !strings.HasPrefix(got.ID, "call_") || ids[got.ID] {
						t.Errorf("call %d: %+v, want %s", i, got, w.name)
					}
					ids[got.ID] = true
					if w.args != "" && got.Function.Arguments != w.args {
						t.Errorf("call %d arguments %s, want %s", i, got.Function.Arguments, w.args)
					}
					if sch := params[w.name]; sch != nil {
						if err := validate(t, sch, got.Function.Arguments); err != nil {
							t.Errorf("call %d arguments %s do not validate: %v", i, got.Function.Arguments, err)
						}
					}
				}
			}

			// The stream of the same request carries the same answer.
			s := streamOf(t, chatStreamBody(body))
			if s.finish[0] != ch.FinishReason {
				t.Errorf("stream finish %q, JSON %q", s.finish[0], ch.FinishReason)
			}
			if len(tc.want) == 0 {
				if s.content[0] != a.content(t, 0) || len(s.calls[0]) != 0 {
					t.Errorf("stream %q %+v, JSON %q", s.content[0], s.calls[0], a.content(t, 0))
				}
			} else if !slices.Equal(s.calls[0], ch.Message.ToolCalls) {
				t.Errorf("stream calls %+v,\nJSON calls %+v", s.calls[0], ch.Message.ToolCalls)
			}
			var u chatAnswer
			if err := json.Unmarshal([]byte(`{"usage":`+string(s.usage)+`}`), &u); err != nil {
				t.Fatalf("stream usage %s: %v", s.usage, err)
			}
			if u.Usage != a.Usage || a.Usage.CompletionTokens == 0 || a.Usage.TotalTokens != a.Usage.PromptTokens+a.Usage.CompletionTokens {
				t.Errorf("usage: stream %s, JSON %+v", s.usage, a.Usage)
			}
		})
	}

	// A custom tool is not a function tool: it is never called.
	a := chat(t, `{"model":"m","messages":`+user("use get_weather")+`,"tools":[{"type":"custom","custom":{"name":"get_weather"}}]}`)
	if a.Choices[0].FinishReason != "stop" {
		t.Errorf("custom tool called: %+v", a.Choices[0])
	}
}

// streamOf sends a streaming request and assembles its answer.
func streamOf(t *testing.T, body string) streamed {
	t.Helper()
	code, b := callMock(t, "/v1/chat/completions", body)
	if code != 200 {
		t.Fatalf("%s: %d %s", body, code, b)
	}
	return assemble(t, b)
}

func chatStreamBody(body string) string {
	return strings.Replace(body, `{"model":"m",`, `{"model":"m","stream":true,"stream_options":{"include_usage":true},`, 1) + `}`
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// The official client sees a tool call, sends the tool's result back, and
// gets a text answer using it; its stream accumulator assembles the same
// call as the JSON answer.
func TestMockToolCallsOpenAIClient(t *testing.T) {
	client := mockClient(t)
	ctx := context.Background()
	params := openai.ChatCompletionNewParams{
		Model:    "mock-1",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Use get_weather for city Paris")},
		Tools: []openai.ChatCompletionToolParam{{Function: shared.FunctionDefinitionParam{
			Name: "get_weather",
			Parameters: shared.FunctionParameters{"type": "object", "additionalProperties": false, "required": []string{"city"},
				"properties": map[string]any{"city": map[string]any{"type": "string"}}},
		}}},
	}
	resp, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	msg := resp.Choices[0].Message
	if resp.Choices[0].FinishReason != "tool_calls" || len(msg.ToolCalls) != 1 {
		t.Fatalf("want one tool call: %s", resp.RawJSON())
	}
	tc := msg.ToolCalls[0]
	if tc.Function.Name != "get_weather" || tc.Function.Arguments != `{"city":"Paris"}` || !strings.HasPrefix(tc.ID, "call_") {
		t.Errorf("tool call %+v", tc)
	}

	stream := client.Chat.Completions.NewStreaming(ctx, params)
	var acc openai.ChatCompletionAccumulator
	finished := 0
	for stream.Next() {
		acc.AddChunk(stream.Current())
		if done, ok := acc.JustFinishedToolCall(); ok {
			finished++
			if done.ID != tc.ID || done.Name != tc.Function.Name || done.Arguments != tc.Function.Arguments {
				t.Errorf("finished tool call %+v, JSON %+v", done, tc)
			}
		}
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if len(acc.Choices) != 1 || len(acc.Choices[0].Message.ToolCalls) != 1 || acc.Choices[0].FinishReason != "tool_calls" || finished != 1 {
		t.Fatalf("accumulated %+v (%d finished)", acc.Choices, finished)
	}
	if got := acc.Choices[0].Message.ToolCalls[0]; got.ID != tc.ID || got.Function.Name != tc.Function.Name || got.Function.Arguments != tc.Function.Arguments {
		t.Errorf("streamed call %+v, JSON %+v", got, tc)
	}

	params.Messages = append(params.Messages, msg.ToParam(), openai.ToolMessage(`{"temp_c":21,"sky":"clear"}`, tc.ID))
	follow, err := client.Chat.Completions.New(ctx, params)
	if err != nil {
		t.Fatal(err)
	}
	want := `The tool get_weather returned: {"temp_c":21,"sky":"clear"}`
	if c := follow.Choices[0]; c.FinishReason != "stop" || len(c.Message.ToolCalls) != 0 || c.Message.Content != want {
		t.Errorf("follow-up %s, want the text %q", follow.RawJSON(), want)
	}
}

func TestMockJSONSchema(t *testing.T) {
	cases := []struct {
		name, schema string
		want         string // the exact document, where it matters
	}{
		{"strict, message words and enum", `{"type":"object","properties":{
			"city":{"type":"string"},"unit":{"type":"string","enum":["celsius","fahrenheit"]},"days":{"type":"integer","minimum":3,"maximum":10}},
			"required":["city","unit","days"],"additionalProperties":false}`, `{"city":"Paris","unit":"fahrenheit","days":3}`},
		{"nested objects and arrays", `{"type":"object","properties":{"order":{"type":"object","properties":{
			"id":{"type":"string","format":"uuid"},
			"lines":{"type":"array","minItems":3,"uniqueItems":true,"items":{"type":"object","properties":{
				"sku":{"type":"string"},"qty":{"type":"integer","exclusiveMinimum":0,"multipleOf":2}},"required":["sku","qty"],"additionalProperties":false}},
			"tags":{"type":"array","items":{"type":"string"},"minItems":2,"maxItems":2,"uniqueItems":true}},
			"required":["id","lines","tags"],"additionalProperties":false}},"required":["order"],"additionalProperties":false}`, ""},
		{"$defs, $ref and nullable anyOf (Pydantic)", `{"$defs":{"Address":{"type":"object","properties":{
			"street":{"type":"string"},"zip":{"type":"string","minLength":5,"maxLength":5}},"required":["street","zip"],"additionalProperties":false}},
			"type":"object","properties":{"home":{"$ref":"#/$defs/Address"},"work":{"anyOf":[{"type":"null"},{"$ref":"#/$defs/Address"}]}},
			"required":["home","work"],"additionalProperties":false}`, ""},
		{"number bounds and multipleOf", `{"type":"object","properties":{
			"price":{"type":"number","exclusiveMinimum":1,"maximum":1.5},
			"ratio":{"type":"number","minimum":0.25,"maximum":0.35,"multipleOf":0.1},
			"delta":{"type":"integer","minimum":-5,"maximum":-2},
			"below":{"type":"integer","exclusiveMaximum":0},
			"big":{"type":"number","minimum":1e6}},
			"required":["price","ratio","delta","below","big"],"additionalProperties":false}`, ""},
		{"string formats and lengths", `{"type":"object","properties":{
			"at":{"type":"string","format":"date-time"},"day":{"type":"string","format":"date"},"time":{"type":"string","format":"time"},
			"email":{"type":"string","format":"email"},"url":{"type":"string","format":"uri"},"host":{"type":"string","format":"hostname"},
			"v4":{"type":"string","format":"ipv4"},"v6":{"type":"string","format":"ipv6"},"uuid":{"type":"string","format":"uuid"},
			"long":{"type":"string","minLength":12},"short":{"type":"string","maxLength":3}},
			"required":["at","day","time","email","url","host","v4","v6","uuid","long","short"],"additionalProperties":false}`, ""},
		{"allOf merged", `{"allOf":[{"type":"object","properties":{"a":{"type":"string"}},"required":["a"]},
			{"properties":{"b":{"type":"boolean"}},"required":["b"]}]}`, `{"a":"example","b":true}`},
		{"recursive tree", `{"$defs":{"node":{"type":"object","properties":{"name":{"type":"string"},
			"children":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["name","children"],"additionalProperties":false}},
			"$ref":"#/$defs/node"}`, ""},
		{"type lists, const, mixed enum", `{"type":"object","properties":{"kind":{"const":"report"},"note":{"type":["string","null"]},
			"flag":{"type":["null","boolean"]},"level":{"enum":[3,"high",null]},"nothing":{"type":"null"}},
			"required":["kind","note","flag","level","nothing"]}`, `{"kind":"report","note":"example","flag":true,"level":3,"nothing":null}`},
		{"prefixItems tuple", `{"type":"array","prefixItems":[{"type":"string"},{"type":"integer"},{"type":"boolean"}],"items":false,"minItems":3}`,
			`["example",2,true]`},
		{"required without a property schema", `{"type":"object","required":["x"],"additionalProperties":{"type":"integer"}}`, `{"x":1}`},
		{"oneOf takes the first branch", `{"oneOf":[
			{"type":"object","properties":{"type":{"const":"a"},"v":{"type":"string"}},"required":["type","v"],"additionalProperties":false},
			{"type":"object","properties":{"type":{"const":"b"},"n":{"type":"number"}},"required":["type","n"],"additionalProperties":false}]}`, ""},
		{"minProperties fills optional ones", `{"type":"object","properties":{"a":{"type":"string"},"b":{"type":"integer"}},"minProperties":2}`, ""},
		{"draft-07 definitions and items tuple", `{"$schema":"http://json-schema.org/draft-07/schema#",
			"definitions":{"pt":{"type":"array","items":[{"type":"number"},{"type":"number"}],"additionalItems":false,"minItems":2}},
			"type":"object","properties":{"p":{"$ref":"#/definitions/pt"}},"required":["p"]}`, ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			sch := compileSchema(t, tc.schema)
			// The validator does its job: a document of the wrong shape fails.
			if err := validate(t, sch, `{"unexpected":true}`); err == nil {
				t.Fatalf("the validator accepts anything")
			}
			body := `{"model":"m","messages":[{"role":"user","content":"Weather for city Paris, unit fahrenheit"}],` +
				`"response_format":{"type":"json_schema","json_schema":{"name":"answer","strict":true,"schema":` + tc.schema + `}}`
			a := chat(t, body+`}`)
			doc := a.content(t, 0)
			if err := validate(t, sch, doc); err != nil {
				t.Errorf("answer %s does not validate: %v", doc, err)
			}
			if tc.want != "" && doc != tc.want {
				t.Errorf("answer %s, want %s", doc, tc.want)
			}
			if a.Choices[0].FinishReason != "stop" {
				t.Errorf("finish %q", a.Choices[0].FinishReason)
			}
			if s := streamOf(t, chatStreamBody(body)); s.content[0] != doc {
				t.Errorf("stream %s, JSON %s", s.content[0], doc)
			}
		})
	}
}

func TestMockJSONObject(t *testing.T) {
	a := chat(t, `{"model":"m","messages":[{"role":"system","content":"Answer in JSON."},{"role":"user","content":"two words"}],"response_format":{"type":"json_object"}}`)
	var obj map[string]any
	if err := json.Unmarshal([]byte(a.content(t, 0)), &obj); err != nil || obj["echo"] != "two words" || obj["words"] != 2.0 {
		t.Errorf("json_object answer %q: %v", a.content(t, 0), err)
	}
}

func TestMockChatErrors(t *testing.T) {
	msg := `"messages":[{"role":"user","content":"use get_weather"}]`
	cases := []struct{ name, body, param string }{
		{"n zero", `{"model":"m",` + msg + `,"n":0}`, "n"},
		{"n too large", `{"model":"m",` + msg + `,"n":129}`, "n"},
		{"unknown tool_choice", `{"model":"m",` + msg + `,"tools":` + mockTools + `,"tool_choice":"sometimes"}`, "tool_choice"},
		{"tool_choice names a missing function", `{"model":"m",` + msg + `,"tools":` + mockTools + `,"tool_choice":{"type":"function","function":{"name":"nope"}}}`, "tool_choice"},
		{"required without tools", `{"model":"m",` + msg + `,"tool_choice":"required"}`, "tool_choice"},
		{"unknown response_format", `{"model":"m",` + msg + `,"response_format":{"type":"xml"}}`, "response_format.type"},
		{"json_schema without a name", `{"model":"m",` + msg + `,"response_format":{"type":"json_schema","json_schema":{"schema":{}}}}`, "response_format.json_schema"},
		{"json_object without the word", `{"model":"m",` + msg + `,"response_format":{"type":"json_object"}}`, "messages"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, b := callMock(t, "/v1/chat/completions", tc.body)
			var e struct {
				Error struct{ Type, Param, Message string }
			}
			if json.Unmarshal([]byte(b), &e); code != 400 || e.Error.Type != "invalid_request_error" || e.Error.Param != tc.param || e.Error.Message == "" {
				t.Errorf("%d %s, want a 400 naming %s", code, b, tc.param)
			}
		})
	}
}

// n choices are n copies of the one answer; tool calls get ids of their
// own per choice.
func TestMockChoices(t *testing.T) {
	msg := `"messages":[{"role":"user","content":"one two three four"}]`
	one := chat(t, `{"model":"m",`+msg+`}`)
	three := chat(t, `{"model":"m",`+msg+`,"n":3}`)
	if len(three.Choices) != 3 || three.Usage.CompletionTokens != 3*one.Usage.CompletionTokens || three.Usage.PromptTokens != one.Usage.PromptTokens {
		t.Fatalf("n=3: %+v", three)
	}
	for i := range three.Choices {
		if three.Choices[i].Index != i || three.content(t, i) != one.content(t, 0) {
			t.Errorf("choice %d: %+v", i, three.Choices[i])
		}
	}
	s := streamOf(t, chatStreamBody(`{"model":"m",`+msg+`,"n":2`))
	if len(s.content) != 2 || s.content[0] != one.content(t, 0) || s.content[1] != one.content(t, 0) || s.finish[1] != "stop" {
		t.Errorf("n=2 stream: %+v", s)
	}

	calls := chat(t, `{"model":"m","messages":[{"role":"user","content":"ping"}],"tools":`+mockTools+`,"n":2}`)
	a, b := calls.Choices[0].Message.ToolCalls, calls.Choices[1].Message.ToolCalls
	if len(a) != 1 || len(b) != 1 || a[0].ID == b[0].ID || a[0].Function != b[0].Function {
		t.Errorf("n=2 tool calls: %+v / %+v", a, b)
	}
}

// The SACP answer wins over response_format; tool calls win over it, since
// the gateway passes them through; tool results go into its message.
func TestMockProtocolPrecedence(t *testing.T) {
	sys := `{"role":"system","content":"### SYSTEM PROTOCOL: RESPONSE FORMAT INSTRUCTIONS"}`
	sacp := func(a chatAnswer) map[string]any {
		t.Helper()
		var obj map[string]any
		if err := json.Unmarshal([]byte(a.content(t, 0)), &obj); err != nil || obj["status"] != "success" {
			t.Fatalf("not a SACP answer: %s", a.Choices[0].Message.Content)
		}
		return obj
	}
	sacp(chat(t, `{"model":"m","messages":[`+sys+`,{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object","properties":{"z":{"type":"integer"}},"required":["z"]}}}}`))
	a := chat(t, `{"model":"m","messages":[`+sys+`,{"role":"user","content":"use get_weather"}],"tools":`+mockTools+`}`)
	if a.Choices[0].FinishReason != "tool_calls" {
		t.Errorf("protocol with a tool mention: %+v", a.Choices[0])
	}
	obj := sacp(chat(t, `{"model":"m","messages":[`+sys+`,{"role":"user","content":"use get_weather"},`+
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"get_weather","arguments":"{}"}}]},`+
		`{"role":"tool","tool_call_id":"c1","content":"sunny"}],"tools":`+mockTools+`}`))
	if obj["message"] != "The tool get_weather returned: sunny" {
		t.Errorf("SACP message %q", obj["message"])
	}
}

// The same request always gets the same bytes, and what existed before the
// tools and formats answers exactly as it did.
func TestMockDeterministic(t *testing.T) {
	cases := []struct{ name, path, body, want string }{
		{"text", "/v1/chat/completions", `{"model":"mock-1","messages":[{"role":"system","content":"be brief"},{"role":"user","content":"Hello, gateway"}]}`,
			`{"choices":[{"finish_reason":"stop","index":0,"message":{"content":"This is a deterministic mock answer to: Hello, gateway","role":"assistant"}}],"created":1700000000,"id":"chatcmpl-mock-07226c7b67f5","model":"mock-1","object":"chat.completion","usage":{"completion_tokens":14,"prompt_tokens":6,"total_tokens":20}}`},
		{"stream", "/v1/chat/completions", `{"model":"mock-1","stream":true,"stream_options":{"include_usage":true},"messages":[{"role":"user","content":"one two three four five"}]}`,
			`data: {"choices":[{"delta":{"content":"","role":"assistant"},"finish_reason":null,"index":0}],"created":1700000000,"id":"chatcmpl-mock-f70b073b0b32","model":"mock-1","object":"chat.completion.chunk"}` + "\n\n" +
				`data: {"choices":[{"delta":{"content":"This is a "},"finish_reason":null,"index":0}],"created":1700000000,"id":"chatcmpl-mock-f70b073b0b32","model":"mock-1","object":"chat.completion.chunk"}` + "\n\n" +
				`data: {"choices":[{"delta":{"content":"deterministic mock answer "},"finish_reason":null,"index":0}],"created":1700000000,"id":"chatcmpl-mock-f70b073b0b32","model":"mock-1","object":"chat.completion.chunk"}` + "\n\n" +
				`data: {"choices":[{"delta":{"content":"to: one two "},"finish_reason":null,"index":0}],"created":1700000000,"id":"chatcmpl-mock-f70b073b0b32","model":"mock-1","object":"chat.completion.chunk"}` + "\n\n" +
				`data: {"choices":[{"delta":{"content":"three four five"},"finish_reason":null,"index":0}],"created":1700000000,"id":"chatcmpl-mock-f70b073b0b32","model":"mock-1","object":"chat.completion.chunk"}` + "\n\n" +
				`data: {"choices":[{"delta":{},"finish_reason":"stop","index":0}],"created":1700000000,"id":"chatcmpl-mock-f70b073b0b32","model":"mock-1","object":"chat.completion.chunk"}` + "\n\n" +
				`data: {"choices":[],"created":1700000000,"id":"chatcmpl-mock-f70b073b0b32","model":"mock-1","object":"chat.completion.chunk","usage":{"completion_tokens":16,"prompt_tokens":6,"total_tokens":22}}` + "\n\n" +
				"data: [DONE]\n\n"},
		{"sacp", "/v1/chat/completions", `{"model":"mock-1","messages":[{"role":"system","content":"### SYSTEM PROTOCOL: RESPONSE FORMAT INSTRUCTIONS"},{"role":"user","content":"book a hotel"}]}`,
			`{"choices":[{"finish_reason":"stop","index":0,"message":{"content":"{\"data\":{\"echo\":\"book a hotel\",\"words\":3},\"message\":\"Mock answer to: book a hotel\",\"status\":\"success\",\"thought\":\"Mock provider: answering deterministically in the SACP format.\"}","role":"assistant"}}],"created":1700000000,"id":"chatcmpl-mock-b56d94a70d35","model":"mock-1","object":"chat.completion","usage":{"completion_tokens":45,"prompt_tokens":16,"total_tokens":61}}`},
		{"embeddings", "/v1/embeddings", `{"model":"e","input":"hi","dimensions":4}`,
			`{"data":[{"embedding":[0,-0.447214,0,0.894427],"index":0,"object":"embedding"}],"model":"e","object":"list","usage":{"prompt_tokens":1,"total_tokens":1}}`},
		{"embeddings base64", "/v1/embeddings", `{"model":"e","input":["hi","there"],"encoding_format":"base64"}`, ""},
		{"tool call", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"search_hotels for query spa, get_weather"}],"tools":` + mockTools + `}`, ""},
		{"tool call stream", "/v1/chat/completions", `{"model":"m","stream":true,"messages":[{"role":"user","content":"search_hotels for query spa, get_weather"}],"tools":` + mockTools + `}`, ""},
		{"json_schema", "/v1/chat/completions", `{"model":"m","messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"name":"n","schema":{"type":"object","properties":{"a":{"type":"array","items":{"type":"number"},"minItems":3},"b":{"type":"string"}},"required":["b","a"]}}}}`,
			`{"choices":[{"finish_reason":"stop","index":0,"message":{"content":"{\"a\":[1,2,3],\"b\":\"example\"}","role":"assistant"}}],"created":1700000000,"id":"chatcmpl-mock-919dc38d3bc9","model":"m","object":"chat.completion","usage":{"completion_tokens":7,"prompt_tokens":1,"total_tokens":8}}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, first := callMock(t, tc.path, tc.body)
			_, second := callMock(t, tc.path, tc.body)
			if code != 200 || first != second {
				t.Fatalf("%d, not deterministic:\n%s\n%s", code, first, second)
			}
			if tc.want != "" && first != tc.want {
				t.Errorf("answer changed:\n got %s\nwant %s", first, tc.want)
			}
		})
	}
}
