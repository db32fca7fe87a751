package anthropic

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/go-json-experiment/json"

	"github.com/sacpgw/gateway/dialect/internal/dialecttest"
)

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	return dialecttest.ReadFile(t, name)
}

func sameJSON(t testing.TB, got, want []byte) {
	t.Helper()
	dialecttest.SameJSON(t, got, want)
}

// newStream is NewStream as the shared harness takes it.
func newStream(w io.Writer, model string) io.WriteCloser { return NewStream(w, model) }

func feed(t testing.TB, model string, in []byte, rng *rand.Rand) []byte {
	t.Helper()
	return dialecttest.Feed(t, newStream, model, in, rng)
}

func feedWhole(t testing.TB, model string, in []byte) []byte {
	t.Helper()
	return dialecttest.FeedWhole(t, newStream, model, in)
}

// sseEvent is one event of the Anthropic stream.
type sseEvent struct {
	name string
	data map[string]any
}

// parseEvents reads an Anthropic stream strictly in the framing Stream
// writes: "event: NAME\ndata: JSON\n\n", the JSON's type being NAME.
func parseEvents(out []byte) ([]sseEvent, error) {
	var events []sseEvent
	for len(out) > 0 {
		end := bytes.Index(out, []byte("\n\n"))
		if end < 0 {
			return nil, fmt.Errorf("unterminated event %q", out)
		}
		ev := string(out[:end])
		out = out[end+2:]
		name, data, ok := strings.Cut(ev, "\ndata: ")
		if !ok || !strings.HasPrefix(name, "event: ") || strings.Contains(data, "\n") {
			return nil, fmt.Errorf("malformed event %q", ev)
		}
		name = strings.TrimPrefix(name, "event: ")
		var m map[string]any
		if err := json.Unmarshal([]byte(data), &m); err != nil {
			return nil, fmt.Errorf("event %s: data is not a JSON object: %v", name, err)
		}
		if m["type"] != name {
			return nil, fmt.Errorf("event %s has type %v", name, m["type"])
		}
		events = append(events, sseEvent{name: name, data: m})
	}
	return events, nil
}

// checkStream holds an Anthropic stream to the protocol its SDKs expect:
// message_start first (pings aside), blocks one at a time with consecutive
// indexes and deltas of their own kind, one message_delta after the last
// block, message_stop last, or an error event last; closed says the stream
// was closed, so it must have ended one of those two ways.
func checkStream(t testing.TB, out []byte, closed bool) {
	t.Helper()
	events, err := parseEvents(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	started, ended, deltaSeen := false, false, false
	open, next := "", 0
	fail := func(i int, format string, args ...any) {
		t.Helper()
		t.Fatalf("event %d (%s): %s\n%s", i, events[i].name, fmt.Sprintf(format, args...), out)
	}
	for i, ev := range events {
		if ended {
			fail(i, "after the end of the stream")
		}
		index := -1
		if f, ok := ev.data["index"].(float64); ok {
			index = int(f)
		}
		switch ev.name {
		case "ping":
		case "error":
			ended = true
			e, _ := ev.data["error"].(map[string]any)
			if e == nil || e["type"] == "" || e["message"] == "" {
				fail(i, "error without type or message")
			}
		case "message_start":
			if started {
				fail(i, "second message_start")
			}
			started = true
		case "content_block_start":
			if !started || open != "" || deltaSeen || index != next {
				fail(i, "block start out of place (open %q, next %d)", open, next)
			}
			cb, _ := ev.data["content_block"].(map[string]any)
			open, _ = cb["type"].(string)
			if open != "text" && open != "tool_use" {
				fail(i, "block type %q", open)
			}
		case "content_block_delta":
			d, _ := ev.data["delta"].(map[string]any)
			want := map[string]string{"text": "text_delta", "tool_use": "input_json_delta"}[open]
			if open == "" || index != next || d["type"] != want {
				fail(i, "delta %v for block %q at %d", d["type"], open, next)
			}
		case "content_block_stop":
			if open == "" || index != next {
				fail(i, "stop of no open block")
			}
			open, next = "", next+1
		case "message_delta":
			if !started || open != "" || deltaSeen {
				fail(i, "message_delta out of place")
			}
			deltaSeen = true
		case "message_stop":
			if !deltaSeen {
				fail(i, "message_stop without message_delta")
			}
			ended = true
		default:
			fail(i, "unknown event")
		}
	}
	if closed && !ended {
		t.Fatalf("closed stream ended neither with message_stop nor with error\n%s", out)
	}
}
