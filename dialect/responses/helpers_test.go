package responses

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
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

// sseEvent is one event of the Responses stream.
type sseEvent struct {
	name string
	data map[string]any
}

// parseEvents reads a Responses stream strictly in the framing Stream
// writes: "event: NAME\ndata: JSON\n\n", the JSON's type being NAME, and
// comment lines (":...\n") between events.
func parseEvents(out []byte) ([]sseEvent, error) {
	return parseEventsFrom(out, 0)
}

// parseEventsFrom is parseEvents for a part of a stream whose first event
// has sequence_number first.
func parseEventsFrom(out []byte, first int) ([]sseEvent, error) {
	var events []sseEvent
	for len(out) > 0 {
		if out[0] == ':' {
			end := bytes.IndexByte(out, '\n')
			if end < 0 {
				return nil, fmt.Errorf("unterminated comment %q", out)
			}
			if end+1 < len(out) && out[end+1] == '\n' {
				return nil, fmt.Errorf("comment followed by a blank line (an empty event for openai-go) %q", out)
			}
			out = out[end+1:]
			continue
		}
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
		if m["sequence_number"] != float64(first+len(events)) {
			return nil, fmt.Errorf("event %s has sequence_number %v, want %d", name, m["sequence_number"], first+len(events))
		}
		events = append(events, sseEvent{name: name, data: m})
	}
	return events, nil
}

// checkStream holds a Responses stream to the protocol its SDKs expect:
// response.created and response.in_progress first, items one at a time
// with consecutive output indexes, parts one at a time with consecutive
// content indexes, deltas of the open part or call, done events repeating
// what the deltas said, then response.completed or response.incomplete
// whose output is the items done; or an error event, then response.failed
// when the response was created, last. closed says the stream was closed,
// so it must have ended one of those ways.
func checkStream(t testing.TB, out []byte, closed bool) {
	t.Helper()
	events, err := parseEvents(out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	fail := func(i int, format string, args ...any) {
		t.Helper()
		t.Fatalf("event %d (%s): %s\n%s", i, events[i].name, fmt.Sprintf(format, args...), out)
	}
	var (
		started, ended, errored bool
		items                   []any // the items done
		open                    map[string]any
		openType                string // message or function_call
		parts                   int    // the parts done in the open message
		part                    string // the open part's type
		text                    string // its deltas, or the open call's
	)
	num := func(ev sseEvent, key string) int {
		f, ok := ev.data[key].(float64)
		if !ok {
			return -1
		}
		return int(f)
	}
	for i, ev := range events {
		if ended {
			fail(i, "after the end of the stream")
		}
		if errored && ev.name != "response.failed" {
			fail(i, "after an error event")
		}
		if !started && ev.name != "response.created" && ev.name != "error" {
			fail(i, "before response.created")
		}
		if ev.name != "response.in_progress" && i == 1 && started {
			fail(i, "response.in_progress is not second")
		}
		inItem := func() {
			t.Helper()
			if open == nil || num(ev, "output_index") != len(items) || ev.data["item_id"] != open["id"] {
				fail(i, "not of the open item")
			}
		}
		inPart := func(kind string) {
			t.Helper()
			inItem()
			if part != kind || num(ev, "content_index") != parts {
				fail(i, "not of the open %s part (open: %q)", kind, part)
			}
		}
		switch ev.name {
		case "response.created":
			if started {
				fail(i, "second response.created")
			}
			started = true
			r, _ := ev.data["response"].(map[string]any)
			if r["status"] != "in_progress" || len(r["output"].([]any)) != 0 {
				fail(i, "not an empty response in progress")
			}
		case "response.in_progress":
			if i != 1 {
				fail(i, "out of place")
			}
		case "response.output_item.added":
			item, _ := ev.data["item"].(map[string]any)
			if open != nil || num(ev, "output_index") != len(items) || item["status"] != "in_progress" {
				fail(i, "item added out of place")
			}
			open, openType, parts, text = item, item["type"].(string), 0, ""
			if openType != "message" && openType != "function_call" {
				fail(i, "item type %q", openType)
			}
		case "response.content_part.added":
			inItem()
			p, _ := ev.data["part"].(map[string]any)
			if openType != "message" || part != "" || num(ev, "content_index") != parts {
				fail(i, "part added out of place")
			}
			part, text = p["type"].(string), ""
		case "response.output_text.delta":
			inPart("output_text")
			text += ev.data["delta"].(string)
		case "response.refusal.delta":
			inPart("refusal")
			text += ev.data["delta"].(string)
		case "response.output_text.done":
			inPart("output_text")
			if ev.data["text"] != text {
				fail(i, "text %q, deltas %q", ev.data["text"], text)
			}
		case "response.refusal.done":
			inPart("refusal")
			if ev.data["refusal"] != text {
				fail(i, "refusal %q, deltas %q", ev.data["refusal"], text)
			}
		case "response.content_part.done":
			inPart(part)
			part = ""
			parts++
		case "response.function_call_arguments.delta":
			inItem()
			if openType != "function_call" {
				fail(i, "arguments of a %s", openType)
			}
			text += ev.data["delta"].(string)
		case "response.function_call_arguments.done":
			inItem()
			if openType != "function_call" || ev.data["arguments"] != text {
				fail(i, "arguments %q, deltas %q", ev.data["arguments"], text)
			}
		case "response.output_item.done":
			item, _ := ev.data["item"].(map[string]any)
			if open == nil || part != "" || num(ev, "output_index") != len(items) || item["id"] != open["id"] || item["type"] != openType {
				fail(i, "item done out of place")
			}
			if openType == "function_call" && item["arguments"] != text {
				fail(i, "arguments %q, deltas %q", item["arguments"], text)
			}
			if content, _ := item["content"].([]any); openType == "message" && len(content) != parts {
				fail(i, "%d parts, %d done", len(content), parts)
			}
			items = append(items, item)
			open = nil
		case "response.completed", "response.incomplete":
			if open != nil {
				fail(i, "an item is open")
			}
			r, _ := ev.data["response"].(map[string]any)
			if r["status"] != strings.TrimPrefix(ev.name, "response.") {
				fail(i, "status %v", r["status"])
			}
			if !reflect.DeepEqual(r["output"], append([]any{}, items...)) {
				fail(i, "output is not the items done")
			}
			ended = true
		case "error":
			if ev.data["code"] == "" || ev.data["message"] == "" {
				fail(i, "error without code or message")
			}
			errored = true
			if !started {
				ended = true
			}
		case "response.failed":
			if !errored {
				fail(i, "without an error event")
			}
			r, _ := ev.data["response"].(map[string]any)
			e, _ := r["error"].(map[string]any)
			if r["status"] != "failed" || e["code"] == "" || e["message"] == "" {
				fail(i, "not a failed response with an error")
			}
			if !reflect.DeepEqual(r["output"], append([]any{}, items...)) {
				fail(i, "output is not the items done")
			}
			ended = true
		default:
			fail(i, "unknown event")
		}
	}
	if closed && !ended {
		t.Fatalf("closed stream ended neither with a final response nor with an error\n%s", out)
	}
}
