package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openai/openai-go"
)

// An OpenAI SDK client that did not ask for stream usage reads no usage in
// any chunk, though the gateway asked the provider for it (which then puts
// "usage": null in every chunk and, as some providers do, the usage beside
// the last choices). One that asked reads the usage in the last chunk.
func TestStreamUsageOnlyWhenAskedSDK(t *testing.T) {
	_, us := newUpstream(t, func(w http.ResponseWriter, r *http.Request, body []byte) {
		if !strings.Contains(string(body), `"include_usage":true`) {
			t.Errorf("the gateway did not ask for the stream's usage: %s", body)
		}
		const head = `data: {"id":"c1","object":"chat.completion.chunk","created":1,"model":"gpt-4o-mini","choices":[{"index":0,`
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write([]byte(head + `"delta":{"role":"assistant","content":"hello there"},"finish_reason":null}],"usage":null}` + "\n\n"))
		_, _ = w.Write([]byte(head + `"delta":{},"finish_reason":"stop"}],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}` + "\n\n"))
		_, _ = w.Write([]byte("data: [DONE]\n\n"))
	})
	st := newStack(t, stackOpts{upstreamURL: us.URL + "/v1"})
	for _, ask := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		params := userParams("gpt-4o-mini", "hi")
		if ask {
			params.StreamOptions = openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)}
		}
		stream := st.client("tok-alpha").Chat.Completions.NewStreaming(ctx, params)
		var text strings.Builder
		var total int64
		for stream.Next() {
			c := stream.Current()
			if !ask && (strings.Contains(c.RawJSON(), "usage") || c.JSON.Usage.Valid()) {
				t.Errorf("a client that did not ask read a usage: %s", c.RawJSON())
			}
			total += c.Usage.TotalTokens
			for _, ch := range c.Choices {
				text.WriteString(ch.Delta.Content)
			}
		}
		if err := stream.Err(); err != nil {
			t.Fatal(err)
		}
		cancel()
		if text.String() != "hello there" {
			t.Errorf("ask %v: text %q", ask, text.String())
		}
		if want := map[bool]int64{false: 0, true: 12}[ask]; total != want {
			t.Errorf("ask %v: usage read %d tokens, want %d", ask, total, want)
		}
	}
}
