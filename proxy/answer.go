package proxy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/sacpgw/gateway/internal/scope"
	sj "github.com/sacpgw/gateway/internal/strictjson"
)

// Reading a provider's answer for the response protocols: one call through
// send, the answer read strictly whole (a stream is gathered), and the
// conversation extended for a re-ask.

// answer is one model answer, from a JSON body or a gathered stream.
type answer struct {
	status    int
	id, model string
	created   int64
	content   string
	finish    string
	toolCalls bool
	usage     scope.Usage
	hasUsage  bool
	// raw is the upstream body (JSON) or the SSE events (stream), replayed
	// unchanged for tool calls and upstream errors.
	raw    []byte
	events [][]byte
	// retryAfter is an error answer's Retry-After, passed on with it.
	retryAfter string
}

// call makes one model call; a stream is gathered whole.
func (p *Protocol) call(ctx context.Context, r *http.Request, ex *scope.Exchange, body []byte) (*answer, error) {
	resp, err := send(ctx, r.Header, ex, r.URL.Path, body)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	ans := &answer{status: resp.StatusCode}
	if ans.status != http.StatusOK {
		ans.retryAfter = resp.Header.Get("Retry-After")
	}
	media := mediaType(resp.Header.Get("Content-Type"))
	if ans.status == http.StatusOK && media == "text/event-stream" {
		return ans, gather(resp.Body, ans)
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswerSize+1))
	if err != nil {
		return nil, fmt.Errorf("read answer: %w", err)
	}
	if len(raw) > maxAnswerSize {
		return nil, &upstreamStatusError{tooLarge: true}
	}
	ans.raw = raw
	// Read once, strictly: an answer of unknown shape is refused, never
	// validated or replayed.
	if media != "application/json" {
		return nil, &upstreamStatusError{shape: "an answer of type " + strconv.Quote(media)}
	}
	if err := sj.Check(raw, answerFields); err != nil {
		return nil, &upstreamStatusError{shape: err.Error()}
	}
	if ans.status != http.StatusOK {
		return ans, nil
	}
	sh, err := decodeShape(raw, false)
	if err != nil {
		return nil, &upstreamStatusError{shape: err.Error()}
	}
	ans.id, ans.created, ans.model = sh.ID, sh.Created, sh.Model
	if sh.Usage != nil {
		ans.usage, ans.hasUsage = *sh.Usage, true
	}
	if len(sh.Choices) > 0 {
		if m := sh.Choices[0].Message; m != nil {
			ans.content, _ = textOf(m.Content) // text; parts are not a protocol answer
			ans.toolCalls = len(m.ToolCalls) > 0
		}
		if fr := sh.Choices[0].FinishReason; fr != nil {
			ans.finish = *fr
		}
	}
	return ans, nil
}

// gather reads a whole SSE answer (per the WHATWG rules, like every
// stream the gateway reads): the content deltas of choice 0, tool calls,
// finish reason and usage, keeping each event's data for replay. An event
// of unknown shape refuses the whole answer.
func gather(body io.Reader, ans *answer) error {
	sr := newSSEReader(body)
	defer sr.release()
	var content strings.Builder
	for {
		msg, err := sr.next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read stream: %w", err)
		}
		if msg.comment {
			continue
		}
		if msg.name != "" && msg.name != "message" {
			return &upstreamStatusError{shape: "a stream event named " + strconv.Quote(msg.name)}
		}
		if string(msg.data) == "[DONE]" {
			break
		}
		if err := sj.Check(msg.data, answerFields); err != nil {
			return &upstreamStatusError{shape: err.Error()}
		}
		c, err := decodeShape(msg.data, true)
		if err != nil {
			return &upstreamStatusError{shape: err.Error()}
		}
		ans.events = append(ans.events, msg.data)
		gatherEvent(c, ans, &content)
	}
	ans.content = content.String()
	return nil
}

func gatherEvent(c *answerShape, ans *answer, content *strings.Builder) {
	if ans.id == "" {
		ans.id, ans.created, ans.model = c.ID, c.Created, c.Model
	}
	if c.Usage != nil && ans.usage.Unreadable == "" {
		// A later report does not make an unreadable one believable.
		ans.usage, ans.hasUsage = *c.Usage, true
	}
	for _, ch := range c.Choices {
		if *ch.Index != 0 {
			continue
		}
		if d := ch.Delta; d != nil {
			if text, ok := textOf(d.Content); ok {
				content.WriteString(text)
			}
			if len(d.ToolCalls) > 0 {
				ans.toolCalls = true
			}
		}
		if ch.FinishReason != nil && *ch.FinishReason != "" {
			ans.finish = *ch.FinishReason
		}
	}
}

// reaskBody appends the invalid answer and the re-ask prompt (which lists
// the validation errors) to the conversation, keeping every other field of
// the request.
func reaskBody(body []byte, invalid, prompt string) ([]byte, error) {
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil {
		return nil, err
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(doc["messages"], &msgs); err != nil {
		return nil, err
	}
	a, _ := json.Marshal(map[string]string{"role": "assistant", "content": invalid})
	u, _ := json.Marshal(map[string]string{"role": "user", "content": prompt})
	msgs = append(msgs, a, u)
	doc["messages"], _ = json.Marshal(msgs)
	return json.Marshal(doc)
}
