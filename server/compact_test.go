package server_test

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go"
	"github.com/openai/openai-go/option"

	"github.com/sacpgw/gateway/compact"
)

// compactTask is the SACP message the compact agent is given (out_fmt
// absent: raw).
const compactTask = `{"msg_id":"task-1","g":"PREDICT_PRICE","ctx":{"history":[101,104,99]},"plan":[["predict","PRC_EST",{"window":3}]]}`

// compactHumanTask asks for an answer a person reads.
const compactHumanTask = `{"msg_id":"task-2","g":"PREDICT_PRICE","plan":[["predict","PRC_EST",{"window":3}]],"out_fmt":"human"}`

// compactAnswer is a valid answer, spaced as models write it.
const compactAnswer = `{ "msg_id": "res-1", "reply_to": "task-1", "g": "PREDICT_PRICE",
  "plan": [ ["predict", "PRC_EST", {"window": 3, "method": "arima"}] ], "state": "DONE" }`

const compactAnswerOut = `{"msg_id":"res-1","reply_to":"task-1","g":"PREDICT_PRICE","plan":[["predict","PRC_EST",{"window":3,"method":"arima"}]],"state":"DONE"}`

const compactProse = "The price will probably go up next week, around 105."

// compactPrompt is what the compact agent of the test config is told.
var compactPrompt = compact.Prompt(compact.PromptAgent{Name: "compact", Verbs: []string{"predict"}, Tools: []string{"PRC_EST"}})

func compactCall(t *testing.T, st *stack, task string) (string, http.Header) {
	t.Helper()
	var resp *http.Response
	got, err := st.client("tok-compact").Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You forecast prices."), openai.UserMessage(task)},
	}, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	return got.Choices[0].Message.Content, resp.Header
}

func TestCompactAnswers(t *testing.T) {
	cases := []struct {
		note     string
		task     string
		answers  []string
		want     string // exact content received
		calls    int
		status   string
		valid    string
		verdict  string
		reaskHas string // in the re-ask message, when calls > 1
	}{
		{note: "valid answer compacted", task: compactTask, answers: []string{compactAnswer},
			want: compactAnswerOut, calls: 1, status: "VALID", valid: "true", verdict: "valid"},
		{note: "fenced answer sanitized", task: compactTask, answers: []string{"Here you go:\n```json\n" + compactAnswer + "\n```\nDone."},
			want: compactAnswerOut, calls: 1, status: "VALID", valid: "true", verdict: "valid"},
		{note: "ERR object accepted", task: compactTask, answers: []string{`{"status": "ERR", "code": "REQ_CLARIFY", "details": "no history window"}`},
			want: `{"status":"ERR","code":"REQ_CLARIFY","details":"no history window"}`, calls: 1, status: "ERR", valid: "true", verdict: "valid"},
		{note: "prose refused then valid", task: compactTask, answers: []string{compactProse, compactAnswer},
			want: compactAnswerOut, calls: 2, status: "VALID", valid: "true", verdict: "valid",
			reaskHas: `out_fmt is \"raw\": prose is not allowed`},
		{note: "unknown verb re-asked", task: compactTask,
			answers: []string{`{"g":"PREDICT_PRICE","plan":[["teleport","PRC_EST",{}]]}`, compactAnswer},
			want:    compactAnswerOut, calls: 2, status: "VALID", valid: "true", verdict: "valid", reaskHas: "UNKNOWN_VERB"},
		{note: "mistyped param re-asked", task: compactTask,
			answers: []string{`{"g":"PREDICT_PRICE","plan":[["predict","PRC_EST",{"window":"three"}]]}`, compactAnswer},
			want:    compactAnswerOut, calls: 2, status: "VALID", valid: "true", verdict: "valid", reaskHas: "INVALID_PARAMS"},
		{note: "prose every time falls back", task: compactTask, answers: []string{compactProse},
			want:  `{"status":"ERR","code":"INVALID_OUTPUT","details":"no valid SACP answer after 3 attempt(s); last problem: MALFORMED_MESSAGE: out_fmt is \"raw\": prose is not allowed, the answer must be one JSON object"}`,
			calls: 3, status: "ERR", valid: "false", verdict: "fallback", reaskHas: "prose is not allowed"},
		{note: "out_fmt human passes prose", task: compactHumanTask, answers: []string{compactProse + " Questions: ann@example.com"},
			want: compactProse + " Questions: [REDACTED:email]", calls: 1, status: "VALID", valid: "true", verdict: "valid"},
		{note: "email in a param redacted", task: compactTask,
			answers: []string{`{"g":"NOTIFY","plan":[["predict","PRC_EST",{"method":"mail bob@example.com","window":3}]]}`},
			want:    `{"g":"NOTIFY","plan":[["predict","PRC_EST",{"method":"mail [REDACTED:email]","window":3}]]}`,
			calls:   1, status: "VALID", valid: "true", verdict: "valid"},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			up := &scripted{answers: tc.answers}
			_, us := newUpstream(t, up.handler)
			st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1"})
			content, h := compactCall(t, st, tc.task)
			if content != tc.want {
				t.Errorf("content:\n got %s\nwant %s", content, tc.want)
			}
			if h.Get("X-Sacp-Status") != tc.status || h.Get("X-Sacp-Valid") != tc.valid || h.Get("X-Sacp-Attempts") != strconv.Itoa(tc.calls) {
				t.Errorf("headers: status=%s valid=%s attempts=%s", h.Get("X-Sacp-Status"), h.Get("X-Sacp-Valid"), h.Get("X-Sacp-Attempts"))
			}
			calls := up.calls()
			if len(calls) != tc.calls {
				t.Fatalf("%d upstream calls, want %d", len(calls), tc.calls)
			}
			if msgs := messages(t, calls[0]); len(msgs) != 2 || msgs[0].Role != "system" || msgs[0].Content != "You forecast prices.\n\n"+compactPrompt {
				t.Errorf("compact SACP prompt not appended to the system prompt: %s", calls[0])
			}
			if !strings.Contains(calls[0], `### Agent Role: compact`) || !strings.Contains(calls[0], `### Supported Verb(s):\n- predict\n`) {
				t.Errorf("prompt does not name the agent and its verbs: %s", calls[0])
			}
			for i := 1; i < len(calls); i++ {
				if !strings.Contains(calls[i], "Your previous response is not a valid SACP answer.") || !strings.Contains(calls[i], tc.reaskHas) {
					t.Errorf("re-ask %d lacks %q: %s", i, tc.reaskHas, calls[i])
				}
				msgs := messages(t, calls[i])
				if n := len(msgs); n != 2+2*i || msgs[n-2].Role != "assistant" || msgs[n-2].Content != tc.answers[min(i, len(tc.answers))-1] || msgs[n-1].Role != "user" {
					t.Errorf("re-ask %d does not carry the invalid answer then the re-ask: %s", i, calls[i])
				}
			}
			if tc.valid == "false" && strings.Contains(content, "price will probably") {
				t.Errorf("the invalid output reached the client: %s", content)
			}
			res := lastResponseEntry(t, st)
			checks, _ := res.Summary["checks"].(map[string]any)
			proto, _ := checks["protocol"].(map[string]any)
			wantFmt := "raw"
			if tc.task == compactHumanTask {
				wantFmt = "human"
			}
			if proto["verdict"] != tc.verdict || proto["format"] != "sacp_compact" || proto["out_fmt"] != wantFmt ||
				proto["template_sha256"] != sha(compactPrompt) || proto["attempts"] != float64(tc.calls) {
				t.Errorf("protocol check = %v", proto)
			}
			if _, ok := checks["guardrails"]; ok {
				t.Errorf("guardrails ran on a compact answer: %v", checks["guardrails"])
			}
			sacpSum, _ := res.Summary["sacp"].(map[string]any)
			if sacpSum["status"] != tc.status || sacpSum["valid"] != (tc.valid == "true") {
				t.Errorf("sacp summary = %v", sacpSum)
			}
		})
	}
}

type chatMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// messages decodes the messages of a request the upstream received.
func messages(t *testing.T, body string) []chatMessage {
	t.Helper()
	var req struct {
		Messages []chatMessage `json:"messages"`
	}
	if err := json.Unmarshal([]byte(body), &req); err != nil {
		t.Fatalf("upstream request is not JSON: %v", err)
	}
	return req.Messages
}

// lastResponseEntry waits for the request's llm.response entry.
func lastResponseEntry(t *testing.T, st *stack) entry {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		entries, _ := st.entries()
		for i := len(entries) - 1; i >= 0; i-- {
			if entries[i].Kind == "llm.response" {
				return entries[i]
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no llm.response entry")
		}
	}
}

func TestCompactRequestEntryHasPromptHash(t *testing.T) {
	up := &scripted{answers: []string{compactAnswer}}
	_, us := newUpstream(t, up.handler)
	st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1"})
	compactCall(t, st, compactTask)
	entries, _ := st.entries()
	if len(entries) == 0 || entries[0].Kind != "llm.request" || entries[0].Summary["template_sha256"] != sha(compactPrompt) {
		t.Fatalf("request entry = %+v", entries)
	}
}

func TestCompactStreamGatheredAndReEmitted(t *testing.T) {
	up := &scripted{answers: []string{compactProse, "```json\n" + compactAnswer + "\n```"}, stream: true}
	_, us := newUpstream(t, up.handler)
	st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1"})
	stream := st.client("tok-compact").Chat.Completions.NewStreaming(context.Background(), openai.ChatCompletionNewParams{
		Model: "gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage(compactTask)},
		StreamOptions: openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	})
	var content strings.Builder
	var usage int64
	for stream.Next() {
		c := stream.Current()
		for _, ch := range c.Choices {
			content.WriteString(ch.Delta.Content)
		}
		usage += c.Usage.TotalTokens
	}
	if err := stream.Err(); err != nil {
		t.Fatal(err)
	}
	if content.String() != compactAnswerOut {
		t.Errorf("stream content = %s", content.String())
	}
	if usage != 30 {
		t.Errorf("usage %d, want 15+15 over two attempts", usage)
	}
	if n := len(up.calls()); n != 2 {
		t.Errorf("%d upstream calls, want 2", n)
	}
	// Raw, prose on every attempt: a well-formed SSE stream of the
	// fallback, with the X-SACP headers (no keep-alive was due, so they are
	// headers, not trailers).
	prose := &scripted{answers: []string{compactProse}, stream: true}
	_, us2 := newUpstream(t, prose.handler)
	st2 := newStack(t, stackOpts{upstreamURL: us2.URL + "/v1"})
	raw := st2.post("/v1/chat/completions", "tok-compact", `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":`+jsonString(compactTask)+`}]}`)
	body := readAll(t, raw.Body)
	got, finish, done := sseContent(t, body)
	if !done || finish != "stop" || got != `{"status":"ERR","code":"INVALID_OUTPUT","details":"no valid SACP answer after 3 attempt(s); last problem: MALFORMED_MESSAGE: out_fmt is \"raw\": prose is not allowed, the answer must be one JSON object"}` {
		t.Errorf("raw stream: done %v finish %q content %s", done, finish, got)
	}
	if strings.Contains(body, "price will probably") {
		t.Errorf("prose reached the client: %s", body)
	}
	if raw.Header.Get("X-Sacp-Status") != "ERR" || raw.Header.Get("X-Sacp-Valid") != "false" || raw.Header.Get("X-Sacp-Attempts") != "3" {
		t.Errorf("raw stream headers = %v", raw.Header)
	}
}

func TestCompactToolCallsPassUnchanged(t *testing.T) {
	toolAnswer := `{"id":"chatcmpl-9","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"history","arguments":"{}"}}]}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
	up, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(toolAnswer))
	})
	st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1"})
	resp := st.post("/v1/chat/completions", "tok-compact", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"x"}]}`)
	if got := readAll(t, resp.Body); got != toolAnswer {
		t.Errorf("tool call answer changed:\n%s", got)
	}
	if up.hits.Load() != 1 {
		t.Errorf("tool call re-asked: %d calls", up.hits.Load())
	}
	proto := lastResponseEntry(t, st).Summary["checks"].(map[string]any)["protocol"].(map[string]any)
	if proto["verdict"] != "tool_calls" || proto["format"] != "sacp_compact" {
		t.Errorf("protocol check = %v", proto)
	}
}

func TestCompactReaskOff(t *testing.T) {
	up := &scripted{answers: []string{`{"g":"X","plan":[["predict","NOPE",{}]]}`}}
	_, us := newUpstream(t, up.handler)
	st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1", protocolExtra: "  sacp:\n    reask: false\n"})
	content, h := compactCall(t, st, compactTask)
	want := `{"status":"ERR","code":"INVALID_OUTPUT","details":"no valid SACP answer after 1 attempt(s); last problem: UNKNOWN_TOOL at plan[0][1]: `
	if !strings.HasPrefix(content, want) || h.Get("X-Sacp-Valid") != "false" || len(up.calls()) != 1 {
		t.Errorf("reask off: %d calls, %s %s", len(up.calls()), h.Get("X-Sacp-Valid"), content)
	}
}
