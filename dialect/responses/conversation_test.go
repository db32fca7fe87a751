package responses

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// history is a History read back from what Next encoded.
func history(t *testing.T, b []byte) *History {
	t.Helper()
	h, err := DecodeHistory(b)
	if err != nil {
		t.Fatalf("%v: %s", err, b)
	}
	return h
}

func readTurn(t *testing.T, body string) *Turn {
	t.Helper()
	turn, err := ReadTurn([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	return turn
}

// TestTurnChat: a continued turn is its instructions, the kept
// conversation, then its input; the next conversation keeps the input and
// the answer but never the instructions.
func TestTurnChat(t *testing.T) {
	const answer1 = `{"id":"chatcmpl-1","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hello Ann."},"finish_reason":"stop"}]}`
	turn1 := readTurn(t, `{"model":"m","instructions":"Be terse.","input":[{"role":"developer","content":"Use first names."},{"role":"user","content":"I am Ann."}]}`)
	if turn1.PreviousResponseID != "" || !turn1.Store {
		t.Fatalf("turn 1: previous %q, store %v", turn1.PreviousResponseID, turn1.Store)
	}
	var kept []byte
	if _, err := ResponseWith([]byte(answer1), Meta{Keep: func(a *Answer) bool { kept = turn1.Next(nil, a); return true }}); err != nil {
		t.Fatal(err)
	}
	sameJSON(t, kept, []byte(`{"messages":[{"role":"developer","content":"Use first names."},{"role":"user","content":"I am Ann."},{"role":"assistant","content":"Hello Ann."}]}`))

	turn2 := readTurn(t, `{"model":"m","instructions":"Answer in French.","previous_response_id":"resp_1","store":false,"input":"Who am I?"}`)
	if turn2.PreviousResponseID != "resp_1" || turn2.Store {
		t.Fatalf("turn 2: previous %q, store %v", turn2.PreviousResponseID, turn2.Store)
	}
	chat, stream, model, err := turn2.Chat(history(t, kept))
	if err != nil || stream || model != "m" {
		t.Fatalf("%v %v %q", err, stream, model)
	}
	sameJSON(t, chat, []byte(`{"model":"m","messages":[{"role":"system","content":"Answer in French."},{"role":"developer","content":"Use first names."},`+
		`{"role":"user","content":"I am Ann."},{"role":"assistant","content":"Hello Ann."},{"role":"user","content":"Who am I?"}]}`))
	if strings.Contains(string(chat), "Be terse.") {
		t.Errorf("turn 1's instructions carried over: %s", chat)
	}

	// A function_call at the start of the input is a turn of its own, not
	// merged into the kept assistant message.
	turn3 := readTurn(t, `{"model":"m","previous_response_id":"resp_1","input":[{"type":"function_call","call_id":"c1","name":"f","arguments":"{}"},{"type":"function_call_output","call_id":"c1","output":"ok"}]}`)
	chat, _, _, err = turn3.Chat(history(t, kept))
	if err != nil {
		t.Fatal(err)
	}
	sameJSON(t, chat, []byte(`{"model":"m","messages":[{"role":"developer","content":"Use first names."},{"role":"user","content":"I am Ann."},{"role":"assistant","content":"Hello Ann."},`+
		`{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","content":"ok","tool_call_id":"c1"}]}`))

	// Without a kept conversation, Chat(nil) is Request's translation.
	want, _, _, err := Request([]byte(`{"model":"m","instructions":"Be terse.","input":[{"role":"developer","content":"Use first names."},{"role":"user","content":"I am Ann."}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got, _, _, _ := turn1.Chat(nil)
	if !bytes.Equal(got, want) {
		t.Errorf("Chat(nil) %s, Request %s", got, want)
	}
}

// TestAnswerIsReplay: the answer kept for a response is what replaying its
// output items as input translates to, for every answer shape the
// translation writes (text, refusal, tool calls, text after tool calls in
// a stream), JSON and stream alike.
func TestAnswerIsReplay(t *testing.T) {
	replay := func(t *testing.T, body []byte) []byte {
		t.Helper()
		var r struct {
			Output []jsontext.Value `json:"output"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatal(err)
		}
		var items []string
		for _, o := range r.Output {
			items = append(items, string(o))
		}
		chat, _, _, err := Request([]byte(`{"model":"m","input":[{"role":"user","content":"Q"},` + strings.Join(items, ",") + `]}`))
		if err != nil {
			t.Fatalf("replaying %s: %v", body, err)
		}
		var c struct {
			Messages jsontext.Value `json:"messages"`
		}
		_ = json.Unmarshal(chat, &c)
		return []byte(`{"messages":` + string(c.Messages) + `}`)
	}
	turn := readTurn(t, `{"model":"m","input":"Q"}`)
	for _, name := range []string{"text", "tool_calls"} {
		t.Run("json "+name, func(t *testing.T) {
			var kept []byte
			var ans *Answer
			body, err := ResponseWith(readFile(t, filepath.Join("response", name+".json")), Meta{Suffix: "s1", Keep: func(a *Answer) bool {
				ans, kept = a, turn.Next(nil, a)
				return true
			}})
			if err != nil {
				t.Fatal(err)
			}
			if ans.ID != "resp_s1" || ans.Status != "completed" {
				t.Errorf("answer %s %s", ans.ID, ans.Status)
			}
			sameJSON(t, kept, replay(t, body))
		})
	}
	for _, name := range []string{"text", "tool_calls"} {
		t.Run("stream "+name, func(t *testing.T) {
			var kept []byte
			var out bytes.Buffer
			s := NewStreamWith(&out, "m", Meta{Suffix: "s2", Keep: func(a *Answer) bool { kept = turn.Next(nil, a); return true }})
			_, _ = s.Write(readFile(t, filepath.Join("stream", name+".openai.sse")))
			_ = s.Close()
			events, err := parseEvents(out.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			last := events[len(events)-1]
			if last.name != "response.completed" {
				t.Fatalf("last event %s", last.name)
			}
			final, _ := json.Marshal(last.data["response"])
			sameJSON(t, kept, replay(t, final))
		})
	}
	// Text after a tool call (a stream's second message item) is a message
	// of its own after the calls' message.
	var kept []byte
	var out bytes.Buffer
	s := NewStreamWith(&out, "m", Meta{Keep: func(a *Answer) bool { kept = turn.Next(nil, a); return true }})
	_, _ = s.Write([]byte(sse(`{"content":"A"}`, "") + sse(`{"tool_calls":[{"index":0,"id":"c1","function":{"name":"f","arguments":"{}"}}]}`, "") +
		sse(`{"content":"B"}`, `"stop"`) + "data: [DONE]\n\n"))
	_ = s.Close()
	sameJSON(t, kept, []byte(`{"messages":[{"role":"user","content":"Q"},{"role":"assistant","content":"A","tool_calls":[{"id":"c1","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"assistant","content":"B"}]}`))
}

func sse(delta, finish string) string {
	if finish == "" {
		finish = "null"
	}
	return `data: {"id":"chatcmpl-x","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}` + "\n\n"
}

// TestMeta: the response says its id, the response it continues and
// whether it was kept; Keep runs before the final response is out, once,
// and never for a stream that failed.
func TestMeta(t *testing.T) {
	const completion = `{"id":"chatcmpl-abc","created":7,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"Hi"},"finish_reason":"stop"}]}`
	for _, tc := range []struct {
		name  string
		meta  Meta
		store bool
	}{
		{"kept", Meta{Suffix: "gw1", PreviousResponseID: "resp_prev", Store: true, Keep: func(*Answer) bool { return true }}, true},
		{"keeping failed", Meta{Suffix: "gw1", PreviousResponseID: "resp_prev", Store: true, Keep: func(*Answer) bool { return false }}, false},
	} {
		t.Run("json "+tc.name, func(t *testing.T) {
			body, err := ResponseWith([]byte(completion), tc.meta)
			if err != nil {
				t.Fatal(err)
			}
			var r map[string]any
			_ = json.Unmarshal(body, &r)
			msg := r["output"].([]any)[0].(map[string]any)
			if r["id"] != "resp_gw1" || msg["id"] != "msg_gw1" || r["previous_response_id"] != "resp_prev" || r["store"] != tc.store {
				t.Errorf("response %s", body)
			}
		})
		t.Run("stream "+tc.name, func(t *testing.T) {
			var out bytes.Buffer
			m := tc.meta
			calls := 0
			keep := m.Keep
			m.Keep = func(a *Answer) bool {
				calls++
				// Nothing of the final event is out yet.
				if strings.Contains(out.String(), "response.completed") {
					t.Error("Keep called after the final event was written")
				}
				return keep(a)
			}
			s := NewStreamWith(&out, "m", m)
			_, _ = s.Write([]byte(sse(`{"content":"Hi"}`, `"stop"`) + "data: [DONE]\n\n"))
			_ = s.Close()
			events, err := parseEvents(out.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			if calls != 1 {
				t.Errorf("Keep called %d times", calls)
			}
			created, final := events[0].data["response"].(map[string]any), events[len(events)-1].data["response"].(map[string]any)
			if created["id"] != "resp_gw1" || created["store"] != true || created["previous_response_id"] != "resp_prev" ||
				final["store"] != tc.store || final["previous_response_id"] != "resp_prev" {
				t.Errorf("created %v\nfinal %v", created, final)
			}
		})
	}
	t.Run("failed stream not kept", func(t *testing.T) {
		var out bytes.Buffer
		s := NewStreamWith(&out, "m", Meta{Keep: func(*Answer) bool { t.Error("Keep called for a failed stream"); return true }})
		_, _ = s.Write([]byte(sse(`{"content":"Hi"}`, "")))
		_ = s.Close() // no [DONE]
		_, _ = ResponseWith([]byte(`{"choices":[]}`), Meta{Keep: func(*Answer) bool { t.Error("Keep called for a refused answer"); return true }})
	})
	t.Run("zero meta", func(t *testing.T) {
		body, err := ResponseWith([]byte(completion), Meta{})
		if err != nil {
			t.Fatal(err)
		}
		want, _ := Response([]byte(completion))
		if !bytes.Equal(body, want) || !strings.Contains(string(body), `"id":"resp_abc"`) || !strings.Contains(string(body), `"store":false`) {
			t.Errorf("zero Meta %s, Response %s", body, want)
		}
	})
}

// TestDecodeHistory: a kept value is read as strictly as a request; what
// the translation would not have written is refused.
func TestDecodeHistory(t *testing.T) {
	for _, tc := range []struct{ name, in, want string }{
		{"empty", ``, "empty"},
		{"not an object", `[]`, ""},
		{"no messages", `{"messages":[]}`, "without messages"},
		{"unknown member", `{"messages":[{"role":"user","content":"x"}],"extra":1}`, "unknown field"},
		{"unknown message member", `{"messages":[{"role":"user","content":"x","name":"n"}]}`, "unknown field"},
		{"duplicate member", `{"messages":[{"role":"user","role":"system","content":"x"}]}`, "more than once"},
		{"bad role", `{"messages":[{"role":"root","content":"x"}]}`, "not a role"},
		{"no content", `{"messages":[{"role":"user"}]}`, "content"},
		{"invalid UTF-8", "{\"messages\":[{\"role\":\"user\",\"content\":\"\xff\"}]}", "UTF-8"},
		{"trailing data", `{"messages":[{"role":"user","content":"x"}]} {}`, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h, err := DecodeHistory([]byte(tc.in))
			if err == nil {
				t.Fatalf("accepted %s (%d messages)", tc.in, h.Len())
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
		})
	}
	h := history(t, []byte(`{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","content":"r","tool_call_id":"c"}]}`))
	if h.Len() != 3 {
		t.Errorf("%d messages", h.Len())
	}
}

// FuzzDecodeHistory: a kept value never panics the reader; what it
// accepts continues a turn into one valid chat request that holds every
// kept message, the same every time.
func FuzzDecodeHistory(f *testing.F) {
	for _, s := range []string{
		`{"messages":[{"role":"user","content":"x"},{"role":"assistant","content":"y"}]}`,
		`{"messages":[{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","content":"r","tool_call_id":"c"}]}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"https://e.com/a.png"}}]}]}`,
		`too_large`, `{}`, `{"messages":null}`, `{"messages":[{}]}`, ``,
	} {
		f.Add([]byte(s))
	}
	turn, err := ReadTurn([]byte(`{"model":"m","instructions":"S","input":"Q"}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		h, err := DecodeHistory(b)
		if err != nil {
			if h != nil {
				t.Fatal("an error and a history")
			}
			return
		}
		chat, _, _, err := turn.Chat(h)
		if err != nil || !jsontext.Value(chat).IsValid() {
			t.Fatalf("%v: %s", err, chat)
		}
		var got struct {
			Messages []jsontext.Value `json:"messages"`
		}
		if err := json.Unmarshal(chat, &got); err != nil || len(got.Messages) != h.Len()+2 {
			t.Fatalf("%v: %d messages for %d kept: %s", err, len(got.Messages), h.Len(), chat)
		}
		again, _, _, _ := turn.Chat(h)
		if !bytes.Equal(again, chat) {
			t.Fatal("not deterministic")
		}
	})
}
