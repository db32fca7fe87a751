package anthropic

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
		{"basic", false, "claude-sonnet-4-5-20250929"},
		{"agent_stream", true, "claude-sonnet-4-5-20250929"},
		{"tool_round_trip", false, "claude-opus-4-1-20250805"},
		{"images", false, "claude-haiku-4-5"},
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
	for _, tc := range []struct {
		name string
		// extra is added to {"model":"m","max_tokens":8,"messages":[user]}
		// (a messages member replaces the default).
		extra string
		// want is added to {"model":"m","max_tokens":8} (messages too
		// when want has none).
		want string
	}{
		{"minimal", ``, ``},
		{"system string", `"system":"Be brief."`,
			`"messages":[{"role":"system","content":"Be brief."},` + user + `]`},
		{"system blocks joined", `"system":[{"type":"text","text":"One."},{"type":"text","text":"Two.","cache_control":{"type":"ephemeral"}}]`,
			`"messages":[{"role":"system","content":"One.\nTwo."},` + user + `]`},
		{"empty system dropped", `"system":""`, ``},
		{"null members are absent", `"system":null,"temperature":null,"top_k":null,"tools":null,"metadata":null,"stream":null,"thinking":null`, ``},
		{"temperature 0 kept", `"temperature":0`, `"temperature":0`},
		{"temperature and top_p", `"temperature":1,"top_p":0.5`, `"temperature":1,"top_p":0.5`},
		{"stop_sequences", `"stop_sequences":["###"]`, `"stop":["###"]`},
		{"empty stop_sequences", `"stop_sequences":[]`, ``},
		{"stream", `"stream":true`, `"stream":true,"stream_options":{"include_usage":true}`},
		{"stream false", `"stream":false`, ``},
		{"metadata.user_id", `"metadata":{"user_id":"u-42"}`, `"user":"u-42"`},
		{"metadata without user_id", `"metadata":{}`, ``},
		{"thinking enabled dropped", `"thinking":{"type":"enabled","budget_tokens":2048}`, ``},
		{"thinking disabled", `"thinking":{"type":"disabled"}`, ``},
		{"thinking adaptive", `"thinking":{"type":"adaptive"}`, ``},
		{"tools and tool_choice auto", `"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto"}`,
			`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"auto"`},
		{"tool_choice any", `"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"any"}`,
			`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"required"`},
		{"tool_choice tool", `"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"f"}`,
			`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":{"type":"function","function":{"name":"f"}}`},
		{"tool_choice none", `"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"none"}`,
			`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"none"`},
		{"disable_parallel_tool_use", `"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"auto","disable_parallel_tool_use":true}`,
			`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"auto","parallel_tool_calls":false`},
		{"parallel allowed is the default", `"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"any","disable_parallel_tool_use":false}`,
			`"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"tool_choice":"required"`},
		{"custom tool type", `"tools":[{"type":"custom","name":"f","description":"Does f.","input_schema":{"type":"object","properties":{}}}]`,
			`"tools":[{"type":"function","function":{"name":"f","description":"Does f.","parameters":{"type":"object","properties":{}}}}]`},
		{"one text block is a string", `"messages":[{"role":"user","content":[{"type":"text","text":"Hi"}]}]`,
			`"messages":[{"role":"user","content":"Hi"}]`},
		{"text block citations null", `"messages":[{"role":"user","content":[{"type":"text","text":"Hi","citations":null}]}]`,
			`"messages":[{"role":"user","content":"Hi"}]`},
		{"assistant text blocks as parts", `"messages":[` + user + `,{"role":"assistant","content":[{"type":"text","text":"A"},{"type":"text","text":"B","citations":[]}]},` + user + `]`,
			`"messages":[` + user + `,{"role":"assistant","content":[{"type":"text","text":"A"},{"type":"text","text":"B"}]},` + user + `]`},
		{"assistant tool_use only", `"messages":[` + user + `,{"role":"assistant","content":[{"type":"tool_use","id":"toolu_1","name":"f","input":{ "a" : [1, 2] }}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1"}]}]`,
			`"messages":[` + user + `,{"role":"assistant","content":null,"tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"f","arguments":"{\"a\":[1,2]}"}}]},{"role":"tool","content":"","tool_call_id":"toolu_1"}]`},
		{"tool_result is_error without content", `"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","is_error":true}]}]`,
			`"messages":[{"role":"tool","content":"[tool error]","tool_call_id":"toolu_1"}]`},
		{"tool_result is_error false", `"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_1","is_error":false,"content":"ok"}]}]`,
			`"messages":[{"role":"tool","content":"ok","tool_call_id":"toolu_1"}]`},
		{"tool_result text blocks joined", `"messages":[{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}]`,
			`"messages":[{"role":"tool","content":"a\nb","tool_call_id":"t"}]`},
		{"thinking-only assistant turn dropped", `"messages":[` + user + `,{"role":"assistant","content":[{"type":"redacted_thinking","data":"EmwKAhgBEgy3va3pzix"}]},` + user + `]`,
			`"messages":[` + user + `,` + user + `]`},
		{"image url", `"messages":[{"role":"user","content":[{"type":"image","source":{"type":"url","url":"https://example.com/a.png"}}]}]`,
			`"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"https://example.com/a.png"}}]}]`},
		{"image base64", `"messages":[{"role":"user","content":[{"type":"image","source":{"type":"base64","media_type":"image/webp","data":"UklGRg=="}}]}]`,
			`"messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/webp;base64,UklGRg=="}}]}]`},
		{"unicode kept", `"messages":[{"role":"user","content":"héllo \u2028 😀 <b>&"}]`,
			`"messages":[{"role":"user","content":"héllo \u2028 😀 <b>&"}]`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := `{"model":"m","max_tokens":8,"messages":[` + user + `]`
			if strings.HasPrefix(tc.extra, `"messages"`) {
				body = `{"model":"m","max_tokens":8`
			}
			if tc.extra != "" {
				body += "," + tc.extra
			}
			body += "}"
			want := `{"model":"m","max_tokens":8`
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

// TestRequestRoundTrip: the tool_use and tool_result of a conversation keep
// their ids, so the upstream can pair each result with its call.
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
// Anthropic itself refuses, is a client error naming the field.
func TestRequestRefusals(t *testing.T) {
	const ok = `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"Hi"}]`
	withMsg := func(content string) string {
		return `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":` + content + `}]}`
	}
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
		{"invalid UTF-8 in a string", "{\"model\":\"m\xff\",\"max_tokens\":8,\"messages\":[{\"role\":\"user\",\"content\":\"Hi\"}]}", "", "UTF-8"},
		{"invalid UTF-8 in content", withMsg("\"caf\xc3\""), "", "UTF-8"},
		{"duplicate top-level member", ok + `,"model":"other"}`, "model", "more than once"},
		{"duplicate nested member", withMsg(`[{"type":"text","text":"a","text":"b"}]`), "messages.0.content.0.text", "more than once"},
		{"duplicate inside tool input", `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"x"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":{"a":1,"a":2}}]},{"role":"user","content":"y"}]}`, "messages.1.content.0.input.a", "more than once"},
		{"unknown top-level field", ok + `,"service_tier":"auto"}`, "service_tier", "unknown field"},
		{"member differing by case", ok + `,"Model":"m"}`, "Model", "unknown field"},
		{"unknown message member", `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"Hi","name":"bob"}]}`, "messages.0.name", "unknown field"},
		{"unknown metadata member", ok + `,"metadata":{"user_id":"u","tenant":"t"}}`, "metadata.tenant", "unknown field"},
		{"unknown block type", withMsg(`[{"type":"document","source":{"type":"text","media_type":"text/plain","data":"x"}}]`), "messages.0.content.0.type", `"document" is not supported`},
		{"unknown block type alone", withMsg(`[{"type":"search_result"}]`), "messages.0.content.0.type", `"search_result" is not supported`},
		{"missing block type", withMsg(`[{"text":"a"}]`), "messages.0.content.0.type", "required"},
		{"member of another block type", withMsg(`[{"type":"text","text":"a","tool_use_id":"t"}]`), "messages.0.content.0.tool_use_id", "not a member of a text block"},
		{"missing model", `{"max_tokens":8,"messages":[{"role":"user","content":"Hi"}]}`, "model", "required"},
		{"empty model", `{"model":"","max_tokens":8,"messages":[{"role":"user","content":"Hi"}]}`, "model", "required"},
		{"missing max_tokens", `{"model":"m","messages":[{"role":"user","content":"Hi"}]}`, "max_tokens", "required"},
		{"null max_tokens", `{"model":"m","max_tokens":null,"messages":[{"role":"user","content":"Hi"}]}`, "max_tokens", "required"},
		{"max_tokens 0", `{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"Hi"}]}`, "max_tokens", "at least 1"},
		{"max_tokens fraction", `{"model":"m","max_tokens":1.5,"messages":[{"role":"user","content":"Hi"}]}`, "max_tokens", "expected an integer"},
		{"max_tokens string", `{"model":"m","max_tokens":"8","messages":[{"role":"user","content":"Hi"}]}`, "max_tokens", "expected an integer, got a string"},
		{"missing messages", `{"model":"m","max_tokens":8}`, "messages", "at least one"},
		{"empty messages", `{"model":"m","max_tokens":8,"messages":[]}`, "messages", "at least one"},
		{"stream not a boolean", ok + `,"stream":"yes"}`, "stream", "expected a boolean"},
		{"top_k", ok + `,"top_k":40}`, "top_k", "no top-k"},
		{"temperature over 1", ok + `,"temperature":1.5}`, "temperature", "between 0 and 1"},
		{"negative top_p", ok + `,"top_p":-0.1}`, "top_p", "between 0 and 1"},
		{"empty stop sequence", ok + `,"stop_sequences":["a",""]}`, "stop_sequences.1", "empty"},
		{"bad role", `{"model":"m","max_tokens":8,"messages":[{"role":"system","content":"Hi"}]}`, "messages.0.role", "user or assistant"},
		{"missing content", `{"model":"m","max_tokens":8,"messages":[{"role":"user"}]}`, "messages.0.content", "required"},
		{"content a number", withMsg(`5`), "messages.0.content", "string or an array"},
		{"empty content", withMsg(`""`), "messages.0.content", "non-empty"},
		{"no blocks", withMsg(`[]`), "messages.0.content", "non-empty"},
		{"empty text block", withMsg(`[{"type":"text","text":""}]`), "messages.0.content.0.text", "non-empty"},
		{"citations", withMsg(`[{"type":"text","text":"a","citations":[{"type":"char_location"}]}]`), "messages.0.content.0.citations", "not supported"},
		{"prefill", `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"Hi"},{"role":"assistant","content":"{"}]}`, "messages.1", "prefill"},
		{"tool_use in a user turn", withMsg(`[{"type":"tool_use","id":"t","name":"f","input":{}}]`), "messages.0.content.0.type", "not allowed in a user message"},
		{"tool_result in an assistant turn", `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_result","tool_use_id":"t"}]},{"role":"user","content":"b"}]}`, "messages.1.content.0.type", "not allowed in an assistant message"},
		{"image in an assistant turn", `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"image","source":{"type":"url","url":"https://e.com/a.png"}}]},{"role":"user","content":"b"}]}`, "messages.1.content.0.type", "not allowed in an assistant message"},
		{"thinking in a user turn", withMsg(`[{"type":"thinking","thinking":"hm","signature":"s"}]`), "messages.0.content.0.type", "not allowed in a user message"},
		{"tool_result after text", withMsg(`[{"type":"text","text":"a"},{"type":"tool_result","tool_use_id":"t","content":"r"}]`), "messages.0.content.1", "must come before"},
		{"tool_result without id", withMsg(`[{"type":"tool_result","content":"r"}]`), "messages.0.content.0.tool_use_id", "required"},
		{"image in a tool_result", withMsg(`[{"type":"tool_result","tool_use_id":"t","content":[{"type":"image","source":{"type":"url","url":"https://e.com/a.png"}}]}]`), "messages.0.content.0.content.0.type", "text only"},
		{"tool_result in a tool_result", withMsg(`[{"type":"tool_result","tool_use_id":"t","content":[{"type":"tool_result","tool_use_id":"u"}]}]`), "messages.0.content.0.content.0.type", "not allowed in a tool_result"},
		{"content nested in a tool_result's content", withMsg(`[{"type":"tool_result","tool_use_id":"t","content":[{"type":"tool_result","tool_use_id":"u","content":[{"type":"text","text":"x"}]}]}]`), "messages.0.content.0.content.0.content", "nested too deeply"},
		{"tool_use input not an object", `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f","input":[1]}]},{"role":"user","content":"b"}]}`, "messages.1.content.0.input", "object"},
		{"tool_use without input", `{"model":"m","max_tokens":8,"messages":[{"role":"user","content":"a"},{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"f"}]},{"role":"user","content":"b"}]}`, "messages.1.content.0.input", "required"},
		{"file image source", withMsg(`[{"type":"image","source":{"type":"file","file_id":"file_011"}}]`), "messages.0.content.0.source.type", "file sources"},
		{"image media type", withMsg(`[{"type":"image","source":{"type":"base64","media_type":"image/bmp","data":"Qk0="}}]`), "messages.0.content.0.source.media_type", "image/jpeg"},
		{"image data not base64", withMsg(`[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"not base64!"}}]`), "messages.0.content.0.source.data", "base64"},
		{"image url scheme", withMsg(`[{"type":"image","source":{"type":"url","url":"file:///etc/passwd"}}]`), "messages.0.content.0.source.url", "http or https"},
		{"image url with data", withMsg(`[{"type":"image","source":{"type":"url","url":"https://e.com/a.png","data":"AAAA"}}]`), "messages.0.content.0.source", "url only"},
		{"cache_control type", withMsg(`[{"type":"text","text":"a","cache_control":{"type":"persistent"}}]`), "messages.0.content.0.cache_control.type", "ephemeral"},
		{"cache_control ttl", withMsg(`[{"type":"text","text":"a","cache_control":{"type":"ephemeral","ttl":"1d"}}]`), "messages.0.content.0.cache_control.ttl", "5m or 1h"},
		{"system image block", ok + `,"system":[{"type":"image","source":{"type":"url","url":"https://e.com/a.png"}}]}`, "system.0.type", "text blocks"},
		{"server tool", ok + `,"tools":[{"type":"web_search_20250305","name":"web_search"}]}`, "tools.0.type", "not supported"},
		{"server tool with its members", ok + `,"tools":[{"type":"web_search_20250305","name":"web_search","max_uses":5}]}`, "tools.0.max_uses", "unknown field"},
		{"tool name", ok + `,"tools":[{"name":"get weather","input_schema":{"type":"object"}}]}`, "tools.0.name", "must match"},
		{"tool without schema", ok + `,"tools":[{"name":"f"}]}`, "tools.0.input_schema", "required"},
		{"tool schema not an object", ok + `,"tools":[{"name":"f","input_schema":"object"}]}`, "tools.0.input_schema", "object"},
		{"tool_choice without tools", ok + `,"tool_choice":{"type":"auto"}}`, "tool_choice", "providing tools"},
		{"tool_choice type", ok + `,"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"required"}}`, "tool_choice.type", "auto, any, tool or none"},
		{"tool_choice tool without name", ok + `,"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"tool"}}`, "tool_choice.name", "required"},
		{"tool_choice name with auto", ok + `,"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"auto","name":"f"}}`, "tool_choice.name", "only allowed"},
		{"tool_choice none with parallel", ok + `,"tools":[{"name":"f","input_schema":{}}],"tool_choice":{"type":"none","disable_parallel_tool_use":true}}`, "tool_choice.disable_parallel_tool_use", "not allowed"},
		{"thinking type", ok + `,"thinking":{"type":"on"}}`, "thinking.type", "enabled, disabled or adaptive"},
		{"thinking without budget", ok + `,"thinking":{"type":"enabled"}}`, "thinking.budget_tokens", "required"},
		{"thinking unknown member", ok + `,"thinking":{"type":"enabled","budget_tokens":1024,"display":"full"}}`, "thinking.display", "unknown field"},
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
