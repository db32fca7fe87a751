package proxy

import (
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/redact"
)

// release is one onRelease call.
type release struct {
	content bool
	finish  []string
}

// releases filters in and returns what the filter said it released.
func releases(t *testing.T, in string, r *redact.Redactor) ([]release, string) {
	t.Helper()
	f := newSSEFilter(io.NopCloser(strings.NewReader(in)), true, nil, newChunkScanner(r))
	var got []release
	f.onRelease = func(content bool, finish []string) {
		got = append(got, release{content, slices.Clone(finish)})
	}
	out, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	return got, string(out)
}

func ev(data string) string { return "data: " + data + "\n\n" }

// chunkWith is a stream chunk with one choice's delta and finish reason.
func chunkWith(delta, finish string) string {
	return ev(`{"id":"c","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":` + delta + `,"finish_reason":` + finish + `}]}`)
}

// TestSSEFilterReleasesContent: what counts as a token for the time to
// first token and the gaps between tokens is a released chunk carrying
// text, a refusal, reasoning or a tool call; never the role-only opening,
// a usage chunk, an empty finishing delta, a keep-alive or [DONE].
func TestSSEFilterReleasesContent(t *testing.T) {
	yes := release{content: true}
	cases := []struct {
		note string
		in   string
		want []release
	}{
		{"role only", chunkWith(`{"role":"assistant","content":""}`, "null"), nil},
		{"null content", chunkWith(`{"content":null}`, "null"), nil},
		{"text", chunkWith(`{"content":"Hi"}`, "null"), []release{yes}},
		{"a space is a token", chunkWith(`{"content":" "}`, "null"), []release{yes}},
		{"content parts", chunkWith(`{"content":[{"type":"text","text":"Hi"}]}`, "null"), []release{yes}},
		{"no content parts", chunkWith(`{"content":[ ]}`, "null"), nil},
		{"refusal", chunkWith(`{"refusal":"No."}`, "null"), []release{yes}},
		{"reasoning", chunkWith(`{"reasoning_content":"think"}`, "null"), []release{yes}},
		{"tool call", chunkWith(`{"tool_calls":[{"index":0,"id":"call_1","type":"function","function":{"name":"f","arguments":""}}]}`, "null"), []release{yes}},
		{"empty tool calls", chunkWith(`{"tool_calls":[]}`, "null"), nil},
		{"function call", chunkWith(`{"function_call":{"name":"f","arguments":"{}"}}`, "null"), []release{yes}},
		{"finish", chunkWith(`{}`, `"stop"`), []release{{finish: []string{"stop"}}}},
		{"text and finish", chunkWith(`{"content":"end"}`, `"length"`), []release{{content: true, finish: []string{"length"}}}},
		{"usage only (dropped)", ev(`{"id":"c","choices":[],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`), nil},
		{"usage kept with a choice", ev(`{"id":"c","choices":[{"index":0,"delta":{"content":"x"},"finish_reason":null}],"usage":{"prompt_tokens":1,"completion_tokens":1,"total_tokens":2}}`), []release{yes}},
		{"keep-alive", ": ping\n\n", nil},
		{"two choices", ev(`{"id":"c","choices":[{"index":0,"delta":{},"finish_reason":"stop"},{"index":1,"delta":{"content":"y"},"finish_reason":"length"}]}`),
			[]release{{content: true, finish: []string{"stop", "length"}}}},
		{"escaped name", ev(`{"id":"c","choices":[{"index":0,"delta":{"\u0063ontent":"x"},"finish_reason":null}]}`), []release{yes}},
	}
	for _, tc := range cases {
		got, _ := releases(t, tc.in+"data: [DONE]\n\n", nil)
		if !slices.EqualFunc(got, tc.want, func(a, b release) bool { return a.content == b.content && slices.Equal(a.finish, b.finish) }) {
			t.Errorf("%s: released %+v, want %+v", tc.note, got, tc.want)
		}
	}
}

// TestSSEFilterReleasesWhatTheClientGets: text the redactor holds back is
// content when it is released to the client, not when the upstream sent
// it: the time to first token is the client's.
func TestSSEFilterReleasesWhatTheClientGets(t *testing.T) {
	r, _ := redact.New(redact.Config{Detectors: redact.Names()})
	// "bob" may start an address: the client gets "" for it, then "bob "
	// with the next chunk, and the rest before the finish.
	in := chunkWith(`{"content":"bob"}`, "null") + chunkWith(`{"content":" and"}`, "null") + chunkWith(`{}`, `"stop"`) + "data: [DONE]\n\n"
	got, out := releases(t, in, r)
	want := []release{{content: true}, {content: true, finish: []string{"stop"}}}
	if !strings.Contains(out, `"content":""`) || !slices.EqualFunc(got, want, func(a, b release) bool { return a.content == b.content && slices.Equal(a.finish, b.finish) }) {
		t.Errorf("released %+v, want %+v (the held-back chunk is no token)\n%s", got, want, out)
	}
}

// TestSSEFilterClosedReleasesNothing: what Close drains after the client
// left never reached it.
func TestSSEFilterClosedReleasesNothing(t *testing.T) {
	f := newSSEFilter(io.NopCloser(strings.NewReader(chunkWith(`{"content":"Hi"}`, "null"))), false, nil, newChunkScanner(nil))
	released := 0
	f.onRelease = func(bool, []string) { released++ }
	f.once.Do(f.start) // the pump reads the chunk; no Read takes it
	<-f.done
	_ = f.Close()
	if released != 0 {
		t.Errorf("%d releases after the client left", released)
	}
}
