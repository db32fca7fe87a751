package responses

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/dialect/internal/dialecttest"
	"github.com/sacpgw/gateway/dialect/internal/neutral"
)

// TestStreamFixtures translates the streams of testdata/stream and
// compares byte for byte, whole, byte by byte, in random slices, and with
// CRLF and CR line ends.
func TestStreamFixtures(t *testing.T) {
	for _, tc := range []struct{ name, model string }{
		{"text", "gpt-4.1"},
		{"tool_calls", ""},
		{"error", "gpt-4.1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := readFile(t, filepath.Join("stream", tc.name+".openai.sse"))
			want := readFile(t, filepath.Join("stream", tc.name+".responses.sse"))
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

func refusal(s string) string {
	return `{"index":0,"delta":{"content":null,"refusal":"` + s + `"},"finish_reason":null}`
}

func call(index int, id, name, args string) string {
	head := `{"index":0,"delta":{"tool_calls":[{"index":` + strconv.Itoa(index)
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
	usageOutJ  = `{"input_tokens":12,"input_tokens_details":{"cached_tokens":0},"output_tokens":3,"output_tokens_details":{"reasoning_tokens":0},"total_tokens":15}`
)

// ev is one expected event: its JSON without the sequence_number and the
// closing brace (render adds them), or a comment line.
type ev struct {
	comment string
	body    string
}

// render writes the events as Stream does, numbering them.
func render(evs ...ev) string {
	var b strings.Builder
	seq := 0
	for _, e := range evs {
		if e.comment != "" {
			b.WriteString(e.comment + "\n")
			continue
		}
		typ := e.body[len(`{"type":"`):]
		typ = typ[:strings.IndexByte(typ, '"')]
		b.WriteString("event: " + typ + "\ndata: " + e.body + `,"sequence_number":` + strconv.Itoa(seq) + "}\n\n")
		seq++
	}
	return b.String()
}

func q(s string) string { return string(neutral.JSONString(s)) }

// resp is the response object of the stream of chunk (id chatcmpl-x,
// created 1, the model given "m").
func resp(status, incomplete, errJSON, output, usage string) string {
	return `{"id":"resp_x","object":"response","created_at":1,"status":"` + status + `","background":false,"error":` + errJSON +
		`,"incomplete_details":` + incomplete + `,"instructions":null,"max_output_tokens":null,"metadata":{},"model":"m","output":` + output +
		`,"parallel_tool_calls":true,"previous_response_id":null,"reasoning":{"effort":null,"summary":null},"store":false,"temperature":1,` +
		`"text":{"format":{"type":"text"}},"tool_choice":"auto","tools":[],"top_p":1,"truncation":"disabled","usage":` + usage + `,"user":null}`
}

var (
	keepAlive = ev{comment: ": keep-alive"}
	created   = ev{body: `{"type":"response.created","response":` + resp("in_progress", "null", "null", "[]", "null")}
	inProg    = ev{body: `{"type":"response.in_progress","response":` + resp("in_progress", "null", "null", "[]", "null")}
)

func msgJSON(id, status, parts string) string {
	return `{"id":"` + id + `","type":"message","status":"` + status + `","role":"assistant","content":` + parts + `}`
}

func textPart(s string) string { return `{"type":"output_text","text":` + q(s) + `,"annotations":[]}` }

func refusalPartJ(s string) string { return `{"type":"refusal","refusal":` + q(s) + `}` }

func msgAdded(idx int, id string) ev {
	return ev{body: `{"type":"response.output_item.added","output_index":` + strconv.Itoa(idx) + `,"item":` + msgJSON(id, "in_progress", "[]")}
}

func loc(id string, idx, cidx int) string {
	return `"item_id":"` + id + `","output_index":` + strconv.Itoa(idx) + `,"content_index":` + strconv.Itoa(cidx)
}

func partAdded(id string, idx, cidx int, part string) ev {
	return ev{body: `{"type":"response.content_part.added",` + loc(id, idx, cidx) + `,"part":` + part}
}

func partDone(id string, idx, cidx int, part string) ev {
	return ev{body: `{"type":"response.content_part.done",` + loc(id, idx, cidx) + `,"part":` + part}
}

func textDelta(id string, idx, cidx int, s string) ev {
	return ev{body: `{"type":"response.output_text.delta",` + loc(id, idx, cidx) + `,"delta":` + q(s) + `,"logprobs":[]`}
}

func textDone(id string, idx, cidx int, s string) ev {
	return ev{body: `{"type":"response.output_text.done",` + loc(id, idx, cidx) + `,"text":` + q(s) + `,"logprobs":[]`}
}

func refusalDelta(id string, idx, cidx int, s string) ev {
	return ev{body: `{"type":"response.refusal.delta",` + loc(id, idx, cidx) + `,"delta":` + q(s)}
}

func refusalDone(id string, idx, cidx int, s string) ev {
	return ev{body: `{"type":"response.refusal.done",` + loc(id, idx, cidx) + `,"refusal":` + q(s)}
}

func itemDone(idx int, item string) ev {
	return ev{body: `{"type":"response.output_item.done","output_index":` + strconv.Itoa(idx) + `,"item":` + item}
}

func callJSON(idx int, status, callID, name, args string) string {
	return `{"id":"fc_x_` + strconv.Itoa(idx) + `","type":"function_call","status":"` + status + `","arguments":` + q(args) + `,"call_id":"` + callID + `","name":"` + name + `"}`
}

func callAdded(idx int, callID, name string) ev {
	return ev{body: `{"type":"response.output_item.added","output_index":` + strconv.Itoa(idx) + `,"item":` + callJSON(idx, "in_progress", callID, name, "")}
}

func argsDelta(idx int, s string) ev {
	return ev{body: `{"type":"response.function_call_arguments.delta","item_id":"fc_x_` + strconv.Itoa(idx) + `","output_index":` + strconv.Itoa(idx) + `,"delta":` + q(s)}
}

func argsDone(idx int, s string) ev {
	return ev{body: `{"type":"response.function_call_arguments.done","item_id":"fc_x_` + strconv.Itoa(idx) + `","output_index":` + strconv.Itoa(idx) + `,"arguments":` + q(s)}
}

func final(status, incomplete, output, usage string) ev {
	return ev{body: `{"type":"response.` + status + `","response":` + resp(status, incomplete, "null", output, usage)}
}

func errorEv(code, msg string) ev {
	return ev{body: `{"type":"error","code":"` + code + `","message":` + q(msg) + `,"param":null`}
}

func failedEv(code, msg, output string) ev {
	return ev{body: `{"type":"response.failed","response":` + resp("failed", "null", `{"code":"`+code+`","message":`+q(msg)+`}`, output, "null")}
}

// hi is the events of a one-part message "Hi" at output index 0.
var hi = []ev{msgAdded(0, "msg_x"), partAdded("msg_x", 0, 0, textPart("")), textDelta("msg_x", 0, 0, "Hi")}

func hiDone(status string) []ev {
	return []ev{textDone("msg_x", 0, 0, "Hi"), partDone("msg_x", 0, 0, textPart("Hi")), itemDone(0, msgJSON("msg_x", status, `[`+textPart("Hi")+`]`))}
}

func cat(groups ...[]ev) []ev {
	var all []ev
	for _, g := range groups {
		all = append(all, g...)
	}
	return all
}

func TestStream(t *testing.T) {
	hiItem := msgJSON("msg_x", "completed", `[`+textPart("Hi")+`]`)
	okEnd := final("completed", "null", `[`+hiItem+`]`, usageOutJ)
	const ended = "The upstream stream ended before it was complete."
	const notChunk = "The upstream sent a stream event that is not a chat completion chunk."
	const several = "The upstream sent several choices; the Responses API answers with one."
	for _, tc := range []struct {
		name string
		in   string
		want []ev
	}{
		{"text", chunk(text("Hi"), "") + chunk(finish("stop"), usageChunk) + done,
			cat([]ev{created, inProg}, hi, hiDone("completed"), []ev{okEnd})},
		{"usage in the finish chunk", chunk(text("Hi"), "") + chunk(finish("stop"), "") + chunk("", usageChunk) + done,
			cat([]ev{created, inProg}, hi, hiDone("completed"), []ev{okEnd})},
		{"no usage: null", chunk(text("Hi"), "") + chunk(finish("stop"), "") + done,
			cat([]ev{created, inProg}, hi, hiDone("completed"), []ev{final("completed", "null", `[`+hiItem+`]`, "null")})},
		{"an unreadable usage chunk: the answer whole, usage null", chunk(text("Hi"), "") + chunk(finish("stop"), "") + chunk("", `{"prompt_tokens":-100000,"completion_tokens":1.5}`) + done,
			cat([]ev{created, inProg}, hi, hiDone("completed"), []ev{final("completed", "null", `[`+hiItem+`]`, "null")})},
		{"keep-alives pass as comment lines", ": keep-alive\n\n" + chunk(text("Hi"), "") + ":ping\n" + chunk(finish("stop"), usageChunk) + done,
			cat([]ev{keepAlive, created, inProg}, hi, []ev{{comment: ":ping"}}, hiDone("completed"), []ev{okEnd})},
		{"text in pieces", chunk(`{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}`, "") + chunk(text("H"), "") + chunk(text("i"), "") + chunk(finish("stop"), usageChunk) + done,
			cat([]ev{created, inProg, msgAdded(0, "msg_x"), partAdded("msg_x", 0, 0, textPart("")), textDelta("msg_x", 0, 0, "H"), textDelta("msg_x", 0, 0, "i")},
				hiDone("completed"), []ev{okEnd})},
		{"refusal", chunk(refusal("No."), "") + chunk(finish("stop"), usageChunk) + done,
			[]ev{created, inProg, msgAdded(0, "msg_x"), partAdded("msg_x", 0, 0, refusalPartJ("")), refusalDelta("msg_x", 0, 0, "No."),
				refusalDone("msg_x", 0, 0, "No."), partDone("msg_x", 0, 0, refusalPartJ("No.")),
				itemDone(0, msgJSON("msg_x", "completed", `[`+refusalPartJ("No.")+`]`)),
				final("completed", "null", `[`+msgJSON("msg_x", "completed", `[`+refusalPartJ("No.")+`]`)+`]`, usageOutJ)}},
		{"text then refusal: two parts", chunk(text("Hi"), "") + chunk(refusal("No."), "") + chunk(finish("stop"), usageChunk) + done,
			cat([]ev{created, inProg}, hi, []ev{textDone("msg_x", 0, 0, "Hi"), partDone("msg_x", 0, 0, textPart("Hi")),
				partAdded("msg_x", 0, 1, refusalPartJ("")), refusalDelta("msg_x", 0, 1, "No."),
				refusalDone("msg_x", 0, 1, "No."), partDone("msg_x", 0, 1, refusalPartJ("No.")),
				itemDone(0, msgJSON("msg_x", "completed", `[`+textPart("Hi")+`,`+refusalPartJ("No.")+`]`)),
				final("completed", "null", `[`+msgJSON("msg_x", "completed", `[`+textPart("Hi")+`,`+refusalPartJ("No.")+`]`)+`]`, usageOutJ)})},
		{"length: incomplete", chunk(text("Hi"), "") + chunk(finish("length"), usageChunk) + done,
			cat([]ev{created, inProg}, hi, hiDone("incomplete"),
				[]ev{final("incomplete", `{"reason":"max_output_tokens"}`, `[`+msgJSON("msg_x", "incomplete", `[`+textPart("Hi")+`]`)+`]`, usageOutJ)})},
		{"content_filter without content", chunk(finish("content_filter"), usageChunk) + done,
			[]ev{created, inProg, final("incomplete", `{"reason":"content_filter"}`, `[]`, usageOutJ)}},
		{"tool calls, then text", chunk(call(0, "call_1", "f", `{\"a\"`), "") + chunk(call(0, "", "", `:1}`), "") + chunk(call(1, "call_2", "g", ""), "") + chunk(text("Hi"), "") + chunk(finish("tool_calls"), usageChunk) + done,
			[]ev{created, inProg,
				callAdded(0, "call_1", "f"), argsDelta(0, `{"a"`), argsDelta(0, `:1}`), argsDone(0, `{"a":1}`), itemDone(0, callJSON(0, "completed", "call_1", "f", `{"a":1}`)),
				callAdded(1, "call_2", "g"), argsDone(1, ""), itemDone(1, callJSON(1, "completed", "call_2", "g", "")),
				msgAdded(2, "msg_x_2"), partAdded("msg_x_2", 2, 0, textPart("")), textDelta("msg_x_2", 2, 0, "Hi"),
				textDone("msg_x_2", 2, 0, "Hi"), partDone("msg_x_2", 2, 0, textPart("Hi")), itemDone(2, msgJSON("msg_x_2", "completed", `[`+textPart("Hi")+`]`)),
				final("completed", "null", `[`+callJSON(0, "completed", "call_1", "f", `{"a":1}`)+`,`+callJSON(1, "completed", "call_2", "g", "")+`,`+msgJSON("msg_x_2", "completed", `[`+textPart("Hi")+`]`)+`]`, usageOutJ)}},
		{"tool call cut by length", chunk(call(0, "call_1", "f", `{\"a`), "") + chunk(finish("length"), usageChunk) + done,
			[]ev{created, inProg, callAdded(0, "call_1", "f"), argsDelta(0, `{"a`), argsDone(0, `{"a`), itemDone(0, callJSON(0, "incomplete", "call_1", "f", `{"a`)),
				final("incomplete", `{"reason":"max_output_tokens"}`, `[`+callJSON(0, "incomplete", "call_1", "f", `{"a`)+`]`, usageOutJ)}},
		{"tool call deltas without an index", chunk(`{"index":0,"delta":{"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{"}}]},"finish_reason":null}`, "") +
			chunk(`{"index":0,"delta":{"tool_calls":[{"id":"call_1","function":{"arguments":"}"}}]},"finish_reason":null}`, "") +
			chunk(`{"index":0,"delta":{"tool_calls":[{"id":"call_2","type":"function","function":{"name":"g","arguments":"{}"}}]},"finish_reason":"tool_calls"}`, usageChunk) + done,
			[]ev{created, inProg, callAdded(0, "call_1", "f"), argsDelta(0, "{"), argsDelta(0, "}"), argsDone(0, "{}"), itemDone(0, callJSON(0, "completed", "call_1", "f", "{}")),
				callAdded(1, "call_2", "g"), argsDelta(1, "{}"), argsDone(1, "{}"), itemDone(1, callJSON(1, "completed", "call_2", "g", "{}")),
				final("completed", "null", `[`+callJSON(0, "completed", "call_1", "f", "{}")+`,`+callJSON(1, "completed", "call_2", "g", "{}")+`]`, usageOutJ)}},
		{"data without a space", "data:" + strings.TrimPrefix(chunk(text("Hi"), ""), "data: ") + chunk(finish("stop"), usageChunk) + done,
			cat([]ev{created, inProg}, hi, hiDone("completed"), []ev{okEnd})},
		{"bytes after [DONE] are dropped", chunk(text("Hi"), "") + chunk(finish("stop"), usageChunk) + done + ": keep-alive\n\n" + chunk(text("more"), "") + done,
			cat([]ev{created, inProg}, hi, hiDone("completed"), []ev{okEnd})},

		// The ends that are errors.
		{"no [DONE]: error at Close", chunk(text("Hi"), ""),
			cat([]ev{created, inProg}, hi, []ev{errorEv("server_error", ended), failedEv("server_error", ended, "[]")})},
		{"failed keeps the items done", chunk(call(0, "call_1", "f", "{}"), "") + chunk(text("Hi"), ""),
			cat([]ev{created, inProg, callAdded(0, "call_1", "f"), argsDelta(0, "{}"), argsDone(0, "{}"), itemDone(0, callJSON(0, "completed", "call_1", "f", "{}")),
				msgAdded(1, "msg_x_1"), partAdded("msg_x_1", 1, 0, textPart("")), textDelta("msg_x_1", 1, 0, "Hi"),
				errorEv("server_error", ended), failedEv("server_error", ended, `[`+callJSON(0, "completed", "call_1", "f", "{}")+`]`)})},
		{"an unfinished event is dropped", chunk(text("Hi"), "") + chunk(finish("stop"), usageChunk) + "data: [DONE]\n",
			cat([]ev{created, inProg}, hi, hiDone("completed"), []ev{errorEv("server_error", ended), failedEv("server_error", ended, `[`+hiItem+`]`)})},
		{"nothing at all", "",
			[]ev{errorEv("server_error", ended)}},
		{"[DONE] before any chunk", ": keep-alive\n" + done,
			[]ev{keepAlive, errorEv("server_error", "The upstream stream ended without an answer.")}},
		{"[DONE] without a finish_reason", chunk(text("Hi"), "") + done,
			cat([]ev{created, inProg}, hi, []ev{errorEv("server_error", "The upstream stream ended without a finish_reason: the answer may be incomplete."),
				failedEv("server_error", "The upstream stream ended without a finish_reason: the answer may be incomplete.", "[]")})},
		{"error before any chunk", `data: {"error":{"message":"Denied by policy.","type":"permission_error","code":"policy_denied"}}` + "\n\n",
			[]ev{errorEv("policy_denied", "Denied by policy.")}},
		{"error with a param", `data: {"error":{"message":"Bad.","type":"invalid_request_error","code":null,"param":"input"}}` + "\n\n",
			[]ev{{body: `{"type":"error","code":"invalid_request_error","message":"Bad.","param":"input"`}}},
		{"rate limit mid-stream", chunk(text("Hi"), "") + `data: {"error":{"message":"Slow down.","type":"rate_limit_error"}}` + "\n\n" + chunk(finish("stop"), "") + done,
			cat([]ev{created, inProg}, hi, []ev{errorEv("rate_limit_error", "Slow down."), failedEv("rate_limit_exceeded", "Slow down.", "[]")})},
		{"error without a message", `data: {"error":{"type":"server_error"}}` + "\n\n",
			[]ev{errorEv("server_error", "The upstream failed.")}},
		{"error with nothing", `data: {"error":{}}` + "\n\n",
			[]ev{errorEv("server_error", "The upstream failed.")}},
		{"not JSON", "data: {oops}\n\n", []ev{errorEv("server_error", notChunk)}},
		{"null", "data: null\n\n", []ev{errorEv("server_error", notChunk)}},
		{"not a chunk", "data: [1,2]\n\n", []ev{errorEv("server_error", notChunk)}},
		{"duplicate member in a chunk", `data: {"id":"a","id":"b","choices":[]}` + "\n\n", []ev{errorEv("server_error", notChunk)}},
		{"invalid UTF-8 in a chunk", "data: {\"id\":\"a\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"\xff\"}}]}\n\n", []ev{errorEv("server_error", notChunk)}},
		{"two choices", chunk(text("a")+`,{"index":1,"delta":{"content":"b"},"finish_reason":null}`, ""),
			[]ev{created, inProg, errorEv("server_error", several), failedEv("server_error", several, "[]")}},
		{"a second choice's index", chunk(`{"index":1,"delta":{"content":"b"},"finish_reason":null}`, ""),
			[]ev{created, inProg, errorEv("server_error", several), failedEv("server_error", several, "[]")}},
		{"content after the finish", chunk(finish("stop"), "") + chunk(text("late"), "") + done,
			[]ev{created, inProg, errorEv("server_error", "The upstream sent content after its finish_reason."), failedEv("server_error", "The upstream sent content after its finish_reason.", "[]")}},
		{"unknown finish_reason", chunk(text("Hi"), "") + chunk(finish("paused"), ""),
			cat([]ev{created, inProg}, hi, []ev{errorEv("server_error", "The upstream finished with an unknown finish_reason."), failedEv("server_error", "The upstream finished with an unknown finish_reason.", "[]")})},
		{"tool call without a name", chunk(call(0, "call_1", "", "{}"), ""),
			[]ev{created, inProg, errorEv("server_error", "The upstream started a tool call without an id or a name."), failedEv("server_error", "The upstream started a tool call without an id or a name.", "[]")}},
		{"a closed tool call again", chunk(call(0, "call_1", "f", "{}"), "") + chunk(call(1, "call_2", "g", "{}"), "") + chunk(call(0, "", "", " "), ""),
			[]ev{created, inProg, callAdded(0, "call_1", "f"), argsDelta(0, "{}"), argsDone(0, "{}"), itemDone(0, callJSON(0, "completed", "call_1", "f", "{}")),
				callAdded(1, "call_2", "g"), argsDelta(1, "{}"),
				errorEv("server_error", "The upstream interleaved the deltas of its tool calls."),
				failedEv("server_error", "The upstream interleaved the deltas of its tool calls.", `[`+callJSON(0, "completed", "call_1", "f", "{}")+`]`)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := render(tc.want...)
			got := feedWhole(t, "m", []byte(tc.in))
			if string(got) != want {
				t.Fatalf("\n got:\n%s\nwant:\n%s", got, want)
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
	if got := feedWhole(t, "gpt-x", in); !bytes.Contains(got, []byte(`"model":"gpt-x"`)) || bytes.Contains(got, []byte(`"model":"gpt-4o"`)) {
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
	if c := strings.Count(out.String(), "event: response.completed"); c != 1 {
		t.Errorf("%d response.completed events:\n%s", c, out.String())
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
	if c := strings.Count(out.String(), "event: response.failed"); c != 1 {
		t.Errorf("%d response.failed events:\n%s", c, out.String())
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
	want := render(errorEv("server_error", "The upstream sent an event too large to translate."))
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
	in := chunk(text("a"), "") + ": keep-alive\n\n" + chunk(text("b"), "") + chunk(finish("stop"), usageChunk)
	half := len(in) / 2
	_, _ = s.Write([]byte(in[:half]))
	_, _ = s.Write([]byte(in[half:] + done))
	if len(writes) != 2 {
		t.Fatalf("%d writes", len(writes))
	}
	seq := 0
	for _, p := range writes {
		events, err := parseEventsFrom(p, seq)
		if err != nil {
			t.Errorf("a write of partial events: %v", err)
		}
		seq += len(events)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
