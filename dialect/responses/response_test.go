package responses

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestResponseFixtures(t *testing.T) {
	for _, name := range []string{"text", "tool_calls"} {
		t.Run(name, func(t *testing.T) {
			got, err := Response(readFile(t, filepath.Join("response", name+".json")))
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, got, readFile(t, filepath.Join("response", name+".responses.json")))
		})
	}
}

// echoes are the members of every response that echo the request: the
// API's defaults (see the package documentation).
const echoes = `"background":false,"error":null,"instructions":null,"max_output_tokens":null,"metadata":{},` +
	`"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"store":false,` +
	`"temperature":1,"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":1,"truncation":"disabled","user":null`

func TestResponse(t *testing.T) {
	// completion builds a chat completion around a message, a finish
	// reason and a usage.
	completion := func(message, finish, usage string) string {
		s := `{"id":"chatcmpl-abc","object":"chat.completion","created":7,"model":"gpt-4o","choices":[{"index":0,"message":` + message + `,"logprobs":null,"finish_reason":` + finish + `}]`
		if usage != "" {
			s += `,"usage":` + usage
		}
		return s + `}`
	}
	// response builds the expected answer around a status, the
	// incomplete details, the output and a usage.
	response := func(status, incomplete, output, usage string) string {
		return `{"id":"resp_abc","object":"response","created_at":7,"status":"` + status + `","incomplete_details":` + incomplete +
			`,"model":"gpt-4o","output":` + output + `,"usage":` + usage + `,` + echoes + `}`
	}
	msg := func(status, parts string) string {
		return `{"id":"msg_abc","type":"message","status":"` + status + `","role":"assistant","content":` + parts + `}`
	}
	text := func(s string) string { return `{"type":"output_text","text":"` + s + `","annotations":[]}` }
	call := func(i, status, id, name, args string) string {
		return `{"id":"fc_abc_` + i + `","type":"function_call","status":"` + status + `","arguments":"` + args + `","call_id":"` + id + `","name":"` + name + `"}`
	}
	const u = `{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}`
	const ru = `{"input_tokens":10,"input_tokens_details":{"cached_tokens":0},"output_tokens":5,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":15}`
	for _, tc := range []struct {
		name, chat, want string
	}{
		{"text", completion(`{"role":"assistant","content":"Hi there"}`, `"stop"`, u),
			response("completed", "null", `[`+msg("completed", `[`+text("Hi there")+`]`)+`]`, ru)},
		{"length", completion(`{"role":"assistant","content":"Once upon"}`, `"length"`, u),
			response("incomplete", `{"reason":"max_output_tokens"}`, `[`+msg("incomplete", `[`+text("Once upon")+`]`)+`]`, ru)},
		{"content_filter", completion(`{"role":"assistant","content":""}`, `"content_filter"`, u),
			response("incomplete", `{"reason":"content_filter"}`, `[]`, ru)},
		{"refusal", completion(`{"role":"assistant","content":null,"refusal":"I can't help with that."}`, `"stop"`, u),
			response("completed", "null", `[`+msg("completed", `[{"type":"refusal","refusal":"I can't help with that."}]`)+`]`, ru)},
		{"text and tool call", completion(`{"role":"assistant","content":"Let me look.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"search","arguments":"{\"q\": \"go\"}"}}]}`, `"tool_calls"`, u),
			response("completed", "null", `[`+msg("completed", `[`+text("Let me look.")+`]`)+`,`+call("1", "completed", "call_1", "search", `{\"q\": \"go\"}`)+`]`, ru)},
		{"tool call finished with stop", completion(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"now","arguments":""}}]}`, `"stop"`, u),
			response("completed", "null", `[`+call("0", "completed", "call_1", "now", "")+`]`, ru)},
		{"tool call cut by length", completion(`{"role":"assistant","content":"A","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"call_2","type":"function","function":{"name":"f","arguments":"{\"a"}}]}`, `"length"`, u),
			response("incomplete", `{"reason":"max_output_tokens"}`, `[`+msg("completed", `[`+text("A")+`]`)+`,`+call("1", "completed", "call_1", "f", "{}")+`,`+call("2", "incomplete", "call_2", "f", `{\"a`)+`]`, ru)},
		{"legacy function_call finish", completion(`{"role":"assistant","content":"x"}`, `"function_call"`, u),
			response("completed", "null", `[`+msg("completed", `[`+text("x")+`]`)+`]`, ru)},
		{"no usage", completion(`{"role":"assistant","content":"x"}`, `"stop"`, ``),
			response("completed", "null", `[`+msg("completed", `[`+text("x")+`]`)+`]`, `null`)},
		{"cached and reasoning tokens", completion(`{"role":"assistant","content":"x"}`, `"stop"`, `{"prompt_tokens":2048,"completion_tokens":700,"total_tokens":2748,"prompt_tokens_details":{"cached_tokens":1920},"completion_tokens_details":{"reasoning_tokens":640}}`),
			response("completed", "null", `[`+msg("completed", `[`+text("x")+`]`)+`]`, `{"input_tokens":2048,"input_tokens_details":{"cached_tokens":1920},"output_tokens":700,"output_tokens_details":{"reasoning_tokens":640},"total_tokens":2748}`)},
		// Reasoning tokens are not in the books: clamped to sense.
		{"reasoning over its total", completion(`{"role":"assistant","content":"x"}`, `"stop"`, `{"prompt_tokens":5,"completion_tokens":1,"completion_tokens_details":{"reasoning_tokens":-3}}`),
			response("completed", "null", `[`+msg("completed", `[`+text("x")+`]`)+`]`, `{"input_tokens":5,"input_tokens_details":{"cached_tokens":0},"output_tokens":1,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":6}`)},
		// A report the gateway's books refused as unreadable: the answer
		// is delivered, its usage null (no false counts).
		{"cached over prompt tokens", completion(`{"role":"assistant","content":"x"}`, `"stop"`, `{"prompt_tokens":5,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":9}}`),
			response("completed", "null", `[`+msg("completed", `[`+text("x")+`]`)+`]`, `null`)},
		{"negative prompt tokens", completion(`{"role":"assistant","content":"x"}`, `"stop"`, `{"prompt_tokens":-100000,"completion_tokens":1}`),
			response("completed", "null", `[`+msg("completed", `[`+text("x")+`]`)+`]`, `null`)},
		{"fractional tokens", completion(`{"role":"assistant","content":"x"}`, `"stop"`, `{"prompt_tokens":10.5,"completion_tokens":1}`),
			response("completed", "null", `[`+msg("completed", `[`+text("x")+`]`)+`]`, `null`)},
		{"unknown members ignored", `{"id":"chatcmpl-abc","created":7,"model":"gpt-4o","obfuscation":"x","choices":[{"index":0,"message":{"role":"assistant","content":"x","reasoning_content":"hm","annotations":[]},"finish_reason":"stop","extra":1}]}`,
			response("completed", "null", `[`+msg("completed", `[`+text("x")+`]`)+`]`, `null`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Response([]byte(tc.chat))
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, got, []byte(tc.want))
		})
	}
}

func TestResponseID(t *testing.T) {
	for _, tc := range []struct{ chat, want string }{
		{`{"id":"chatcmpl-B9MBs8","model":"m","choices":[{"message":{"content":"x"},"finish_reason":"stop"}]}`, "resp_B9MBs8"},
		{`{"id":"gen-1747-xyz","model":"m","choices":[{"message":{"content":"x"},"finish_reason":"stop"}]}`, "resp_gen-1747-xyz"},
	} {
		got, err := Response([]byte(tc.chat))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(string(got), `{"id":"`+tc.want+`"`) {
			t.Errorf("%s: want id %s", got, tc.want)
		}
	}
	// Without an id: a digest, the same for the same answer.
	chat := []byte(`{"model":"m","choices":[{"message":{"content":"x"},"finish_reason":"stop"}]}`)
	a, err := Response(chat)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := Response(chat)
	other, _ := Response([]byte(`{"model":"m","choices":[{"message":{"content":"y"},"finish_reason":"stop"}]}`))
	id := func(b []byte) string {
		_, rest, _ := strings.Cut(string(b), `"id":"`)
		id, _, _ := strings.Cut(rest, `"`)
		return id
	}
	if !strings.HasPrefix(id(a), "resp_") || len(id(a)) != len("resp_")+24 || id(a) != id(b) || id(a) == id(other) {
		t.Errorf("digest ids %q %q %q", id(a), id(b), id(other))
	}
}

// TestResponseErrors: an answer that cannot be said in the Responses form
// is an error, not a guess.
func TestResponseErrors(t *testing.T) {
	for _, tc := range []struct{ name, chat, want string }{
		{"not JSON", `{"id":`, "reading"},
		{"duplicate member", `{"id":"a","id":"b","choices":[]}`, "reading"},
		{"invalid UTF-8", "{\"id\":\"a\",\"choices\":[{\"index\":0,\"message\":{\"content\":\"\xff\"},\"finish_reason\":\"stop\"}]}", "reading"},
		{"no choices", `{"id":"chatcmpl-1","choices":[]}`, "0 choices"},
		{"two choices", `{"id":"chatcmpl-1","choices":[{"index":0,"message":{"content":"a"},"finish_reason":"stop"},{"index":1,"message":{"content":"b"},"finish_reason":"stop"}]}`, "2 choices"},
		{"no message", `{"id":"chatcmpl-1","choices":[{"index":0,"finish_reason":"stop"}]}`, "no message"},
		{"content not a string", `{"id":"chatcmpl-1","choices":[{"index":0,"message":{"content":[{"type":"text","text":"a"}]},"finish_reason":"stop"}]}`, "reading"},
		{"tool call without id", `{"id":"chatcmpl-1","choices":[{"index":0,"message":{"content":null,"tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`, "no id"},
		{"tool call without name", `{"id":"chatcmpl-1","choices":[{"index":0,"message":{"content":null,"tool_calls":[{"id":"c","type":"function","function":{"arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`, "no name"},
		{"no finish_reason", `{"id":"chatcmpl-1","choices":[{"index":0,"message":{"content":"a"},"finish_reason":null}]}`, "no finish_reason"},
		{"unknown finish_reason", `{"id":"chatcmpl-1","choices":[{"index":0,"message":{"content":"a"},"finish_reason":"paused"}]}`, "unknown finish_reason"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := Response([]byte(tc.chat))
			if err == nil {
				t.Fatalf("translated to %s", got)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
}
