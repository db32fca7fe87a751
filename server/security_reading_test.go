package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/openai/openai-go"
)

// secrets that must never reach the provider (requests) or the client
// (answers) once redaction is on.
const (
	mail = "jane.doe@example.com"
	key  = "sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123456789"
)

func leaks(s string) []string {
	var out []string
	for _, v := range []string{mail, key, "jane.doe", "AbCdEfGhIj"} {
		if strings.Contains(s, v) {
			out = append(out, v)
		}
	}
	return out
}

// The allow-list bypass: Go's case-insensitive, last-key-wins decoding
// routed, limited and audited the allowed model while the bytes upstream
// named another. Now the body is refused before anything is sent.
func TestSecurityCaseVariantKeysDoNotBypassTheModelAllowList(t *testing.T) {
	up, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, completion("ok"))
	})
	st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1"})
	for _, body := range []string{
		`{"model":"gpt-4o","Model":"gpt-4o-mini","messages":[{"role":"user","content":"x"}]}`,
		`{"model":"gpt-4o","model":"gpt-4o-mini","messages":[{"role":"user","content":"x"}]}`,
		`{"MODEL":"gpt-4o","messages":[{"role":"user","content":"x"}]}`,
		`{"model":"gpt-4o-mini","messages":[{"role":"user","content":"x","Content":"y"}]}`,
	} {
		resp := st.post("/v1/chat/completions", "tok-restricted", body)
		b := readAll(t, resp.Body)
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(b, `"invalid_request_error"`) {
			t.Errorf("%s: %d %s", body, resp.StatusCode, b)
		}
	}
	if n := up.hits.Load(); n != 0 {
		t.Fatalf("the provider received %d requests", n)
	}
}

// With requests: true, every string the agent wrote is redacted before the
// provider sees it: message names, tool call arguments of the history,
// tool descriptions, content parts, and embeddings input.
func TestSecurityPromptRedactionCoversEveryField(t *testing.T) {
	up, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		if strings.HasSuffix(r.URL.Path, "/embeddings") {
			_, _ = io.WriteString(w, `{"object":"list","data":[{"object":"embedding","index":0,"embedding":[0.1,0.2]}],"model":"gpt-4o-mini","usage":{"prompt_tokens":3,"total_tokens":3}}`)
			return
		}
		_, _ = io.WriteString(w, completion("ok"))
	})
	st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1", protocolExtra: "  redaction:\n    requests: true\n"})
	bodies := map[string]string{
		"name":             `{"model":"gpt-4o-mini","messages":[{"role":"user","name":"` + mail + `","content":"hi"}]}`,
		"tool arguments":   `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"send","arguments":"{\"to\":\"jane.doe\\u0040example.com\",\"key\":\"` + key + `\"}"}}]},{"role":"tool","tool_call_id":"call_1","content":"sent"}]}`,
		"tool description": `{"model":"gpt-4o-mini","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","description":"mail ` + mail + `","parameters":{"type":"object"}}}]}`,
		"content parts":    `{"model":"gpt-4o-mini","messages":[{"role":"user","content":[{"type":"text","text":"key ` + key + `"}]}]}`,
	}
	for note, body := range bodies {
		resp := st.post("/v1/chat/completions", "tok-alpha", body)
		b := readAll(t, resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("%s: %d %s", note, resp.StatusCode, b)
		}
		sent, _ := up.lastBody.Load().(string)
		if l := leaks(sent); l != nil || !strings.Contains(sent, "[REDACTED:") {
			t.Errorf("%s: the provider received %v: %s", note, l, sent)
		}
	}
	resp := st.post("/v1/embeddings", "tok-alpha", `{"model":"gpt-4o-mini","input":["write to `+mail+`"]}`)
	readAll(t, resp.Body)
	if sent, _ := up.lastBody.Load().(string); resp.StatusCode != http.StatusOK || leaks(sent) != nil {
		t.Errorf("embeddings: %d, the provider received %s", resp.StatusCode, sent)
	}
}

// Answer redaction used to look at message.content only; the official
// client now reads every field redacted.
func TestSecurityAnswerRedactionCoversEveryField(t *testing.T) {
	answer := `{"id":"chatcmpl-1","object":"chat.completion","created":1,"model":"gpt-4o-mini","choices":[` +
		`{"index":0,"finish_reason":"tool_calls","message":{"role":"assistant","content":null,"refusal":"call ` + mail + `","reasoning_content":"the key is ` + key + `",` +
		`"tool_calls":[{"id":"call_1","type":"function","function":{"name":"send_mail","arguments":"{\"to\":\"jane.doe\\u0040example.com\"}"}}]}},` +
		`{"index":1,"finish_reason":"stop","message":{"role":"assistant","content":[{"type":"text","text":"mail ` + mail + `"}]}}],` +
		`"usage":{"prompt_tokens":7,"completion_tokens":5,"total_tokens":12}}`
	_, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = io.WriteString(w, answer)
	})
	st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1"})
	c := st.client("tok-alpha")
	got, err := c.Chat.Completions.New(context.Background(), userParams("gpt-4o-mini", "hi"))
	if err != nil {
		t.Fatal(err)
	}
	raw := got.RawJSON()
	if l := leaks(raw); l != nil {
		t.Fatalf("the client received %v: %s", l, raw)
	}
	if got.Choices[0].Message.ToolCalls[0].Function.Name != "send_mail" || !strings.Contains(got.Choices[0].Message.ToolCalls[0].Function.Arguments, "[REDACTED:email]") {
		t.Errorf("tool call: %+v", got.Choices[0].Message.ToolCalls[0])
	}
	var args map[string]string
	if err := json.Unmarshal([]byte(got.Choices[0].Message.ToolCalls[0].Function.Arguments), &args); err != nil {
		t.Errorf("arguments are no longer JSON: %v", err)
	}
}

// Streams that used to pass unredacted because their framing or a field
// had an unexpected form: each is now either read correctly (and
// redacted) or refused with an error event, never passed on unchecked.
func TestSecurityStreamsOfOddShapeAreRedactedOrRefused(t *testing.T) {
	ev := func(content string) string {
		b, _ := json.Marshal(map[string]any{"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "gpt-4o-mini",
			"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": content}, "finish_reason": nil}}})
		return string(b)
	}
	cases := []struct {
		note, ct, stream string
		refused          bool
	}{
		{"CR line endings", "text/event-stream", "data: " + ev("mail "+mail) + "\r\rdata: [DONE]\r\r", false},
		{"BOM", "text/event-stream", "\xEF\xBB\xBFdata: " + ev("mail "+mail) + "\n\ndata: [DONE]\n\n", false},
		{"media type in capitals", "Text/Event-Stream; charset=UTF-8", "data: " + ev("mail "+mail) + "\n\ndata: [DONE]\n\n", false},
		{"created as a float", "text/event-stream", "data: " + strings.Replace(ev("mail "+mail), `"created":1`, `"created":1.7e9`, 1) + "\n\ndata: [DONE]\n\n", true},
		{"index as a string", "text/event-stream", "data: " + strings.Replace(ev("mail "+mail), `"index":0`, `"index":"0"`, 1) + "\n\ndata: [DONE]\n\n", true},
		{"bytes after the JSON", "text/event-stream", "data: " + ev("mail "+mail) + " x\n\ndata: [DONE]\n\n", true},
	}
	for _, tc := range cases {
		t.Run(tc.note, func(t *testing.T) {
			_, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
				w.Header().Set("Content-Type", tc.ct)
				_, _ = io.WriteString(w, tc.stream)
			})
			st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1"})
			resp := st.post("/v1/chat/completions", "tok-alpha", `{"model":"gpt-4o-mini","stream":true,"messages":[{"role":"user","content":"hi"}]}`)
			b := readAll(t, resp.Body)
			if l := leaks(b); l != nil {
				t.Fatalf("the client received %v: %q", l, b)
			}
			if tc.refused != strings.Contains(b, `"code":"upstream_error"`) || tc.refused == strings.HasSuffix(b, "data: [DONE]\n\n") {
				t.Fatalf("refused=%v, got %q", tc.refused, b)
			}
			if !tc.refused && !strings.Contains(b, "[REDACTED:email]") {
				t.Fatalf("not redacted: %q", b)
			}
		})
	}
}

// A JSON answer the gateway cannot read is a 502, not passed on.
func TestSecurityAnswerOfUnknownShapeIs502(t *testing.T) {
	for note, tc := range map[string]struct{ ct, body string }{
		"duplicate content": {"application/json", strings.Replace(completion("fine"), `"content":"fine"`, `"content":"fine","content":"`+mail+`"`, 1)},
		"not JSON":          {"application/json", "mail " + mail},
		"html":              {"text/html", "<p>" + mail},
		"id a number":       {"application/json", strings.Replace(completion(mail), `"id":"chatcmpl-1"`, `"id":1`, 1)},
	} {
		_, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
			w.Header().Set("Content-Type", tc.ct)
			_, _ = io.WriteString(w, tc.body)
		})
		st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1"})
		_, err := st.client("tok-alpha").Chat.Completions.New(context.Background(), userParams("gpt-4o-mini", "hi"))
		var apiErr *openai.Error
		if !errors.As(err, &apiErr) || apiErr.StatusCode != http.StatusBadGateway || strings.Contains(apiErr.RawJSON(), "jane") {
			t.Errorf("%s: %v", note, err)
		}
	}
}

// SACP answers: thought and next_step_hint are redacted like message and
// data (apply_to defaults to every field).
func TestSecuritySACPThoughtAndHintAreRedacted(t *testing.T) {
	sacpAnswer := `{"thought":"the user is ` + mail + `","status":"success","data":{"amount":3},"message":"done","next_step_hint":"use ` + key + `"}`
	_, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, completion(sacpAnswer))
	})
	st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1"})
	got, err := st.client("tok-proto").Chat.Completions.New(context.Background(), userParams("gpt-4o-mini", "hi"))
	if err != nil {
		t.Fatal(err)
	}
	if l := leaks(got.RawJSON()); l != nil {
		t.Fatalf("the client received %v: %s", l, got.RawJSON())
	}
	entries, _ := st.entries()
	for _, e := range entries {
		b, _ := json.Marshal(e)
		if l := leaks(string(b)); l != nil {
			t.Fatalf("the audit trail holds %v", l)
		}
	}
}
