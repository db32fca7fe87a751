package proxy

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/sacpgw/gateway/redact"
)

// runStream feeds text split at the given cut points through the stream
// redactor as SSE chunk events and returns the content the client sees.
func runStream(t testing.TB, r *redact.Redactor, text string, cuts []int) (string, bool) {
	s := newChunkScanner(r)
	var out []byte
	prev := 0
	pieces := []string{}
	for _, c := range cuts {
		for c > 0 && c < len(text) && !utf8.RuneStart(text[c]) {
			c-- // an SSE chunk's content is a JSON string: whole runes only
		}
		if c > prev && c < len(text) {
			pieces = append(pieces, text[prev:c])
			prev = c
		}
	}
	pieces = append(pieces, text[prev:])
	for _, p := range pieces {
		b, _ := json.Marshal(map[string]any{"id": "x", "choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": p}, "finish_reason": nil}}})
		res, err := s.event(b)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, res.out...)
		if res.blocked {
			return collectContent(t, out), true
		}
	}
	o, blocked := s.flush()
	out = append(out, o...)
	return collectContent(t, out), blocked
}

func collectContent(t testing.TB, sse []byte) string {
	var b strings.Builder
	for _, ev := range strings.Split(string(sse), "\n\n") {
		data := strings.TrimPrefix(ev, "data: ")
		if data == "" || data == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Delta struct {
					Content string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &c); err != nil {
			t.Fatalf("emitted a bad event %q: %v", data, err)
		}
		for _, ch := range c.Choices {
			b.WriteString(ch.Delta.Content)
		}
	}
	return b.String()
}

func TestStreamRedactorMatchesWholeText(t *testing.T) {
	r, _ := redact.New(redact.Config{Detectors: redact.Names()})
	text := `Mail "jane.doe@example.com", card 4111 1111 1111 1111 <b>, key sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123456789 done`
	want, _ := r.String(text)
	for cut := 1; cut < len(text); cut++ {
		got, _ := runStream(t, r, text, []int{cut, cut + 7})
		if got != want {
			t.Fatalf("cut at %d:\n got %q\nwant %q", cut, got, want)
		}
	}
}

// FuzzStreamRedactor: whatever the text and however it is cut into SSE
// chunks, the client sees exactly what redacting the whole text gives, so
// no detected value (or a piece of one) ever reaches it.
func FuzzStreamRedactor(f *testing.F) {
	f.Add("write to bob@example.com now", 9, 17)
	f.Add("card 4111111111111111 ssn 123-45-6789", 3, 30)
	f.Add("ip 10.0.0.1 and eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.abc_DEF-123", 5, 40)
	f.Add("\"quoted\" \\ <html> \u00e9\u4e16", 2, 4)
	r, _ := redact.New(redact.Config{Detectors: redact.Names()})
	f.Fuzz(func(t *testing.T, text string, a, b int) {
		if !utf8.ValidString(text) {
			return // JSON decoding turns invalid UTF-8 into U+FFFD before redaction
		}
		want, res := r.String(text)
		got, blocked := runStream(t, r, text, []int{abs(a) % (len(text) + 1), abs(b) % (len(text) + 1)})
		if blocked {
			return
		}
		if got != want {
			t.Fatalf("stream %q != whole %q (findings %v)", got, want, res.Counts)
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}

func TestStructuralAllowList(t *testing.T) {
	r, _ := redact.New(redact.Config{Detectors: redact.Names()})
	answer := `{"id":"chatcmpl-9a8B7c6D5e4F3g2H1","object":"chat.completion","created":1,"model":"gpt-4o-2024-08-06","system_fingerprint":"fp_44709d6fcb",` +
		`"choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"mail bob@example.com",` +
		`"tool_calls":[{"id":"call_Jk2LxQ9zT4vB8nM3","type":"function","function":{"name":"send","arguments":"{}"}}]}}]}`
	out, _, res, err := checkAnswer(r, []byte(answer), true)
	if err != nil {
		t.Fatal(err)
	}
	for _, kept := range []string{"chatcmpl-9a8B7c6D5e4F3g2H1", "gpt-4o-2024-08-06", "fp_44709d6fcb", "call_Jk2LxQ9zT4vB8nM3", `"name":"send"`} {
		if !strings.Contains(string(out), kept) {
			t.Errorf("structural value %s was changed: %s", kept, out)
		}
	}
	if res.Total() != 1 || strings.Contains(string(out), "bob@") {
		t.Errorf("content not redacted: %s", out)
	}
	// A structural field that is not identifier-shaped is scanned like any
	// string: it cannot carry an address past the detectors.
	sneaky := strings.Replace(answer, `"system_fingerprint":"fp_44709d6fcb"`, `"system_fingerprint":"mail bob@example.com"`, 1)
	out, _, _, _ = checkAnswer(r, []byte(sneaky), true)
	if strings.Contains(string(out), "bob@") {
		t.Errorf("sneaky structural value passed: %s", out)
	}
	emb := `{"object":"list","data":[{"object":"embedding","index":0,"embedding":"AAAAPwAAgD8AAABAsk3Kqf+Qz0LwKm1u"}],"model":"text-embedding-3-small"}`
	out, _, _, err = checkAnswer(r, []byte(emb), false)
	if err != nil || string(out) != emb {
		t.Errorf("base64 embedding changed: %s %v", out, err)
	}
}
