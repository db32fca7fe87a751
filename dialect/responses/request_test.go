package responses

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
)

// TestRequestFixtures translates the wire examples of testdata/request.
func TestRequestFixtures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		stream bool
		model  string
	}{
		{"basic", false, "gpt-4.1"},
		{"agent_stream", true, "gpt-5-mini"},
		{"tool_round_trip", false, "gpt-4o"},
		{"images", false, "gpt-4.1-mini"},
		{"structured", false, "gpt-4o-2024-08-06"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chat, stream, model, err := Request(readFile(t, filepath.Join("request", tc.name+".json")))
			if err != nil {
				t.Fatal(err)
			}
			if stream != tc.stream || model != tc.model {
				t.Errorf("stream, model = %v, %q; want %v, %q", stream, model, tc.stream, tc.model)
			}
			sameJSON(t, chat, readFile(t, filepath.Join("request", tc.name+".chat.json")))
		})
	}
}

// TestRequestFields translates each field alone: the request is a minimal
// one plus extra members, the answer the minimal chat request plus the
// members expected.
func TestRequestFields(t *testing.T) {
	const user = `{"role":"user","content":"Hi"}`
	const fn = `{"type":"function","name":"f","parameters":{"type":"object"}}`
	const chatFn = `{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}`
	for _, tc := range []struct {
		name string
		// extra is added to {"model":"m","input":"Hi"} (an input member
		// replaces the default).
		extra string
		// want is added to {"model":"m"} (messages [user] too when want
		// has none).
		want string
	}{
		{"minimal", ``, ``},
		{"input items", `"input":[{"role":"user","content":"Hi"}]`, ``},
		{"input message with type", `"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"Hi"}]}]`, ``},
		{"instructions", `"instructions":"Be brief."`,
			`"messages":[{"role":"system","content":"Be brief."},` + user + `]`},
		{"empty instructions dropped", `"instructions":""`, ``},
		{"null members are absent", `"instructions":null,"temperature":null,"tools":null,"metadata":null,"stream":null,"reasoning":null,"text":null,"previous_response_id":null,"conversation":null,"background":null,"store":null,"include":null,"truncation":null,"tool_choice":null,"user":null,"max_output_tokens":null,"parallel_tool_calls":null`, ``},
		{"max_output_tokens", `"max_output_tokens":1024`, `"max_tokens":1024`},
		{"temperature 0 kept", `"temperature":0`, `"temperature":0`},
		{"temperature 2 and top_p", `"temperature":2,"top_p":0.5`, `"temperature":2,"top_p":0.5`},
		{"stream", `"stream":true`, `"stream":true,"stream_options":{"include_usage":true}`},
		{"stream false", `"stream":false`, ``},
		{"user", `"user":"u-42"`, `"user":"u-42"`},
		{"metadata dropped", `"metadata":{"a":"b","trace":"t-1"}`, ``},
		{"store true ignored", `"store":true`, ``},
		{"store false ignored", `"store":false`, ``},
		{"background false", `"background":false`, ``},
		{"truncation disabled", `"truncation":"disabled"`, ``},
		{"include empty", `"include":[]`, ``},
		{"include encrypted reasoning (stateless clients)", `"include":["reasoning.encrypted_content"],"store":false`, ``},
		{"reasoning effort", `"reasoning":{"effort":"high"}`, `"reasoning_effort":"high"`},
		{"reasoning summary dropped", `"reasoning":{"summary":"detailed","generate_summary":"concise"}`, ``},
		{"text format text", `"text":{"format":{"type":"text"}}`, ``},
		{"text format json_object", `"text":{"format":{"type":"json_object"}}`, `"response_format":{"type":"json_object"}`},
		{"text format json_schema", `"text":{"format":{"type":"json_schema","name":"out","description":"The output.","schema":{ "type" : "object" },"strict":false}}`,
			`"response_format":{"type":"json_schema","json_schema":{"name":"out","description":"The output.","schema":{"type":"object"},"strict":false}}`},
		{"text verbosity", `"text":{"verbosity":"low"}`, `"verbosity":"low"`},
		{"function tool", `"tools":[{"type":"function","name":"f","description":"Does f.","parameters":{"type":"object","properties":{}},"strict":true}]`,
			`"tools":[{"type":"function","function":{"name":"f","description":"Does f.","parameters":{"type":"object","properties":{}},"strict":true}}]`},
		{"function tool without parameters", `"tools":[{"type":"function","name":"now","parameters":null,"strict":null}]`,
			`"tools":[{"type":"function","function":{"name":"now"}}]`},
		{"tool_choice auto", `"tools":[` + fn + `],"tool_choice":"auto"`, `"tools":[` + chatFn + `],"tool_choice":"auto"`},
		{"tool_choice none", `"tools":[` + fn + `],"tool_choice":"none"`, `"tools":[` + chatFn + `],"tool_choice":"none"`},
		{"tool_choice required", `"tools":[` + fn + `],"tool_choice":"required"`, `"tools":[` + chatFn + `],"tool_choice":"required"`},
		{"tool_choice function", `"tools":[` + fn + `],"tool_choice":{"type":"function","name":"f"}`,
			`"tools":[` + chatFn + `],"tool_choice":{"type":"function","function":{"name":"f"}}`},
		{"tool_choice auto without tools dropped", `"tool_choice":"auto"`, ``},
		{"tool_choice none without tools dropped", `"tool_choice":"none","tools":[]`, ``},
		{"parallel_tool_calls", `"tools":[` + fn + `],"parallel_tool_calls":false`, `"tools":[` + chatFn + `],"parallel_tool_calls":false`},
		{"parallel_tool_calls without tools dropped", `"parallel_tool_calls":true`, ``},
		{"several text parts kept apart", `"input":[{"role":"user","content":[{"type":"input_text","text":"A"},{"type":"input_text","text":"B"}]}]`,
			`"messages":[{"role":"user","content":[{"type":"text","text":"A"},{"type":"text","text":"B"}]}]`},
		{"system and developer items", `"input":[{"role":"system","content":"S"},{"role":"developer","content":[{"type":"input_text","text":"D"}]},` + user + `]`,
			`"messages":[{"role":"system","content":"S"},{"role":"developer","content":"D"},` + user + `]`},
		{"assistant output_text replayed", `"input":[` + user + `,{"id":"msg_1","type":"message","status":"completed","role":"assistant","content":[{"type":"output_text","text":"Hello","annotations":[],"logprobs":[]}]},` + user + `]`,
			`"messages":[` + user + `,{"role":"assistant","content":"Hello"},` + user + `]`},
		{"assistant refusal replayed as text", `"input":[` + user + `,{"role":"assistant","content":[{"type":"refusal","refusal":"I can't."}]},` + user + `]`,
			`"messages":[` + user + `,{"role":"assistant","content":"I can't."},` + user + `]`},
		{"a final assistant message is kept", `"input":[` + user + `,{"role":"assistant","content":"Hello"}]`,
			`"messages":[` + user + `,{"role":"assistant","content":"Hello"}]`},
		{"function_call alone", `"input":[` + user + `,{"type":"function_call","call_id":"c1","name":"f","arguments":""},{"type":"function_call_output","call_id":"c1","output":""}]`,
			`"messages":[` + user + `,{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":""}}]},{"role":"tool","content":"","tool_call_id":"c1"}]`},
		{"function_call after instructions is a turn of its own", `"instructions":"S","input":[{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"}]`,
			`"messages":[{"role":"system","content":"S"},{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]}]`},
		{"function_call after a tool message is a new turn", `"input":[{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"1"},{"type":"function_call","call_id":"c2","name":"f","arguments":"{}"}]`,
			`"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","content":"1","tool_call_id":"c1"},{"role":"assistant","content":null,"tool_calls":[{"id":"c2","type":"function","function":{"name":"f","arguments":"{}"}}]}]`},
		{"function_call_output parts", `"input":[{"type":"function_call_output","call_id":"c1","output":[{"type":"input_text","text":"a"},{"type":"input_text","text":"b"}],"status":"completed","id":"fco_1"}]`,
			`"messages":[{"role":"tool","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}],"tool_call_id":"c1"}]`},
		{"function_call_output no parts", `"input":[{"type":"function_call_output","call_id":"c1","output":[]}]`,
			`"messages":[{"role":"tool","content":"","tool_call_id":"c1"}]`},
		{"image url without detail", `"input":[{"role":"user","content":[{"type":"input_image","image_url":"http://example.com/a.jpg"}]}]`,
			`"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://example.com/a.jpg"}}]}]`},
		{"image file_id null", `"input":[{"role":"user","content":[{"type":"input_image","image_url":"https://example.com/a.jpg","file_id":null,"detail":"high"}]}]`,
			`"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.jpg","detail":"high"}}]}]`},
		{"unicode kept", `"input":"héllo \u2028 😀 <b>&"`,
			`"messages":[{"role":"user","content":"héllo \u2028 😀 <b>&"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"m","input":"Hi"`
			if strings.HasPrefix(tc.extra, `"input"`) || strings.Contains(tc.extra, `,"input"`) {
				body = `{"model":"m"`
			}
			if tc.extra != "" {
				body += "," + tc.extra
			}
			body += "}"
			want := `{"model":"m"`
			if !strings.Contains(tc.want, `"messages"`) {
				want += `,"messages":[` + user + `]`
			}
			if tc.want != "" {
				want += "," + tc.want
			}
			want += "}"
			chat, _, _, err := Request([]byte(body))
			if err != nil {
				t.Fatalf("Request(%s): %v", body, err)
			}
			sameJSON(t, chat, []byte(want))
		})
	}
}

// TestRequestRoundTrip: the function calls and their outputs keep their
// call ids, one assistant message holds the turn's calls, and each tool
// message follows it.
func TestRequestRoundTrip(t *testing.T) {
	chat, _, _, err := Request(readFile(t, "request/tool_round_trip.json"))
	if err != nil {
		t.Fatal(err)
	}
	var got struct {
		Messages []struct {
			Role       string `json:"role"`
			ToolCallID string `json:"tool_call_id"`
			ToolCalls  []struct {
				ID string `json:"id"`
			} `json:"tool_calls"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(chat, &got); err != nil {
		t.Fatal(err)
	}
	var calls, results []string
	for i, m := range got.Messages {
		for _, c := range m.ToolCalls {
			calls = append(calls, c.ID)
		}
		if m.Role == "tool" {
			results = append(results, m.ToolCallID)
			if prev := got.Messages[i-1].Role; prev != "assistant" && prev != "tool" {
				t.Errorf("tool message %d follows a %s message", i, prev)
			}
		}
	}
	if strings.Join(calls, ",") != strings.Join(results, ",") || len(calls) != 2 {
		t.Errorf("calls %v, results %v", calls, results)
	}
}

// TestRequestRefusals: what the package cannot translate faithfully, or
// the API itself refuses, is a client error naming the field.
func TestRequestRefusals(t *testing.T) {
	const ok = `{"model":"m","input":"Hi"`
	withInput := func(items string) string {
		return `{"model":"m","input":` + items + `}`
	}
	withContent := func(content string) string {
		return withInput(`[{"role":"user","content":` + content + `}]`)
	}
	const fn = `{"type":"function","name":"f","parameters":{"type":"object"}}`
	for _, tc := range []struct {
		name string
		body string
		// field is the dotted path the message must start with ("" for
		// the body as a whole); want a part of the message.
		field, want string
	}{
		{"empty body", ``, "", "empty"},
		{"not an object", `[]`, "", "expected an object"},
		{"trailing data", ok + `} {}`, "", "invalid JSON"},
		{"invalid UTF-8 in a string", "{\"model\":\"m\xff\",\"input\":\"Hi\"}", "", "UTF-8"},
		{"invalid UTF-8 in input", withInput("\"caf\xc3\""), "", "UTF-8"},
		{"duplicate top-level member", ok + `,"model":"other"}`, "model", "more than once"},
		{"duplicate nested member", withContent(`[{"type":"input_text","text":"a","text":"b"}]`), "input.0.content.0.text", "more than once"},
		{"duplicate inside a schema", ok + `,"tools":[{"type":"function","name":"f","parameters":{"a":1,"a":2}}]}`, "tools.0.parameters.a", "more than once"},
		{"duplicate metadata key", ok + `,"metadata":{"k":"a","k":"b"}}`, "metadata.k", "more than once"},
		{"unknown top-level field", ok + `,"service_tier":"auto"}`, "service_tier", "unknown field"},
		{"prompt", ok + `,"prompt":{"id":"pmpt_1"}}`, "prompt", "unknown field"},
		{"top_logprobs", ok + `,"top_logprobs":2}`, "top_logprobs", "unknown field"},
		{"member differing by case", ok + `,"Model":"m"}`, "Model", "unknown field"},
		{"unknown message member", withInput(`[{"role":"user","content":"Hi","name":"bob"}]`), "input.0.name", "not a member of a message item"},
		{"member no item has", withInput(`[{"role":"user","content":"Hi","foo":1}]`), "input.0.foo", "unknown field"},
		{"unknown reasoning member", ok + `,"reasoning":{"effort":"low","budget":1}}`, "reasoning.budget", "unknown field"},
		{"missing model", `{"input":"Hi"}`, "model", "required"},
		{"empty model", `{"model":"","input":"Hi"}`, "model", "required"},
		{"missing input", `{"model":"m"}`, "input", "required"},
		{"empty input string", `{"model":"m","input":""}`, "input", "non-empty"},
		{"empty input array", `{"model":"m","input":[]}`, "input", "at least one"},
		{"input a number", `{"model":"m","input":5}`, "input", "string or an array"},
		{"previous_response_id without a kept conversation", ok + `,"previous_response_id":"resp_123"}`, "previous_response_id", "the conversation the gateway keeps"},
		{"previous_response_id empty", ok + `,"previous_response_id":""}`, "previous_response_id", "non-empty"},
		{"previous_response_id not a string", ok + `,"previous_response_id":{"id":"resp_123"}}`, "previous_response_id", "expected a string"},
		{"conversation", ok + `,"conversation":"conv_123"}`, "conversation", "keeps no conversation objects"},
		{"conversation object", ok + `,"conversation":{"id":"conv_123"}}`, "conversation", "keeps no conversation objects"},
		{"background", ok + `,"background":true}`, "background", "not supported"},
		{"truncation auto", ok + `,"truncation":"auto"}`, "truncation", "auto is not supported"},
		{"truncation other", ok + `,"truncation":"middle"}`, "truncation", "auto or disabled"},
		{"include", ok + `,"include":["reasoning.encrypted_content","message.output_text.logprobs"]}`, "include.1", `"message.output_text.logprobs" is not supported`},
		{"max_output_tokens 0", ok + `,"max_output_tokens":0}`, "max_output_tokens", "at least 1"},
		{"max_output_tokens fraction", ok + `,"max_output_tokens":1.5}`, "max_output_tokens", "expected an integer"},
		{"max_output_tokens string", ok + `,"max_output_tokens":"8"}`, "max_output_tokens", "expected an integer, got a string"},
		{"stream not a boolean", ok + `,"stream":"yes"}`, "stream", "expected a boolean"},
		{"store not a boolean", ok + `,"store":"no"}`, "store", "expected a boolean"},
		{"temperature over 2", ok + `,"temperature":2.5}`, "temperature", "between 0 and 2"},
		{"negative top_p", ok + `,"top_p":-0.1}`, "top_p", "between 0 and 1"},
		{"metadata value not a string", ok + `,"metadata":{"k":1}}`, "metadata.k", "expected a string"},
		{"metadata value too long", ok + `,"metadata":{"k":"` + strings.Repeat("x", 513) + `"}}`, "metadata.k", "512"},
		{"reasoning effort", ok + `,"reasoning":{"effort":"max"}}`, "reasoning.effort", "must be one of"},
		{"reasoning summary", ok + `,"reasoning":{"summary":"long"}}`, "reasoning.summary", "auto, concise or detailed"},
		{"text format type", ok + `,"text":{"format":{"type":"xml"}}}`, "text.format.type", `text format type "xml" is not supported`},
		{"text format type with its members", ok + `,"text":{"format":{"type":"grammar","grammar":"x"}}}`, "text.format.type", `text format type "grammar" is not supported`},
		{"text format without type", ok + `,"text":{"format":{}}}`, "text.format.type", "required"},
		{"json_schema without name", ok + `,"text":{"format":{"type":"json_schema","schema":{}}}}`, "text.format.name", "required"},
		{"json_schema without schema", ok + `,"text":{"format":{"type":"json_schema","name":"x"}}}`, "text.format.schema", "required"},
		{"json_schema schema not an object", ok + `,"text":{"format":{"type":"json_schema","name":"x","schema":[]}}}`, "text.format.schema", "object"},
		{"schema with json_object", ok + `,"text":{"format":{"type":"json_object","schema":{}}}}`, "text.format.schema", "only allowed with format json_schema"},
		{"text verbosity", ok + `,"text":{"verbosity":"loud"}}`, "text.verbosity", "low, medium or high"},
		{"item type", withInput(`[{"type":"item_reference","id":"msg_1"}]`), "input.0.type", `input item type "item_reference" is not supported`},
		{"reasoning item", withInput(`[{"type":"reasoning","id":"rs_1","summary":[],"encrypted_content":"x"}]`), "input.0.type", `input item type "reasoning" is not supported`},
		{"built-in tool call item", withInput(`[{"type":"web_search_call","id":"ws_1","status":"completed","action":{"type":"search"}}]`), "input.0.type", `"web_search_call" is not supported`},
		{"member of another item type", withInput(`[{"role":"user","content":"Hi","call_id":"c"}]`), "input.0.call_id", "not a member of a message item"},
		{"message without role", withInput(`[{"content":"Hi"}]`), "input.0.role", "required"},
		{"bad role", withInput(`[{"role":"tool","content":"Hi"}]`), "input.0.role", "user, assistant, system or developer"},
		{"missing content", withInput(`[{"role":"user"}]`), "input.0.content", "required"},
		{"content a number", withContent(`5`), "input.0.content", "string or an array"},
		{"empty content", withContent(`""`), "input.0.content", "non-empty"},
		{"no parts", withContent(`[]`), "input.0.content", "non-empty"},
		{"bad status", withInput(`[{"role":"user","content":"Hi","status":"done"}]`), "input.0.status", "in_progress, completed or incomplete"},
		{"part type", withContent(`[{"type":"input_file","file_id":"file_1"}]`), "input.0.content.0.type", `content part type "input_file" is not supported`},
		{"part type with its members", withContent(`[{"type":"input_file","file_data":"JVBERi0=","filename":"a.pdf"}]`), "input.0.content.0.type", `content part type "input_file" is not supported`},
		{"input_audio", withContent(`[{"type":"input_audio","input_audio":{"data":"x","format":"wav"}}]`), "input.0.content.0.type", `"input_audio" is not supported`},
		{"missing part type", withContent(`[{"text":"a"}]`), "input.0.content.0.type", "required"},
		{"member of another part type", withContent(`[{"type":"input_text","text":"a","image_url":"https://e.com/a.png"}]`), "input.0.content.0.image_url", "not a member of an input_text part"},
		{"input_text without text", withContent(`[{"type":"input_text"}]`), "input.0.content.0.text", "required"},
		{"output_text in a user message", withContent(`[{"type":"output_text","text":"a"}]`), "input.0.content.0.type", "not allowed in a user message"},
		{"input_text in an assistant message", withInput(`[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"input_text","text":"b"}]}]`), "input.1.content.0.type", "not allowed in an assistant message"},
		{"image in a system message", withInput(`[{"role":"system","content":[{"type":"input_image","image_url":"https://e.com/a.png"}]}]`), "input.0.content.0.type", "not allowed in a system message"},
		{"annotations", withInput(`[{"role":"assistant","content":[{"type":"output_text","text":"a","annotations":[{"type":"url_citation","url":"https://e.com"}]}]}]`), "input.0.content.0.annotations", "not supported"},
		{"logprobs", withInput(`[{"role":"assistant","content":[{"type":"output_text","text":"a","logprobs":[{"token":"a"}]}]}]`), "input.0.content.0.logprobs", "not supported"},
		{"image file_id", withContent(`[{"type":"input_image","file_id":"file_1"}]`), "input.0.content.0.file_id", "no Files API"},
		{"image without url", withContent(`[{"type":"input_image","detail":"auto"}]`), "input.0.content.0.image_url", "required"},
		{"image url scheme", withContent(`[{"type":"input_image","image_url":"file:///etc/passwd"}]`), "input.0.content.0.image_url", "http or https"},
		{"image data URL not an image", withContent(`[{"type":"input_image","image_url":"data:text/html;base64,PGI+"}]`), "input.0.content.0.image_url", "data:image/"},
		{"image data URL not base64", withContent(`[{"type":"input_image","image_url":"data:image/png;base64,not base64!"}]`), "input.0.content.0.image_url", "data:image/"},
		{"image detail", withContent(`[{"type":"input_image","image_url":"https://e.com/a.png","detail":"max"}]`), "input.0.content.0.detail", "auto, low or high"},
		{"function_call without call_id", withInput(`[{"type":"function_call","name":"f","arguments":"{}"}]`), "input.0.call_id", "required"},
		{"function_call without name", withInput(`[{"type":"function_call","call_id":"c","arguments":"{}"}]`), "input.0.name", "required"},
		{"function_call without arguments", withInput(`[{"type":"function_call","call_id":"c","name":"f"}]`), "input.0.arguments", "required"},
		{"function_call arguments an object", withInput(`[{"type":"function_call","call_id":"c","name":"f","arguments":{}}]`), "input.0.arguments", "expected a string"},
		{"function_call with content", withInput(`[{"type":"function_call","call_id":"c","name":"f","arguments":"{}","content":"x"}]`), "input.0.content", "not a member of a function_call item"},
		{"function_call_output without output", withInput(`[{"type":"function_call_output","call_id":"c"}]`), "input.0.output", "required"},
		{"function_call_output without call_id", withInput(`[{"type":"function_call_output","output":"x"}]`), "input.0.call_id", "required"},
		{"function_call_output image", withInput(`[{"type":"function_call_output","call_id":"c","output":[{"type":"input_image","image_url":"https://e.com/a.png"}]}]`), "input.0.output.0.type", "text only"},
		{"function_call_output output_text", withInput(`[{"type":"function_call_output","call_id":"c","output":[{"type":"output_text","text":"x"}]}]`), "input.0.output.0.type", "not allowed in a function_call_output"},
		{"built-in tool", ok + `,"tools":[{"type":"web_search_preview"}]}`, "tools.0.type", `tool type "web_search_preview" is not supported`},
		{"built-in tool with its members", ok + `,"tools":[{"type":"file_search","vector_store_ids":["vs_1"]}]}`, "tools.0.type", `tool type "file_search" is not supported`},
		{"computer tool", ok + `,"tools":[{"type":"computer_use_preview","display_width":1024,"display_height":768,"environment":"browser"}]}`, "tools.0.type", `"computer_use_preview" is not supported`},
		{"tool without type", ok + `,"tools":[{"name":"f"}]}`, "tools.0.type", "required"},
		{"chat-style tool", ok + `,"tools":[{"type":"function","function":{"name":"f"}}]}`, "tools.0.function", "unknown field"},
		{"tool name", ok + `,"tools":[{"type":"function","name":"get weather"}]}`, "tools.0.name", "must match"},
		{"tool without name", ok + `,"tools":[{"type":"function","parameters":{}}]}`, "tools.0.name", "required"},
		{"tool parameters not an object", ok + `,"tools":[{"type":"function","name":"f","parameters":"object"}]}`, "tools.0.parameters", "object"},
		{"tool_choice mode", ok + `,"tools":[` + fn + `],"tool_choice":"any"}`, "tool_choice", "auto, none, required"},
		{"tool_choice a number", ok + `,"tools":[` + fn + `],"tool_choice":1}`, "tool_choice", "a string"},
		{"tool_choice required without tools", ok + `,"tool_choice":"required"}`, "tool_choice", "needs tools"},
		{"tool_choice function without tools", ok + `,"tool_choice":{"type":"function","name":"f"}}`, "tool_choice", "needs tools"},
		{"tool_choice without name", ok + `,"tools":[` + fn + `],"tool_choice":{"type":"function"}}`, "tool_choice.name", "required"},
		{"tool_choice built-in", ok + `,"tools":[` + fn + `],"tool_choice":{"type":"file_search"}}`, "tool_choice.type", `tool choice type "file_search" is not supported`},
		{"tool_choice allowed_tools", ok + `,"tools":[` + fn + `],"tool_choice":{"type":"allowed_tools","mode":"auto","tools":[]}}`, "tool_choice.type", `"allowed_tools" is not supported`},
		{"tool_choice unknown member", ok + `,"tools":[` + fn + `],"tool_choice":{"type":"function","name":"f","x":1}}`, "tool_choice.x", "unknown field"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			chat, stream, model, err := Request([]byte(tc.body))
			if err == nil {
				t.Fatalf("accepted %s as %s", tc.body, chat)
			}
			if chat != nil || stream || model != "" {
				t.Errorf("an error and a result: %s %v %q", chat, stream, model)
			}
			msg := err.Error()
			if tc.field != "" && !strings.HasPrefix(msg, tc.field+": ") {
				t.Errorf("error %q does not name %s", msg, tc.field)
			}
			if !strings.Contains(msg, tc.want) {
				t.Errorf("error %q does not say %q", msg, tc.want)
			}
		})
	}
}
