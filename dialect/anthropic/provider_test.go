package anthropic

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	usagereport "github.com/sacpgw/gateway/internal/usage"
)

// The provider fixtures' answers and event streams were recorded from
// Anthropic's API (see testdata/README.md); the requests they answer are
// what Anthropic's own Go SDK sent. A chat request for the same
// conversation must translate into that very request.
var providerFixtures = []string{"tool_call", "tool_result", "tool_stream", "text_stream"}

func TestProviderRequestFixtures(t *testing.T) {
	for _, name := range providerFixtures {
		t.Run(name, func(t *testing.T) {
			chat := readFile(t, filepath.Join("provider", name+".chat.json"))
			got, stream, usage, err := ProviderRequest(chat, ProviderOptions{MaxTokens: 4096})
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, got, readFile(t, filepath.Join("provider", name+".messages.json")))
			if wantStream := strings.HasSuffix(name, "_stream"); stream != wantStream {
				t.Errorf("stream = %v, want %v", stream, wantStream)
			}
			if want := name == "tool_stream"; usage != want {
				t.Errorf("includeUsage = %v, want %v", usage, want)
			}
		})
	}
}

func TestProviderResponseFixtures(t *testing.T) {
	for _, name := range []string{"tool_call", "tool_result"} {
		t.Run(name, func(t *testing.T) {
			got, err := ProviderResponse(readFile(t, filepath.Join("provider", name+".answer.json")), 1761841056)
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, got, readFile(t, filepath.Join("provider", name+".completion.json")))
		})
	}
}

// slowReader gives at most n bytes per Read, so that events arrive cut at
// every place.
type slowReader struct {
	r io.Reader
	n func() int
}

func (s *slowReader) Read(p []byte) (int, error) {
	if n := s.n(); len(p) > n {
		p = p[:n]
	}
	return s.r.Read(p)
}

func (s *slowReader) Close() error { return nil }

func readChunks(t testing.TB, in []byte, includeUsage bool, n func() int) []byte {
	t.Helper()
	out, err := io.ReadAll(NewChunkReader(&slowReader{r: bytes.NewReader(in), n: n}, includeUsage, 1761841056))
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func TestChunkReaderFixtures(t *testing.T) {
	for _, tc := range []struct {
		name         string
		includeUsage bool
	}{{"tool_stream", true}, {"text_stream", false}} {
		t.Run(tc.name, func(t *testing.T) {
			in := readFile(t, filepath.Join("provider", tc.name+".anthropic.sse"))
			want := readFile(t, filepath.Join("provider", tc.name+".openai.sse"))
			rng := rand.New(rand.NewPCG(1, uint64(len(in))))
			for _, slicing := range []struct {
				name string
				n    func() int
			}{
				{"whole", func() int { return len(in) }},
				{"byte by byte", func() int { return 1 }},
				{"random", func() int { return 1 + rng.IntN(64) }},
			} {
				if got := readChunks(t, in, tc.includeUsage, slicing.n); !bytes.Equal(got, want) {
					t.Fatalf("%s: got\n%s\nwant\n%s", slicing.name, got, want)
				}
			}
		})
	}
}

func TestProviderRequestRefusals(t *testing.T) {
	const user = `"messages":[{"role":"user","content":"hi"}]`
	for _, tc := range []struct {
		name, body, want string
	}{
		{"seed", `{"model":"c",` + user + `,"seed":1}`, "seed: not supported by this model's provider (Anthropic)"},
		{"logprobs", `{"model":"c",` + user + `,"logprobs":true}`, "logprobs: not supported"},
		{"unknown field", `{"model":"c",` + user + `,"colour":1}`, "colour: unknown field"},
		{"message name", `{"model":"c","messages":[{"role":"user","content":"hi","name":"bob"}]}`, "messages.0.name: unknown field"},
		{"duplicate key", `{"model":"c",` + user + `,"model":"d"}`, "model: the member appears more than once"},
		{"n", `{"model":"c",` + user + `,"n":2}`, "n: the Messages API gives one answer"},
		{"temperature over 1", `{"model":"c",` + user + `,"temperature":1.5}`, "temperature: must be between 0 and 1"},
		{"json_schema", `{"model":"c",` + user + `,"response_format":{"type":"json_schema"}}`, `response_format.type: "json_schema" is not supported`},
		{"strict tool", `{"model":"c",` + user + `,"tools":[{"type":"function","function":{"name":"f","strict":true}}]}`, "tools.0.function.strict"},
		{"late system", `{"model":"c","messages":[{"role":"user","content":"hi"},{"role":"system","content":"obey"}]}`, "messages.1.role: a system message after the conversation began"},
		{"prefill", `{"model":"c","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Sure"}]}`, "the last message is the assistant's"},
		{"only system", `{"model":"c","messages":[{"role":"system","content":"obey"}]}`, "messages: no user message"},
		{"audio part", `{"model":"c","messages":[{"role":"user","content":[{"type":"input_audio","input_audio":{"data":"AA==","format":"wav"}}]}]}`, "messages.0.content.0"},
		{"svg image", `{"model":"c","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/svg+xml;base64,AA=="}}]}]}`, `image type "image/svg+xml"`},
		{"arguments not an object", `{"model":"c","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":"[1]"}}]},{"role":"tool","tool_call_id":"a","content":"x"}]}`, "messages.1.tool_calls.0.function.arguments: must be a JSON object"},
		{"tool message without id", `{"model":"c","messages":[{"role":"user","content":"hi"},{"role":"tool","content":"x"}]}`, "messages.1.tool_call_id: required"},
		{"max_tokens 0", `{"model":"c",` + user + `,"max_tokens":0}`, "max_tokens: must be at least 1"},
		{"stream_options without stream", `{"model":"c",` + user + `,"stream_options":{"include_usage":true}}`, "stream_options: only with stream"},
		{"embeddings", `{"model":"c","input":"hi"}`, "input: not supported"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, _, err := ProviderRequest([]byte(tc.body), ProviderOptions{MaxTokens: 64})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

func TestProviderRequest(t *testing.T) {
	for _, tc := range []struct {
		name, chat, want string
	}{
		{"system prompts joined, default max_tokens, user as metadata",
			`{"model":"c","user":"u-1","messages":[{"role":"system","content":"a"},{"role":"developer","content":[{"type":"text","text":"b"}]},{"role":"user","content":"hi"}]}`,
			`{"model":"c","max_tokens":64,"system":"a\n\nb","messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"metadata":{"user_id":"u-1"}}`},
		{"stop, sampling, tool choice, no parallel calls",
			`{"model":"c","max_tokens":9,"stop":"END","temperature":0.2,"top_p":0.9,"tool_choice":"required","parallel_tool_calls":false,"tools":[{"type":"function","function":{"name":"f"}}],"messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"c","max_tokens":9,"stop_sequences":["END"],"temperature":0.2,"top_p":0.9,"tools":[{"name":"f","input_schema":{"type":"object","properties":{}}}],"tool_choice":{"type":"any","disable_parallel_tool_use":true},"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`},
		{"named tool choice",
			`{"model":"c","tool_choice":{"type":"function","function":{"name":"f"}},"tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],"messages":[{"role":"user","content":"hi"}]}`,
			`{"model":"c","max_tokens":64,"tools":[{"name":"f","input_schema":{"type":"object"}}],"tool_choice":{"type":"tool","name":"f"},"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}]}`},
		{"images: data URL and https",
			`{"model":"c","messages":[{"role":"user","content":[{"type":"text","text":"what?"},{"type":"image_url","image_url":{"url":"data:image/png;base64,iVBORw0K"}},{"type":"image_url","image_url":{"url":"https://x.test/a.jpg"}}]}]}`,
			`{"model":"c","max_tokens":64,"messages":[{"role":"user","content":[{"type":"text","text":"what?"},{"type":"image","source":{"type":"base64","media_type":"image/png","data":"iVBORw0K"}},{"type":"image","source":{"type":"url","url":"https://x.test/a.jpg"}}]}]}`},
		{"a re-ask: an empty answer dropped, the two user turns one",
			`{"model":"c","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":""},{"role":"user","content":"again"}]}`,
			`{"model":"c","max_tokens":64,"messages":[{"role":"user","content":[{"type":"text","text":"hi"},{"type":"text","text":"again"}]}]}`},
		{"parallel tool results in one turn, then the user",
			`{"model":"c","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"a","type":"function","function":{"name":"f","arguments":""}},{"id":"b","type":"function","function":{"name":"g","arguments":"{\"x\": 1}"}}]},{"role":"tool","tool_call_id":"a","content":""},{"role":"tool","tool_call_id":"b","content":"2"},{"role":"user","content":"thanks"}]}`,
			`{"model":"c","max_tokens":64,"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]},{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"f","input":{}},{"type":"tool_use","id":"b","name":"g","input":{"x":1}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a"},{"type":"tool_result","tool_use_id":"b","content":[{"type":"text","text":"2"}]},{"type":"text","text":"thanks"}]}]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, _, err := ProviderRequest([]byte(tc.chat), ProviderOptions{MaxTokens: 64})
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, got, []byte(tc.want))
		})
	}
}

func TestProviderResponse(t *testing.T) {
	msg := func(content, stop, usage string) string {
		return `{"id":"msg_1","type":"message","role":"assistant","model":"claude-x","content":` + content + `,"stop_reason":` + stop + `,"stop_sequence":null,"usage":` + usage + `,"container":null}`
	}
	const u = `{"input_tokens":10,"output_tokens":5}`
	completion := func(message, finish, usage string) string {
		return `{"id":"chatcmpl-1","object":"chat.completion","created":7,"model":"claude-x","choices":[{"index":0,"message":` + message + `,"logprobs":null,"finish_reason":"` + finish + `"}],"usage":` + usage + `}`
	}
	const cu = `{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}`
	for _, tc := range []struct {
		name, answer, want, err string
	}{
		{"text", msg(`[{"type":"text","text":"Hi"}]`, `"end_turn"`, u), completion(`{"role":"assistant","content":"Hi"}`, "stop", cu), ""},
		{"thinking dropped", msg(`[{"type":"thinking","thinking":"hmm","signature":"s"},{"type":"text","text":"Hi"}]`, `"end_turn"`, u), completion(`{"role":"assistant","content":"Hi"}`, "stop", cu), ""},
		{"stop sequence", msg(`[{"type":"text","text":"Hi"}]`, `"stop_sequence"`, u), completion(`{"role":"assistant","content":"Hi"}`, "stop", cu), ""},
		{"max tokens", msg(`[{"type":"text","text":"Hi"}]`, `"max_tokens"`, u), completion(`{"role":"assistant","content":"Hi"}`, "length", cu), ""},
		{"refusal", msg(`[]`, `"refusal"`, u), completion(`{"role":"assistant","content":""}`, "content_filter", cu), ""},
		{"cache counts add up", msg(`[{"type":"text","text":"Hi"}]`, `"end_turn"`, `{"input_tokens":10,"cache_creation_input_tokens":100,"cache_read_input_tokens":1000,"output_tokens":5}`),
			completion(`{"role":"assistant","content":"Hi"}`, "stop", `{"prompt_tokens":1110,"completion_tokens":5,"total_tokens":1115,"prompt_tokens_details":{"cached_tokens":1000}}`), ""},
		{"tool only", msg(`[{"type":"tool_use","id":"toolu_1","name":"f","input":{ "a" : [1, 2] }}]`, `"tool_use"`, u),
			completion(`{"role":"assistant","tool_calls":[{"id":"toolu_1","type":"function","function":{"name":"f","arguments":"{\"a\":[1,2]}"}}]}`, "tool_calls", cu), ""},
		{"null cache counts", msg(`[{"type":"text","text":"Hi"}]`, `"end_turn"`, `{"input_tokens":10,"cache_creation_input_tokens":null,"cache_read_input_tokens":null,"output_tokens":5}`),
			completion(`{"role":"assistant","content":"Hi"}`, "stop", cu), ""},
		// An unreadable count is passed on as it came, without sums, for
		// the books to refuse (the answer is not the translation's to fail).
		{"negative input", msg(`[{"type":"text","text":"Hi"}]`, `"end_turn"`, `{"input_tokens":-100000,"cache_read_input_tokens":50,"output_tokens":5}`),
			completion(`{"role":"assistant","content":"Hi"}`, "stop", `{"prompt_tokens":-100000,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":50}}`), ""},
		{"fractional output", msg(`[{"type":"text","text":"Hi"}]`, `"end_turn"`, `{"input_tokens":10,"output_tokens":10.5}`),
			completion(`{"role":"assistant","content":"Hi"}`, "stop", `{"prompt_tokens":10,"completion_tokens":10.5}`), ""},
		{"negative cache read", msg(`[{"type":"text","text":"Hi"}]`, `"end_turn"`, `{"input_tokens":10,"cache_read_input_tokens":-5,"output_tokens":5}`),
			completion(`{"role":"assistant","content":"Hi"}`, "stop", `{"prompt_tokens":-5,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":-5}}`), ""},
		{"pause_turn", msg(`[{"type":"text","text":"Hi"}]`, `"pause_turn"`, u), "", `stop_reason "pause_turn"`},
		{"no stop reason", msg(`[{"type":"text","text":"Hi"}]`, `null`, u), "", "no stop_reason"},
		{"server tool block", msg(`[{"type":"server_tool_use","id":"s","name":"web_search","input":{}}]`, `"end_turn"`, u), "", `type "server_tool_use"`},
		{"tool input not an object", msg(`[{"type":"tool_use","id":"t","name":"f","input":[1]}]`, `"tool_use"`, u), "", "object input"},
		{"not a message", `{"type":"error","error":{"type":"api_error","message":"x"}}`, "", "not an assistant message"},
		{"duplicate member", `{"type":"message","type":"message"}`, "", "duplicate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ProviderResponse([]byte(tc.answer), 7)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, got, []byte(tc.want))
		})
	}
}

// The usage chunk of a stream whose counts cannot be believed carries them
// as they came, and the gateway's usage reader refuses it: a negative
// count in message_delta cannot lower what message_start reported.
func TestChunkReaderUnreadableUsage(t *testing.T) {
	in := "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n" +
		"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"Hi\"}}\n\n" +
		"event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":0}\n\n" +
		"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":-50000}}\n\n" +
		"event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	out := string(readChunks(t, []byte(in), true, func() int { return 7 }))
	if !strings.HasSuffix(out, "data: [DONE]\n\n") {
		t.Fatalf("the answer was not delivered whole:\n%s", out)
	}
	events := strings.Split(strings.TrimSuffix(out, "\n\n"), "\n\n")
	var last struct {
		Usage json.RawMessage `json:"usage"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(events[len(events)-2], "data: ")), &last); err != nil {
		t.Fatal(err)
	}
	sameJSON(t, last.Usage, []byte(`{"prompt_tokens":3,"completion_tokens":-50000}`))
	if _, err := usagereport.Read(last.Usage); usagereport.Reason(err) != "completion_tokens is negative" {
		t.Errorf("the usage reader says %v of %s", err, last.Usage)
	}
}

func TestChunkReaderFailures(t *testing.T) {
	const start = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"usage\":{\"input_tokens\":3,\"output_tokens\":1}}}\n\n"
	const text = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n" +
		"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"Hi\"}}\n\n"
	for _, tc := range []struct {
		name, in, want string
	}{
		{"overloaded mid-stream", start + text + "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"Overloaded\"}}\n\n", "(overloaded_error): Overloaded"},
		{"ended without message_stop", start + text, ""},
		{"stopped without a stop reason", start + text + "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n", "without a stop reason"},
		{"unknown block type", start + "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"server_tool_use\",\"id\":\"s\",\"name\":\"web_search\",\"input\":{}}}\n\n", `"server_tool_use"`},
		{"citations delta", start + text + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"citations_delta\"}}\n\n", `"citations_delta" delta in a text block`},
		{"delta before start", text, "out of order"},
		{"unreadable event", start + "data: {\"type\":\n\n", "cannot read"},
		{"a block never opened", start + "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":3,\"delta\":{\"type\":\"text_delta\",\"text\":\"x\"}}\n\n", "never opened"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out := string(readChunks(t, []byte(tc.in), true, func() int { return 5 }))
			if strings.Contains(out, "[DONE]") {
				t.Fatalf("an incomplete stream ended with [DONE]:\n%s", out)
			}
			events := strings.Split(strings.TrimSuffix(out, "\n\n"), "\n\n")
			last := events[len(events)-1]
			if tc.want == "" {
				if strings.Contains(last, `"error"`) {
					t.Fatalf("want the stream cut without an error event, got\n%s", out)
				}
				return
			}
			var ev struct {
				Error struct{ Message, Type string }
			}
			if err := json.Unmarshal([]byte(strings.TrimSpace(strings.TrimPrefix(last, "data: "))), &ev); err != nil || !strings.Contains(ev.Error.Message, tc.want) || ev.Error.Type != "server_error" {
				t.Fatalf("last event %q (%v), want an error containing %q", last, err, tc.want)
			}
		})
	}
}

// failingReader is an upstream connection that breaks.
type failingReader struct{ data []byte }

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		return 0, errors.New("connection reset")
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}
func (f *failingReader) Close() error { return nil }

func TestChunkReaderPassesConnectionErrors(t *testing.T) {
	_, err := io.ReadAll(NewChunkReader(&failingReader{data: []byte("event: ping\ndata: {\"type\":\"ping\"}\n\n")}, false, 1))
	if err == nil || err.Error() != "connection reset" {
		t.Fatalf("err = %v, want the connection's", err)
	}
}

func TestProviderError(t *testing.T) {
	for _, tc := range []struct {
		status int
		body   string
		want   string
	}{
		{529, `{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"},"request_id":"req_1"}`, `{"error":{"message":"Overloaded","type":"server_error","param":null,"code":"overloaded_error"}}`},
		{400, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too large"}}`, `{"error":{"message":"max_tokens: too large","type":"invalid_request_error","param":null,"code":"invalid_request_error"}}`},
		{429, `{"type":"error","error":{"type":"rate_limit_error","message":"slow down"}}`, `{"error":{"message":"slow down","type":"rate_limit_error","param":null,"code":"rate_limit_error"}}`},
		{502, `<html>bad gateway</html>`, `{"error":{"message":"The provider (Anthropic) answered 502.","type":"server_error","param":null,"code":null}}`},
	} {
		sameJSON(t, ProviderError(tc.status, []byte(tc.body)), []byte(tc.want))
	}
}

// With PromptCache, the stable prefix carries Anthropic's cache
// breakpoint: the system prompt (cached with the tools before it), or the
// last tool without one; a request with neither is sent as it was.
func TestProviderRequestPromptCache(t *testing.T) {
	const tools = `"tools":[{"type":"function","function":{"name":"a"}},{"type":"function","function":{"name":"b"}}]`
	const user = `{"role":"user","content":"hi"}`
	const userOut = `{"role":"user","content":[{"type":"text","text":"hi"}]}`
	const schema = `"input_schema":{"type":"object","properties":{}}`
	for _, tc := range []struct {
		name, chat, want string
	}{
		{"system prompt", `{"model":"c","messages":[{"role":"system","content":"be brief"},` + user + `],` + tools + `}`,
			`{"model":"c","max_tokens":64,"system":[{"type":"text","text":"be brief","cache_control":{"type":"ephemeral"}}],"messages":[` + userOut + `],"tools":[{"name":"a",` + schema + `},{"name":"b",` + schema + `}]}`},
		{"tools only", `{"model":"c","messages":[` + user + `],` + tools + `}`,
			`{"model":"c","max_tokens":64,"messages":[` + userOut + `],"tools":[{"name":"a",` + schema + `},{"name":"b",` + schema + `,"cache_control":{"type":"ephemeral"}}]}`},
		{"neither", `{"model":"c","messages":[` + user + `]}`, `{"model":"c","max_tokens":64,"messages":[` + userOut + `]}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, _, _, err := ProviderRequest([]byte(tc.chat), ProviderOptions{MaxTokens: 64, PromptCache: true})
			if err != nil {
				t.Fatal(err)
			}
			sameJSON(t, got, []byte(tc.want))
		})
	}
}
