package anthropic

import (
	"bytes"
	"io"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// FuzzProviderRequest: a chat request the translation accepts becomes one
// Messages request with a model, a positive max_tokens, a conversation
// that starts (after the system prompt) and ends with a user turn and
// alternates roles, with no empty text block — what Anthropic's API
// requires; what it refuses gets a non-empty error and nothing else.
func FuzzProviderRequest(f *testing.F) {
	seeds(f, "provider/*.chat.json", nil)
	for _, s := range []string{
		`{"model":"m","messages":[{"role":"system","content":"s"},{"role":"user","content":[{"type":"text","text":""},{"type":"image_url","image_url":{"url":"data:image/png;base64,AAAA"}}]}],"stop":["a","b"],"user":"u"}`,
		`{"model":"m","messages":[{"role":"user","content":"x"},{"role":"assistant","content":"","tool_calls":[{"id":"i","type":"function","function":{"name":"n","arguments":"{}"}}]},{"role":"tool","tool_call_id":"i","content":""},{"role":"tool","tool_call_id":"j","content":[{"type":"text","text":"r"}]}],"parallel_tool_calls":false,"tool_choice":"none"}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"model":"n"}`,
		`{"model":"m","messages":[{"role":"user","content":null}]}`,
		"{\"model\":\"\xff\"}", `[]`, `null`, `{}`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, chat []byte) {
		body, stream, _, err := ProviderRequest(chat, ProviderOptions{MaxTokens: 16})
		if err != nil {
			if body != nil || err.Error() == "" {
				t.Fatalf("error %q with a body", err)
			}
			return
		}
		var got struct {
			Model     string `json:"model"`
			MaxTokens int64  `json:"max_tokens"`
			Stream    bool   `json:"stream"`
			Messages  []struct {
				Role    string `json:"role"`
				Content []struct {
					Type string  `json:"type"`
					Text *string `json:"text"`
				} `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(body, &got, json.RejectUnknownMembers(false)); err != nil {
			t.Fatalf("the translation is not a Messages request: %v\n%s", err, body)
		}
		if got.Model == "" || got.MaxTokens < 1 || got.Stream != stream || len(got.Messages) == 0 {
			t.Fatalf("missing model, max_tokens or messages, or stream %v disagrees: %s", stream, body)
		}
		if got.Messages[len(got.Messages)-1].Role != "user" {
			t.Fatalf("the conversation does not end with the user: %s", body)
		}
		for i, m := range got.Messages {
			if i > 0 && got.Messages[i-1].Role == m.Role {
				t.Fatalf("two %s turns in a row: %s", m.Role, body)
			}
			if len(m.Content) == 0 {
				t.Fatalf("turn %d is empty: %s", i, body)
			}
			for _, b := range m.Content {
				if b.Type == "text" && (b.Text == nil || *b.Text == "") {
					t.Fatalf("an empty text block: %s", body)
				}
			}
		}
	})
}

// FuzzChunkReader: whatever the provider streams, the chunk stream is
// "data: " events of JSON objects, and it ends with [DONE] only after a
// finish_reason chunk; an error event is the last event.
func FuzzChunkReader(f *testing.F) {
	seeds(f, "provider/*.anthropic.sse", nil)
	f.Add([]byte("event: message_start\ndata: {\"type\":\"message_start\",\"message\":{\"id\":\"msg_1\",\"model\":\"m\",\"usage\":{}}}\n\nevent: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"overloaded_error\",\"message\":\"o\"}}\n\n"))
	f.Add([]byte("data: {\"type\":\"message_stop\"}\r\n\r\n"))
	f.Fuzz(func(t *testing.T, in []byte) {
		out, err := io.ReadAll(NewChunkReader(io.NopCloser(bytes.NewReader(in)), true, 1))
		if err != nil {
			t.Fatal(err)
		}
		if len(out) == 0 {
			return
		}
		if !bytes.HasSuffix(out, []byte("\n\n")) {
			t.Fatalf("the stream does not end an event: %q", out)
		}
		events := strings.Split(strings.TrimSuffix(string(out), "\n\n"), "\n\n")
		finished := false
		for i, e := range events {
			data, ok := strings.CutPrefix(e, "data: ")
			if !ok || strings.Contains(data, "\n") {
				t.Fatalf("event %d is not one data line: %q", i, e)
			}
			if data == "[DONE]" {
				if i != len(events)-1 || !finished {
					t.Fatalf("[DONE] at %d of %d, after a finish: %v", i, len(events), finished)
				}
				continue
			}
			if !jsontext.Value(data).IsValid() || data[0] != '{' {
				t.Fatalf("event %d is not a JSON object: %q", i, data)
			}
			if strings.HasPrefix(data, `{"error":`) && i != len(events)-1 {
				t.Fatalf("an error event is not the last: %q", out)
			}
			if strings.Contains(data, `"finish_reason":"`) {
				finished = true
			}
		}
	})
}
