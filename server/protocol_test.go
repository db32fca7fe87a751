package server_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openai/openai-go"
	"github.com/openai/openai-go/option"
)

const validSACP = `{"thought":"t","status":"success","data":{"amount":12.5,"note":"mail bob@example.com"},"message":"Done for bob@example.com."}`

// scripted is an upstream that answers the n-th call with answers[n]
// (the last one repeats) and records every request body.
type scripted struct {
	mu      sync.Mutex
	bodies  []string
	answers []string
	stream  bool
}

func (s *scripted) handler(w http.ResponseWriter, r *http.Request, body []byte) {
	s.mu.Lock()
	s.bodies = append(s.bodies, string(body))
	a := s.answers[min(len(s.bodies), len(s.answers))-1]
	s.mu.Unlock()
	if s.stream {
		w.Header().Set("Content-Type", "text/event-stream")
		for i := 0; i < len(a); i += 7 {
			io.WriteString(w, chunk(a[i:min(len(a), i+7)]))
		}
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}`+"\n\n")
		io.WriteString(w, "data: [DONE]\n\n")
		return
	}
	w.Header().Set("Content-Type", "application/json")
	io.WriteString(w, completion(a))
}

func (s *scripted) calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.bodies...)
}

func protoCall(t *testing.T, st *stack) (string, http.Header, *openai.ChatCompletion) {
	t.Helper()
	var resp *http.Response
	got, err := st.client("tok-proto").Chat.Completions.New(context.Background(), openai.ChatCompletionNewParams{
		Model:    "gpt-4o-mini",
		Messages: []openai.ChatCompletionMessageParamUnion{openai.SystemMessage("You compute invoices."), openai.UserMessage("Total?")},
	}, option.WithResponseInto(&resp))
	if err != nil {
		t.Fatal(err)
	}
	return got.Choices[0].Message.Content, resp.Header, got
}

func decodeSACP(t *testing.T, content string) map[string]any {
	t.Helper()
	var obj map[string]any
	if err := json.Unmarshal([]byte(content), &obj); err != nil {
		t.Fatalf("content is not a JSON object: %q", content)
	}
	return obj
}

func TestProtocolAnswers(t *testing.T) {
	cases := []struct {
		note     string
		answers  []string
		calls    int
		valid    string
		status   string
		attempts string
	}{
		{"fenced JSON", []string{"```json\n" + validSACP + "\n```"}, 1, "true", "success", "1"},
		{"prose around JSON", []string{"Sure! Here it is: " + validSACP + " Hope that helps {:"}, 1, "true", "success", "1"},
		{"garbage then valid", []string{"I think the total is 12.5", validSACP}, 2, "true", "success", "2"},
		{"garbage always", []string{"no JSON here, sorry"}, 3, "false", "failure", "3"},
		{"schema-invalid data then valid", []string{`{"thought":"t","status":"success","data":{"amount":"12.5"},"message":"m"}`, validSACP}, 2, "true", "success", "2"},
		// The protocol's own synonym costs no second call.
		{"needs_input", []string{`{"thought":"t","status":"needs_input","data":{"amount":0},"message":"Done for March; which month next? Ask bob@example.com"}`}, 1, "true", "clarification_needed", "1"},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			up := &scripted{answers: tc.answers}
			_, us := newUpstream(t, up.handler)
			st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1"})
			content, h, got := protoCall(t, st)
			calls := up.calls()
			if len(calls) != tc.calls {
				t.Fatalf("%d upstream calls, want %d", len(calls), tc.calls)
			}
			if h.Get("X-Sacp-Valid") != tc.valid || h.Get("X-Sacp-Status") != tc.status || h.Get("X-Sacp-Attempts") != tc.attempts {
				t.Errorf("headers: valid=%s status=%s attempts=%s", h.Get("X-Sacp-Valid"), h.Get("X-Sacp-Status"), h.Get("X-Sacp-Attempts"))
			}
			obj := decodeSACP(t, content)
			if obj["status"] != tc.status {
				t.Errorf("status %v in %s", obj["status"], content)
			}
			if got.Usage.TotalTokens != int64(12*tc.calls) {
				t.Errorf("usage %d, want the sum over %d attempts", got.Usage.TotalTokens, tc.calls)
			}
			if !strings.Contains(calls[0], "SYSTEM PROTOCOL: RESPONSE FORMAT INSTRUCTIONS") || !strings.Contains(calls[0], "You compute invoices.") {
				t.Errorf("template not appended to the system prompt: %s", calls[0])
			}
			if tc.valid == "true" {
				if strings.Contains(content, "bob@example.com") || !strings.Contains(content, "[REDACTED:email]") {
					t.Errorf("apply_to fields not redacted: %s", content)
				}
				if strings.Contains(content, "```") || strings.Contains(content, "Sure!") || strings.Contains(content, " ") && !strings.Contains(content, "Done for") {
					t.Errorf("content is not the compact object: %q", content)
				}
			} else {
				data, _ := obj["data"].(map[string]any)
				if data["raw_output"] != tc.answers[0] || obj["message"] != "The LLM returned an invalid response format." {
					t.Errorf("fallback = %s", content)
				}
			}
			if tc.calls > 1 {
				second := calls[1]
				if !strings.Contains(second, jsonEscaped(tc.answers[0])) {
					t.Errorf("re-ask does not carry the invalid answer: %s", second)
				}
				if strings.Contains(tc.note, "schema") && !strings.Contains(second, "/data/amount") {
					t.Errorf("re-ask does not name the JSON path at fault: %s", second)
				}
			}
		})
	}
}

func jsonEscaped(s string) string {
	b, _ := json.Marshal(s)
	return strings.Trim(string(b), `"`)
}

func TestProtocolToolCallsPassUnchanged(t *testing.T) {
	toolAnswer := `{"id":"chatcmpl-9","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"London\"}"}}]}}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`
	up, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, toolAnswer)
	})
	st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1"})
	resp := st.post("/v1/chat/completions", "tok-proto", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"weather?"}]}`)
	if got := readAll(t, resp.Body); got != toolAnswer {
		t.Errorf("tool call answer changed:\n%s", got)
	}
	if up.hits.Load() != 1 {
		t.Errorf("tool call re-asked: %d calls", up.hits.Load())
	}
}

// sseContent reads a stream and returns the concatenated content, the
// finish reason, and whether it ended with [DONE].
func sseContent(t *testing.T, body string) (content, finish string, done bool) {
	t.Helper()
	for _, ev := range strings.Split(body, "\n\n") {
		ev = strings.TrimSpace(ev)
		if !strings.HasPrefix(ev, "data: ") {
			continue
		}
		data := strings.TrimPrefix(ev, "data: ")
		if data == "[DONE]" {
			done = true
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
				FinishReason *string `json:"finish_reason"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("bad chunk %q: %v", data, err)
		}
		for _, ch := range c.Choices {
			content += ch.Delta.Content
			if ch.FinishReason != nil {
				finish = *ch.FinishReason
			}
		}
	}
	return content, finish, done
}

func TestProtocolStreamGatheredAndReEmitted(t *testing.T) {
	up := &scripted{answers: []string{"oops, prose", validSACP}, stream: true}
	_, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		time.Sleep(150 * time.Millisecond) // long enough for keep-alives
		up.handler(w, r, body)
	})
	st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1", keepAlive: 40 * time.Millisecond})
	ctx := context.Background()
	stream := st.client("tok-proto").Chat.Completions.NewStreaming(ctx, openai.ChatCompletionNewParams{
		Model: "gpt-4o-mini", Messages: []openai.ChatCompletionMessageParamUnion{openai.UserMessage("Total?")},
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
	obj := decodeSACP(t, content.String())
	if obj["status"] != "success" || strings.Contains(content.String(), "bob@example.com") {
		t.Errorf("stream content = %s", content.String())
	}
	if usage != 30 {
		t.Errorf("usage chunk total %d, want 15+15 over two attempts", usage)
	}
	// Raw: keep-alive comments were sent while gathering, and the X-SACP
	// values arrive as trailers.
	raw := st.post("/v1/chat/completions", "tok-proto", `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	body := readAll(t, raw.Body)
	if !strings.Contains(body, ": keep-alive\n") {
		t.Errorf("no keep-alive while gathering: %q", body)
	}
	if _, _, done := sseContent(t, body); !done {
		t.Errorf("stream not terminated with [DONE]")
	}
	if raw.Trailer.Get("X-Sacp-Valid") != "true" {
		t.Errorf("trailers = %v", raw.Trailer)
	}
}

func TestPlainStreamRedactsAcrossChunks(t *testing.T) {
	pieces := []string{"Contact bob.sm", "ith@exam", "ple.com or card 4111 1111 ", "1111 1111, not 4111 1111 1111 1112", "."}
	_, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "text/event-stream")
		for _, p := range pieces {
			io.WriteString(w, chunk(p))
			w.(http.Flusher).Flush()
		}
		io.WriteString(w, `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}`+"\n\n")
		io.WriteString(w, "data: [DONE]\n\n")
	})
	st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1"})
	resp := st.post("/v1/chat/completions", "tok-alpha", `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"x"}]}`)
	body := readAll(t, resp.Body)
	content, finish, done := sseContent(t, body)
	want := "Contact [REDACTED:email] or card [REDACTED:credit_card], not 4111 1111 1111 1112."
	if content != want || finish != "stop" || !done {
		t.Errorf("content %q finish %q done %v\nwant %q", content, finish, done, want)
	}
	for _, leak := range []string{"bob.sm", "ith@exam", "4111 1111 1111 1111"} {
		if strings.Contains(body, leak) {
			t.Errorf("a piece of a redacted value was sent: %q", leak)
		}
	}
}

func TestRedactionLuhnAndBlock(t *testing.T) {
	answer := "Card 4111 1111 1111 1111 and 4111 1111 1111 1112."
	_, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if strings.Contains(string(body), `"stream":true`) {
			w.Header().Set("Content-Type", "text/event-stream")
			io.WriteString(w, chunk("Card 4111 1111 "))
			io.WriteString(w, chunk("1111 1111 ok"))
			io.WriteString(w, "data: [DONE]\n\n")
			return
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, completion(answer))
	})
	t.Run("masked", func(t *testing.T) {
		st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1"})
		got, err := st.client("tok-alpha").Chat.Completions.New(context.Background(), userParams("gpt-4o-mini", "x"))
		if err != nil {
			t.Fatal(err)
		}
		if c := got.Choices[0].Message.Content; c != "Card [REDACTED:credit_card] and 4111 1111 1111 1112." {
			t.Errorf("content = %q (only the Luhn-valid number is a card)", c)
		}
	})
	t.Run("off", func(t *testing.T) {
		st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1", protocolExtra: "  redaction:\n    detectors: []\n"})
		got, err := st.client("tok-alpha").Chat.Completions.New(context.Background(), userParams("gpt-4o-mini", "x"))
		if err != nil || got.Choices[0].Message.Content != answer {
			t.Errorf("detectors: [] must turn redaction off: %v %v", got, err)
		}
	})
	t.Run("blocked", func(t *testing.T) {
		st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1", protocolExtra: "  redaction:\n    block: [credit_card]\n"})
		got, err := st.client("tok-alpha").Chat.Completions.New(context.Background(), userParams("gpt-4o-mini", "x"))
		if err != nil {
			t.Fatal(err)
		}
		if c := got.Choices[0]; c.Message.Content != "" || c.FinishReason != "content_filter" {
			t.Errorf("blocked answer: %q finish %q", c.Message.Content, c.FinishReason)
		}
		resp := st.post("/v1/chat/completions", "tok-alpha", `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"x"}]}`)
		body := readAll(t, resp.Body)
		_, finish, done := sseContent(t, body)
		if finish != "content_filter" || !done || strings.Contains(body, "4111") {
			t.Errorf("blocked stream: finish %q done %v body %q", finish, done, body)
		}
	})
}

func TestRequestRedaction(t *testing.T) {
	up, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, completion("ok"))
	})
	st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1", protocolExtra: "  redaction:\n    requests: true\n    block: [ssn]\n"})
	resp := st.post("/v1/chat/completions", "tok-alpha", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":[{"type":"text","text":"mail alice@example.org"}]}]}`)
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	if b := up.lastBody.Load().(string); strings.Contains(b, "alice@example.org") || !strings.Contains(b, "[REDACTED:email]") {
		t.Errorf("prompt left unredacted: %s", b)
	}
	blocked := st.post("/v1/chat/completions", "tok-alpha", `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"my ssn is 123-45-6789"}]}`)
	raw := readAll(t, blocked.Body)
	if blocked.StatusCode != 400 || !strings.Contains(raw, `"code":"content_filter"`) || strings.Contains(raw, "123-45-6789") {
		t.Errorf("blocked prompt: %d %s", blocked.StatusCode, raw)
	}
	if up.hits.Load() != 1 {
		t.Errorf("blocked prompt reached the upstream")
	}
}
