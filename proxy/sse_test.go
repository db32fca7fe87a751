package proxy

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/redact"
)

const usageEvent = `data: {"id":"c","choices":[],"usage":{"prompt_tokens":3,"completion_tokens":4,"total_tokens":7}}` + "\n\n"

func filterAll(t *testing.T, in string, drop bool, oneByte bool, r *redact.Redactor) (string, *scope.Usage, string) {
	t.Helper()
	var got *scope.Usage
	var src io.Reader = strings.NewReader(in)
	if oneByte {
		src = iotest.OneByteReader(src)
	}
	f := newSSEFilter(io.NopCloser(src), drop, func(u scope.Usage) { got = &u }, newChunkScanner(r))
	refused := ""
	f.onRefuse = func(reason string) { refused = reason }
	out, err := io.ReadAll(f)
	if err != nil && err != io.ErrUnexpectedEOF { // a cut upstream: the proxy aborts the answer
		t.Fatal(err)
	}
	_ = f.Close()
	return string(out), got, refused
}

func chunk(content string) string {
	b, _ := json.Marshal(map[string]any{"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
		"choices": []any{map[string]any{"index": 0, "delta": map[string]any{"content": content}, "finish_reason": nil}}})
	return string(b)
}

func TestSSEFilterFraming(t *testing.T) {
	a, b := chunk("a"), chunk("usage is a word")
	want := "data: " + a + "\n\n: keep-alive\ndata: " + b + "\n\n"
	cases := []struct {
		note      string
		in        string
		drop      bool
		want      string
		wantUsage int
	}{
		{"LF", "data: " + a + "\n\n: keep-alive\ndata: " + b + "\n\ndata: [DONE]\n\n", false, want + "data: [DONE]\n\n", 0},
		{"CRLF", "data: " + a + "\r\n\r\n:x\r\ndata: " + b + "\r\n\r\ndata: [DONE]\r\n\r\n", false, want + "data: [DONE]\n\n", 0},
		{"CR only", "data: " + a + "\r\r:x\rdata: " + b + "\r\rdata: [DONE]\r\r", false, want + "data: [DONE]\n\n", 0},
		{"BOM first", "\xEF\xBB\xBFdata: " + a + "\n\n:x\ndata: " + b + "\n\ndata: [DONE]\n\n", false, want + "data: [DONE]\n\n", 0},
		{"data split over lines", "data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\n" +
			"data: \"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"finish_reason\":null}]}\n\n:x\ndata:" + b + "\n\ndata: [DONE]\n\n", false,
			"data: {\"id\":\"c\",\"object\":\"chat.completion.chunk\",\"created\":1,\ndata: \"model\":\"m\",\"choices\":[{\"index\":0,\"delta\":{\"content\":\"a\"},\"finish_reason\":null}]}\n\n: keep-alive\ndata: " + b + "\n\ndata: [DONE]\n\n", 0},
		{"usage kept when asked", "data: " + a + "\n\n" + usageEvent + "data: [DONE]\n\n", false, "data: " + a + "\n\n" + usageEvent + "data: [DONE]\n\n", 7},
		{"usage dropped when added", "data: " + a + "\n\n" + usageEvent + "data: [DONE]\n\n", true, "data: " + a + "\n\ndata: [DONE]\n\n", 7},
		{"cut stream passes what arrived, no DONE", "data: " + a + "\n\ndata: {\"b\"", false, "data: " + a + "\n\n", 0},
	}
	for _, tc := range cases {
		for _, oneByte := range []bool{false, true} {
			out, u, refused := filterAll(t, tc.in, tc.drop, oneByte, nil)
			if out != tc.want || refused != "" {
				t.Errorf("%s (one byte %v): out = %q (refused %q)\nwant %q", tc.note, oneByte, out, refused, tc.want)
			}
			if (u == nil) != (tc.wantUsage == 0) || (u != nil && u.TotalTokens != tc.wantUsage) {
				t.Errorf("%s: usage = %+v, want %d", tc.note, u, tc.wantUsage)
			}
		}
	}
}

// Each of these passed unredacted before: an event the gateway cannot read
// into the chunk shape now ends the stream with an error event, no [DONE].
func TestSSEFilterRefusesUnknownShapes(t *testing.T) {
	r, _ := redact.New(redact.Config{Detectors: redact.Names()})
	secret := "write to bob@example.com"
	cases := map[string]string{
		"created as a float": `{"id":"c","created":1.7e9,"choices":[{"index":0,"delta":{"content":"` + secret + `"}}]}`,
		"id as a number":     `{"id":123,"choices":[{"index":0,"delta":{"content":"` + secret + `"}}]}`,
		"index as a string":  `{"id":"c","choices":[{"index":"0","delta":{"content":"` + secret + `"}}]}`,
		"bytes after JSON":   `{"id":"c","choices":[{"index":0,"delta":{"content":"` + secret + `"}}]} trailing`,
		"duplicate key":      `{"id":"c","choices":[{"index":0,"delta":{"content":"x","content":"` + secret + `"}}]}`,
		"case variant key":   `{"id":"c","choices":[{"index":0,"delta":{"Content":"` + secret + `"}}]}`,
		"not JSON":           secret,
		"content an object":  `{"id":"c","choices":[{"index":0,"delta":{"content":{"t":"` + secret + `"}}}]}`,
		"no index":           `{"id":"c","choices":[{"delta":{"content":"` + secret + `"}}]}`,
	}
	for note, data := range cases {
		out, _, refused := filterAll(t, "data: "+chunk("hi")+"\n\ndata: "+data+"\n\ndata: [DONE]\n\n", false, false, r)
		if strings.Contains(out, "bob@") || strings.Contains(out, "[DONE]") || refused != "unknown_shape" {
			t.Errorf("%s: out %q refused %q", note, out, refused)
			continue
		}
		// The first chunk went out (its text held back by the redactor as
		// a possible start of a value), then the error event ends it.
		if !strings.HasPrefix(out, `data: {"choices":[{"delta":{"content":""}`) || !strings.HasSuffix(out, `"type":"upstream_error","code":"upstream_error","param":null}}`+"\n\n") {
			t.Errorf("%s: want the first chunk then an error event, got %q", note, out)
		}
	}
	out, _, refused := filterAll(t, "event: surprise\ndata: "+chunk(secret)+"\n\n", false, false, r)
	if strings.Contains(out, "bob@") || refused != "unknown_shape" {
		t.Errorf("named event: %q %q", out, refused)
	}
}

// Every string of a chunk is redacted: tool call arguments, refusal and
// reasoning arrive in fragments and are redacted across them.
func TestSSEFilterRedactsEveryField(t *testing.T) {
	r, _ := redact.New(redact.Config{Detectors: redact.Names()})
	ev := func(delta map[string]any, finish any) string {
		b, _ := json.Marshal(map[string]any{"id": "c", "object": "chat.completion.chunk", "created": 1, "model": "m",
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}}})
		return "data: " + string(b) + "\n\n"
	}
	tool := func(args string) map[string]any {
		return map[string]any{"tool_calls": []any{map[string]any{"index": 0, "function": map[string]any{"arguments": args}}}}
	}
	in := ev(map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"index": 0, "id": "call_1", "type": "function",
		"function": map[string]any{"name": "send", "arguments": ""}}}}, nil) +
		ev(tool(`{"to":"jane.do`), nil) + ev(tool(`e@example.com"}`), nil) +
		ev(map[string]any{"refusal": "ask 555-0100 or bob@exam"}, nil) + ev(map[string]any{"refusal": "ple.com"}, nil) +
		ev(map[string]any{"reasoning_content": "key sk-proj-AbCdEfGhIjKlMnOpQrStUvWx0123456789"}, nil) +
		ev(map[string]any{}, "tool_calls") + "data: [DONE]\n\n"
	out, _, refused := filterAll(t, in, false, false, r)
	for _, leak := range []string{"jane.do", "example.com", "bob@", "AbCdEf"} {
		if strings.Contains(out, leak) {
			t.Errorf("%q reached the client: %s", leak, out)
		}
	}
	if refused != "" || !strings.HasSuffix(out, "data: [DONE]\n\n") || !strings.Contains(out, "[REDACTED:email]") || !strings.Contains(out, `"name":"send"`) {
		t.Errorf("refused %q, out %s", refused, out)
	}
}

// An upstream that stops sending mid-stream gets keep-alives, then an
// error event once timeouts.stream_idle passed.
func TestSSEFilterIdleUpstream(t *testing.T) {
	pr, pw := io.Pipe()
	go func() { _, _ = pw.Write([]byte("data: " + chunk("a") + "\n\n")) }() // then silence
	f := newSSEFilter(pr, false, nil, newChunkScanner(nil))
	f.KeepAlive, f.Idle = 40*time.Millisecond, 200*time.Millisecond
	refused := ""
	f.onRefuse = func(reason string) { refused = reason }
	start := time.Now()
	out, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("idle stream ended after %s", d)
	}
	s := string(out)
	if !strings.HasPrefix(s, "data: "+chunk("a")+"\n\n: keep-alive\n") || !strings.Contains(s, `"code":"upstream_error"`) || strings.Contains(s, "[DONE]") || refused != "idle" {
		t.Fatalf("out %q refused %q", s, refused)
	}
}

// wantEvents is a plain reading of the WHATWG rules, written for clarity
// rather than speed, that sseReader must agree with.
func wantEvents(in string) []sseMessage {
	in = strings.TrimPrefix(in, "\uFEFF")
	in = strings.ReplaceAll(in, "\r\n", "\n")
	in = strings.ReplaceAll(in, "\r", "\n")
	lines := strings.Split(in, "\n")
	lines = lines[:len(lines)-1] // the text after the last line break is not a line
	var out []sseMessage
	var data []string
	name := ""
	for _, line := range lines {
		switch {
		case line == "":
			if data != nil {
				out = append(out, sseMessage{name: name, data: []byte(strings.Join(data, "\n"))})
			}
			data, name = nil, ""
		case strings.HasPrefix(line, ":"):
			out = append(out, sseMessage{comment: true})
		default:
			field, value, _ := strings.Cut(line, ":")
			value = strings.TrimPrefix(value, " ")
			switch field {
			case "data":
				data = append(data, value)
			case "event":
				name = value
			}
		}
	}
	return out
}

func readEvents(in string) []sseMessage {
	sr := newSSEReader(iotest.OneByteReader(strings.NewReader(in)))
	var out []sseMessage
	for {
		m, err := sr.next()
		if err != nil {
			return out
		}
		out = append(out, m)
	}
}

// FuzzSSEFraming holds sseReader against the plain reading of the rules.
func FuzzSSEFraming(f *testing.F) {
	for _, s := range []string{"data: a\n\n", "data:a\r\rdata: b\r\n\r\n", "\uFEFFdata: x\n\n", ":c\ndata: 1\ndata: 2\n\n",
		"event: e\ndata\n\n", "data: [DONE]\n\n", "id: 1\nretry: 5\ndata: z\n\n", "data: cut"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, in string) {
		if strings.Contains(in[min(len(in), 3):], "\uFEFF") {
			return // only a leading BOM is special
		}
		got, want := readEvents(in), wantEvents(in)
		if len(got) != len(want) {
			t.Fatalf("%q: %d events, want %d (%v vs %v)", in, len(got), len(want), got, want)
		}
		for i := range got {
			if got[i].comment != want[i].comment || got[i].name != want[i].name || string(got[i].data) != string(want[i].data) {
				t.Fatalf("%q: event %d = %+v, want %+v", in, i, got[i], want[i])
			}
		}
	})
}

// An upstream that keeps sending, for longer than the idle limit, is
// neither given keep-alives nor cut: each event moves both silences on.
func TestSSEFilterActiveUpstreamOutlastsIdle(t *testing.T) {
	pr, pw := io.Pipe()
	go func() {
		for i := 0; i < 120; i++ {
			_, _ = pw.Write([]byte("data: " + chunk("a") + "\n\n"))
			time.Sleep(10 * time.Millisecond)
		}
		_, _ = pw.Write([]byte("data: [DONE]\n\n"))
		_ = pw.Close()
	}()
	f := newSSEFilter(pr, false, nil, newChunkScanner(nil))
	f.KeepAlive, f.Idle = 400*time.Millisecond, 800*time.Millisecond
	start := time.Now()
	out, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	s := string(out)
	if time.Since(start) < f.Idle {
		t.Skip("the stream ended before the idle limit: nothing to show")
	}
	if strings.Contains(s, "keep-alive") || !strings.HasSuffix(s, "data: [DONE]\n\n") || strings.Count(s, chunk("a")) != 120 {
		t.Fatalf("out %.300q", s)
	}
}
