package anthropic

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
			sameJSON(t, got, readFile(t, filepath.Join("response", name+".anthropic.json")))
		})
	}
}

func TestResponse(t *testing.T) {
	// completion builds a chat completion around a message, a finish
	// reason and a usage.
	completion := func(message, finish, usage string) string {
		s := `{"id":"chatcmpl-abc","object":"chat.completion","created":1,"model":"gpt-4o","choices":[{"index":0,"message":` + message + `,"logprobs":null,"finish_reason":` + finish + `}]`
		if usage != "" {
			s += `,"usage":` + usage
		}
		return s + `}`
	}
	// message builds the expected answer around content, a stop reason
	// and a usage.
	message := func(content, stop, usage string) string {
		return `{"id":"msg_abc","type":"message","role":"assistant","model":"gpt-4o","content":` + content +
			`,"stop_reason":"` + stop + `","stop_sequence":null,"usage":` + usage + `}`
	}
	const u = `{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}`
	const au = `{"input_tokens":10,"output_tokens":5}`
	for _, tc := range []struct {
		name, chat, want string
	}{
		{"text", completion(`{"role":"assistant","content":"Hi there"}`, `"stop"`, u),
			message(`[{"type":"text","text":"Hi there"}]`, "end_turn", au)},
		{"length", completion(`{"role":"assistant","content":"Once upon"}`, `"length"`, u),
			message(`[{"type":"text","text":"Once upon"}]`, "max_tokens", au)},
		{"content_filter", completion(`{"role":"assistant","content":""}`, `"content_filter"`, u),
			message(`[]`, "refusal", au)},
		{"refusal text", completion(`{"role":"assistant","content":null,"refusal":"I can't help with that."}`, `"stop"`, u),
			message(`[{"type":"text","text":"I can't help with that."}]`, "end_turn", au)},
		{"text and tool call", completion(`{"role":"assistant","content":"Let me look.","tool_calls":[{"id":"call_1","type":"function","function":{"name":"search","arguments":"{\"q\": \"go\"}"}}]}`, `"tool_calls"`, u),
			message(`[{"type":"text","text":"Let me look."},{"type":"tool_use","id":"call_1","name":"search","input":{"q":"go"}}]`, "tool_use", au)},
		{"tool call finished with stop", completion(`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"now","arguments":""}}]}`, `"stop"`, u),
			message(`[{"type":"tool_use","id":"call_1","name":"now","input":{}}]`, "tool_use", au)},
		{"legacy function_call finish", completion(`{"role":"assistant","content":"x"}`, `"function_call"`, u),
			message(`[{"type":"text","text":"x"}]`, "tool_use", au)},
		{"no usage", completion(`{"role":"assistant","content":"x"}`, `"stop"`, ``),
			message(`[{"type":"text","text":"x"}]`, "end_turn", `{"input_tokens":0,"output_tokens":0}`)},
		{"cached tokens", completion(`{"role":"assistant","content":"x"}`, `"stop"`, `{"prompt_tokens":2048,"completion_tokens":7,"total_tokens":2055,"prompt_tokens_details":{"cached_tokens":1920}}`),
			message(`[{"type":"text","text":"x"}]`, "end_turn", `{"input_tokens":128,"cache_read_input_tokens":1920,"output_tokens":7}`)},
		// A report the gateway's books refused as unreadable: the answer
		// is delivered, the counts are not shown (zeros: Anthropic's
		// shape has no "unknown").
		{"cached tokens over prompt tokens", completion(`{"role":"assistant","content":"x"}`, `"stop"`, `{"prompt_tokens":5,"completion_tokens":1,"prompt_tokens_details":{"cached_tokens":9}}`),
			message(`[{"type":"text","text":"x"}]`, "end_turn", `{"input_tokens":0,"output_tokens":0}`)},
		{"negative prompt tokens", completion(`{"role":"assistant","content":"x"}`, `"stop"`, `{"prompt_tokens":-100000,"completion_tokens":1}`),
			message(`[{"type":"text","text":"x"}]`, "end_turn", `{"input_tokens":0,"output_tokens":0}`)},
		{"fractional tokens", completion(`{"role":"assistant","content":"x"}`, `"stop"`, `{"prompt_tokens":10.5,"completion_tokens":1}`),
			message(`[{"type":"text","text":"x"}]`, "end_turn", `{"input_tokens":0,"output_tokens":0}`)},
		{"unknown members ignored", `{"id":"chatcmpl-abc","model":"gpt-4o","obfuscation":"x","choices":[{"index":0,"message":{"role":"assistant","content":"x","reasoning_content":"hm","annotations":[]},"finish_reason":"stop","extra":1}]}`,
			message(`[{"type":"text","text":"x"}]`, "end_turn", `{"input_tokens":0,"output_tokens":0}`)},
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
		{`{"id":"chatcmpl-B9MBs8","model":"m","choices":[{"message":{"content":"x"},"finish_reason":"stop"}]}`, "msg_B9MBs8"},
		{`{"id":"gen-1747-xyz","model":"m","choices":[{"message":{"content":"x"},"finish_reason":"stop"}]}`, "msg_gen-1747-xyz"},
	} {
		got, err := Response([]byte(tc.chat))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(got), `"id":"`+tc.want+`"`) {
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
	if !strings.HasPrefix(id(a), "msg_") || len(id(a)) != len("msg_")+24 || id(a) != id(b) || id(a) == id(other) {
		t.Errorf("digest ids %q %q %q", id(a), id(b), id(other))
	}
}

// TestResponseErrors: an answer that cannot be said in Anthropic's form is
// an error, not a guess.
func TestResponseErrors(t *testing.T) {
	for _, tc := range []struct{ name, chat, want string }{
		{"not JSON", `{"id":`, "reading"},
		{"duplicate member", `{"id":"a","id":"b","choices":[]}`, "reading"},
		{"no choices", `{"id":"chatcmpl-1","choices":[]}`, "0 choices"},
		{"two choices", `{"id":"chatcmpl-1","choices":[{"index":0,"message":{"content":"a"},"finish_reason":"stop"},{"index":1,"message":{"content":"b"},"finish_reason":"stop"}]}`, "2 choices"},
		{"no message", `{"id":"chatcmpl-1","choices":[{"index":0,"finish_reason":"stop"}]}`, "no message"},
		{"content not a string", `{"id":"chatcmpl-1","choices":[{"index":0,"message":{"content":[{"type":"text","text":"a"}]},"finish_reason":"stop"}]}`, "reading"},
		{"arguments not JSON", `{"id":"chatcmpl-1","choices":[{"index":0,"message":{"content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":"}}]},"finish_reason":"tool_calls"}]}`, "not valid JSON"},
		{"arguments an array", `{"id":"chatcmpl-1","choices":[{"index":0,"message":{"content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"[1]"}}]},"finish_reason":"tool_calls"}]}`, "not a JSON object"},
		{"arguments with a duplicate", `{"id":"chatcmpl-1","choices":[{"index":0,"message":{"content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{\"a\":1,\"a\":2}"}}]},"finish_reason":"tool_calls"}]}`, "not valid JSON"},
		{"tool call without id", `{"id":"chatcmpl-1","choices":[{"index":0,"message":{"content":null,"tool_calls":[{"type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`, "no id"},
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
