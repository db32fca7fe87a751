package anthropic

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/dialect/internal/dialecttest"
	"github.com/sacpgw/gateway/dialect/internal/neutral"
)

// TestStreamFixtures translates the recorded-shape streams of
// testdata/stream and compares byte for byte, whole, byte by byte, in
// random slices, and with CRLF and CR line ends.
func TestStreamFixtures(t *testing.T) {
	for _, tc := range []struct{ name, model string }{
		{"text", "claude-sonnet-4-5"},
		{"tool_calls", ""},
		{"error", "claude-sonnet-4-5"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := readFile(t, filepath.Join("stream", tc.name+".openai.sse"))
			want := readFile(t, filepath.Join("stream", tc.name+".anthropic.sse"))
			dialecttest.StreamFixture(t, newStream, tc.model, in, want, func(t testing.TB, out []byte) { checkStream(t, out, true) })
		})
	}
}

// The OpenAI stream chunks are the shared ones.
var (
	chunk  = dialecttest.Chunk
	text   = dialecttest.Text
	finish = dialecttest.Finish
)

func call(index int, id, name, args string) string {
	head := `{"index":0,"delta":{"tool_calls":[{"index":` + string(rune('0'+index))
	if id != "" {
		head += `,"id":"` + id + `","type":"function","function":{"name":"` + name + `","arguments":"` + args + `"}`
	} else {
		head += `,"function":{"arguments":"` + args + `"}`
	}
	return head + `}]},"finish_reason":null}`
}

const (
	usageChunk = `{"prompt_tokens":12,"completion_tokens":3,"total_tokens":15}`
	done       = "data: [DONE]\n\n"
	startEv    = "event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_x\",\"type\":\"message\",\"role\":\"assistant\",\"model\":\"m\",\"content\":[],\"stop_reason\":null,\"stop_sequence\":null,\"usage\":{\"input_tokens\":0,\"output_tokens\":0}}}\n\n"
	textStart  = "event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"text\",\"text\":\"\"}}\n\n"
	stopEv     = "event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"
	pingEv     = "event: ping\ndata: {\"type\":\"ping\"}\n\n"
)

func textDeltaEv(i int, s string) string {
	return "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":" + string(rune('0'+i)) + ",\"delta\":{\"type\":\"text_delta\",\"text\":\"" + s + "\"}}\n\n"
}

func blockStopEv(i int) string {
	return "event: content_block_stop\ndata: {\"type\":\"content_block_stop\",\"index\":" + string(rune('0'+i)) + "}\n\n"
}

func deltaEv(reason, usage string) string {
	return "event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"" + reason + "\",\"stop_sequence\":null},\"usage\":" + usage + "}\n\n"
}

func errorEv(typ, msg string) string {
	return "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"" + typ + "\",\"message\":\"" + msg + "\"}}\n\n"
}

const anthropicUsage = `{"input_tokens":12,"output_tokens":3}`

func TestStream(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
	}{
		{"usage in the finish chunk: message_delta at once",
			chunk(text("Hi"), "") + chunk(finish("stop"), usageChunk) + done,
			startEv + textStart + textDeltaEv(0, "Hi") + blockStopEv(0) + deltaEv("end_turn", anthropicUsage) + stopEv},
		{"no usage chunk: message_delta at [DONE]",
			chunk(text("Hi"), "") + chunk(finish("stop"), "") + done,
			startEv + textStart + textDeltaEv(0, "Hi") + blockStopEv(0) + deltaEv("end_turn", `{"input_tokens":0,"output_tokens":0}`) + stopEv},
		{"usage before the finish (a provider that sends it on every chunk)",
			chunk(text("Hi"), `{"prompt_tokens":12,"completion_tokens":1}`) + chunk(finish("stop"), usageChunk) + chunk(``, `{"prompt_tokens":99,"completion_tokens":99}`) + done,
			strings.Replace(startEv, `"input_tokens":0`, `"input_tokens":12`, 1) + textStart + textDeltaEv(0, "Hi") + blockStopEv(0) + deltaEv("end_turn", anthropicUsage) + stopEv},
		{"an unreadable usage chunk: the answer whole, no counts",
			chunk(text("Hi"), "") + chunk(finish("stop"), "") + chunk(``, `{"prompt_tokens":10.5,"completion_tokens":-3}`) + done,
			startEv + textStart + textDeltaEv(0, "Hi") + blockStopEv(0) + deltaEv("end_turn", `{"input_tokens":0,"output_tokens":0}`) + stopEv},
		{"length", chunk(text("Hi"), "") + chunk(finish("length"), "") + chunk(``, usageChunk) + done,
			startEv + textStart + textDeltaEv(0, "Hi") + blockStopEv(0) + deltaEv("max_tokens", anthropicUsage) + stopEv},
		{"content_filter", chunk(text("Hi"), "") + chunk(finish("content_filter"), "") + chunk(``, usageChunk) + done,
			startEv + textStart + textDeltaEv(0, "Hi") + blockStopEv(0) + deltaEv("refusal", anthropicUsage) + stopEv},
		{"refusal delta is text", chunk(`{"index":0,"delta":{"refusal":"No."},"finish_reason":null}`, "") + chunk(finish("stop"), usageChunk) + done,
			startEv + textStart + textDeltaEv(0, "No.") + blockStopEv(0) + deltaEv("end_turn", anthropicUsage) + stopEv},
		{"empty answer", chunk(`{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}`, "") + chunk(finish("stop"), usageChunk) + done,
			startEv + deltaEv("end_turn", anthropicUsage) + stopEv},
		{"tool call without arguments", chunk(call(0, "call_1", "now", ""), "") + chunk(finish("tool_calls"), usageChunk) + done,
			startEv +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"call_1\",\"name\":\"now\",\"input\":{}}}\n\n" +
				blockStopEv(0) + deltaEv("tool_use", anthropicUsage) + stopEv},
		{"tool call finished with stop is tool_use", chunk(call(0, "call_1", "now", "{}"), "") + chunk(finish("stop"), usageChunk) + done,
			startEv +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"call_1\",\"name\":\"now\",\"input\":{}}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n" +
				blockStopEv(0) + deltaEv("tool_use", anthropicUsage) + stopEv},
		{"text after a tool call opens a new block", chunk(call(0, "call_1", "now", "{}"), "") + chunk(text("Done."), "") + chunk(finish("tool_calls"), usageChunk) + done,
			startEv +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"call_1\",\"name\":\"now\",\"input\":{}}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n" +
				blockStopEv(0) +
				strings.Replace(textStart, `"index":0`, `"index":1`, 1) + textDeltaEv(1, "Done.") + blockStopEv(1) +
				deltaEv("tool_use", anthropicUsage) + stopEv},
		{"comments become pings, other fields are ignored", ": keep-alive\n" + "event: chunk\nid: 7\nretry: 100\n" + chunk(text("Hi"), "") + ":\n" + chunk(finish("stop"), usageChunk) + done,
			pingEv + startEv + textStart + textDeltaEv(0, "Hi") + pingEv + blockStopEv(0) + deltaEv("end_turn", anthropicUsage) + stopEv},
		{"data split over lines joins with LF", "data: {\"id\":\"chatcmpl-x\",\"model\":\"gpt-4o\",\ndata: \"choices\":[" + text("Hi") + "]}\n\n" + chunk(finish("stop"), usageChunk) + done,
			startEv + textStart + textDeltaEv(0, "Hi") + blockStopEv(0) + deltaEv("end_turn", anthropicUsage) + stopEv},
		{"data without a space", "data:" + strings.TrimPrefix(chunk(text("Hi"), ""), "data: ") + chunk(finish("stop"), usageChunk) + done,
			startEv + textStart + textDeltaEv(0, "Hi") + blockStopEv(0) + deltaEv("end_turn", anthropicUsage) + stopEv},
		{"bytes after [DONE] are dropped", chunk(text("Hi"), "") + chunk(finish("stop"), usageChunk) + done + chunk(text("more"), "") + done,
			startEv + textStart + textDeltaEv(0, "Hi") + blockStopEv(0) + deltaEv("end_turn", anthropicUsage) + stopEv},

		// The ends that are errors.
		{"no [DONE]: error at Close", chunk(text("Hi"), ""),
			startEv + textStart + textDeltaEv(0, "Hi") + errorEv("api_error", "The upstream stream ended before it was complete.")},
		{"an unfinished event is dropped", chunk(text("Hi"), "") + chunk(finish("stop"), usageChunk) + "data: [DONE]\n",
			startEv + textStart + textDeltaEv(0, "Hi") + blockStopEv(0) + deltaEv("end_turn", anthropicUsage) + errorEv("api_error", "The upstream stream ended before it was complete.")},
		{"nothing at all", "",
			errorEv("api_error", "The upstream stream ended before it was complete.")},
		{"[DONE] before any chunk", ": keep-alive\n" + done,
			pingEv + errorEv("api_error", "The upstream stream ended without an answer.")},
		{"[DONE] without a finish_reason", chunk(text("Hi"), "") + done,
			startEv + textStart + textDeltaEv(0, "Hi") + errorEv("api_error", "The upstream stream ended without a finish_reason: the answer may be incomplete.")},
		{"error before any chunk", `data: {"error":{"message":"Denied by policy.","type":"permission_error","code":"policy_denied"}}` + "\n\n",
			errorEv("permission_error", "Denied by policy.")},
		{"error with a rate limit type", chunk(text("Hi"), "") + `data: {"error":{"message":"Slow down.","type":"rate_limit_error"}}` + "\n\n" + chunk(finish("stop"), "") + done,
			startEv + textStart + textDeltaEv(0, "Hi") + errorEv("rate_limit_error", "Slow down.")},
		{"error without a message", `data: {"error":{"type":"server_error"}}` + "\n\n",
			errorEv("api_error", "The upstream failed.")},
		{"not JSON", "data: {oops}\n\n",
			errorEv("api_error", "The upstream sent a stream event that is not a chat completion chunk.")},
		{"null", "data: null\n\n",
			errorEv("api_error", "The upstream sent a stream event that is not a chat completion chunk.")},
		{"tool call deltas without an index", chunk(`{"index":0,"delta":{"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"a\""}}]},"finish_reason":null}`, "") +
			chunk(`{"index":0,"delta":{"tool_calls":[{"id":"call_1","function":{"arguments":":1}"}}]},"finish_reason":null}`, "") +
			chunk(`{"index":0,"delta":{"tool_calls":[{"id":"call_2","type":"function","function":{"name":"g","arguments":"{}"}}]},"finish_reason":"tool_calls"}`, usageChunk) + done,
			startEv +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"call_1\",\"name\":\"f\",\"input\":{}}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\\\"a\\\"\"}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\":1}\"}}\n\n" +
				blockStopEv(0) +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"call_2\",\"name\":\"g\",\"input\":{}}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n" +
				blockStopEv(1) + deltaEv("tool_use", anthropicUsage) + stopEv},
		{"not a chunk", "data: [1,2]\n\n",
			errorEv("api_error", "The upstream sent a stream event that is not a chat completion chunk.")},
		{"duplicate member in a chunk", `data: {"id":"a","id":"b","choices":[]}` + "\n\n",
			errorEv("api_error", "The upstream sent a stream event that is not a chat completion chunk.")},
		{"invalid UTF-8 in a chunk", "data: {\"id\":\"a\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\xff\"}}]}\n\n",
			errorEv("api_error", "The upstream sent a stream event that is not a chat completion chunk.")},
		{"two choices", chunk(text("a")+`,{"index":1,"delta":{"content":"b"},"finish_reason":null}`, ""),
			startEv + errorEv("api_error", "The upstream sent several choices; the Messages API answers with one.")},
		{"a second choice's index", chunk(`{"index":1,"delta":{"content":"b"},"finish_reason":null}`, ""),
			startEv + errorEv("api_error", "The upstream sent several choices; the Messages API answers with one.")},
		{"content after the finish", chunk(finish("stop"), "") + chunk(text("late"), "") + done,
			startEv + errorEv("api_error", "The upstream sent content after its finish_reason.")},
		{"unknown finish_reason", chunk(text("Hi"), "") + chunk(finish("paused"), ""),
			startEv + textStart + textDeltaEv(0, "Hi") + errorEv("api_error", "The upstream finished with an unknown finish_reason.")},
		{"tool call without a name", chunk(call(0, "call_1", "", "{}"), ""),
			startEv + errorEv("api_error", "The upstream started a tool call without an id or a name.")},
		{"a tool call cut short by the next", chunk(call(0, "call_1", "f", "{"), "") + chunk(call(1, "call_2", "g", "{}"), "") + chunk(call(0, "", "", "}"), ""),
			startEv +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"call_1\",\"name\":\"f\",\"input\":{}}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{\"}}\n\n" +
				errorEv("api_error", "The upstream's tool call arguments are not a JSON object.")},
		{"a closed tool call again", chunk(call(0, "call_1", "f", "{}"), "") + chunk(call(1, "call_2", "g", "{}"), "") + chunk(call(0, "", "", " "), ""),
			startEv +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"call_1\",\"name\":\"f\",\"input\":{}}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n" +
				blockStopEv(0) +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":1,\"content_block\":{\"type\":\"tool_use\",\"id\":\"call_2\",\"name\":\"g\",\"input\":{}}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":1,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"{}\"}}\n\n" +
				errorEv("api_error", "The upstream interleaved the deltas of its tool calls.")},
		{"arguments that are not an object", chunk(call(0, "call_1", "f", "[1]"), "") + chunk(finish("tool_calls"), usageChunk) + done,
			startEv +
				"event: content_block_start\ndata: {\"type\":\"content_block_start\",\"index\":0,\"content_block\":{\"type\":\"tool_use\",\"id\":\"call_1\",\"name\":\"f\",\"input\":{}}}\n\n" +
				"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"input_json_delta\",\"partial_json\":\"[1]\"}}\n\n" +
				errorEv("api_error", "The upstream's tool call arguments are not a JSON object.")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := feedWhole(t, "m", []byte(tc.in))
			if string(got) != tc.want {
				t.Fatalf("\n got:\n%s\nwant:\n%s", got, tc.want)
			}
			checkStream(t, got, true)
			for seed := range uint64(20) {
				if again := feed(t, "m", []byte(tc.in), rand.New(rand.NewPCG(seed, 3))); !bytes.Equal(again, got) {
					t.Fatalf("seed %d:\n%s", seed, again)
				}
			}
			// The inputs have no raw line feed but their line ends.
			for _, eol := range []string{"\r\n", "\r"} {
				in := strings.ReplaceAll(tc.in, "\n", eol)
				if again := feedWhole(t, "m", []byte(in)); !bytes.Equal(again, got) {
					t.Fatalf("line ends %q:\n%s", eol, again)
				}
				for seed := range uint64(20) {
					if again := feed(t, "m", []byte(in), rand.New(rand.NewPCG(seed, 5))); !bytes.Equal(again, got) {
						t.Fatalf("line ends %q, seed %d:\n%s", eol, seed, again)
					}
				}
			}
		})
	}
}

// TestStreamModel: the model given wins; none given, the chunk's.
func TestStreamModel(t *testing.T) {
	in := []byte(chunk(text("Hi"), "") + chunk(finish("stop"), usageChunk) + done)
	if got := feedWhole(t, "claude-x", in); !bytes.Contains(got, []byte(`"model":"claude-x"`)) {
		t.Errorf("given model not used:\n%s", got)
	}
	if got := feedWhole(t, "", in); !bytes.Contains(got, []byte(`"model":"gpt-4o"`)) {
		t.Errorf("chunk's model not used:\n%s", got)
	}
	if got := feedWhole(t, "bad\xffname", in); !bytes.Contains(got, []byte(`"model":"bad`+"\uFFFD"+`name"`)) {
		t.Errorf("invalid UTF-8 model:\n%s", got)
	}
}

// TestStreamClose: Close ends the stream once; Write after it fails.
func TestStreamClose(t *testing.T) {
	var out bytes.Buffer
	s := NewStream(&out, "m")
	if _, err := s.Write([]byte(chunk(text("Hi"), "") + chunk(finish("stop"), usageChunk) + done)); err != nil {
		t.Fatal(err)
	}
	n := out.Len()
	for range 2 {
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if out.Len() != n {
		t.Errorf("Close after [DONE] wrote %q", out.Bytes()[n:])
	}
	if strings.Count(out.String(), "message_stop") != 2 { // the event name and its type
		t.Errorf("message_stop not written exactly once:\n%s", out.String())
	}
	if _, err := s.Write([]byte(done)); !errors.Is(err, errClosed) {
		t.Errorf("Write after Close: %v", err)
	}

	// Unfinished: one error event, however often Close is called.
	out.Reset()
	s = NewStream(&out, "m")
	if _, err := s.Write([]byte(chunk(text("Hi"), ""))); err != nil {
		t.Fatal(err)
	}
	_ = s.Close()
	_ = s.Close()
	if c := strings.Count(out.String(), "event: error"); c != 1 {
		t.Errorf("%d error events:\n%s", c, out.String())
	}
}

// TestStreamWriterError: the client's failure reaches the caller, once per
// call, and nothing more is written.
func TestStreamWriterError(t *testing.T) {
	dialecttest.WriterError(t, newStream, chunk(text("Hi"), ""), chunk(text("more"), ""))
}

// TestStreamTooLarge: a line that never ends is refused at the bound,
// whether it came whole or in pieces.
func TestStreamTooLarge(t *testing.T) {
	in := append([]byte("data: "), bytes.Repeat([]byte("x"), neutral.MaxEvent)...)
	want := errorEv("api_error", "The upstream sent an event too large to translate.")
	if got := feedWhole(t, "m", in); string(got) != want {
		t.Errorf("whole: %.200s", got)
	}
	var out bytes.Buffer
	s := NewStream(&out, "m")
	for i := 0; i < len(in); i += 1 << 20 {
		_, _ = s.Write(in[i:min(i+1<<20, len(in))])
	}
	_ = s.Close()
	if out.String() != want {
		t.Errorf("pieces: %.200s", out.Bytes())
	}
	// A complete line over the bound: the same.
	if got := feedWhole(t, "m", append(in, '\n', '\n')); string(got) != want {
		t.Errorf("complete line: %.200s", got)
	}
}

// TestStreamWriteBatches: one Write to w per Write, of whole events.
func TestStreamWriteBatches(t *testing.T) {
	var writes [][]byte
	w := writerFunc(func(p []byte) (int, error) {
		writes = append(writes, bytes.Clone(p))
		return len(p), nil
	})
	s := NewStream(w, "m")
	in := chunk(text("a"), "") + chunk(text("b"), "") + chunk(finish("stop"), usageChunk)
	half := len(in) / 2
	_, _ = s.Write([]byte(in[:half]))
	_, _ = s.Write([]byte(in[half:] + done))
	if len(writes) != 2 {
		t.Fatalf("%d writes", len(writes))
	}
	for _, p := range writes {
		if _, err := parseEvents(p); err != nil {
			t.Errorf("a write of partial events: %v", err)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
