package anthropic

import (
	"fmt"
	"io"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sacpgw/gateway/dialect/internal/neutral"
)

// ChunkReader reads an anthropic upstream's event stream and gives it as
// an OpenAI chat completion chunk stream ("data: {chunk}" events, then
// "data: [DONE]"), for the gateway to read as it reads any provider's.
//
// It pulls: each Read reads the upstream only as far as it needs to give
// bytes, so a slow stream stays a slow stream and nothing is buffered
// beyond one upstream read. What it reads:
//
//   - message_start gives the id, the model and the input usage, and the
//     first chunk (role assistant, empty content);
//   - a text block's deltas become content; a tool_use block becomes a
//     tool call (id and name first, then its input_json_delta fragments as
//     arguments); thinking blocks are dropped (never asked for);
//   - message_delta gives the finish_reason chunk and the output usage;
//     message_stop gives the usage chunk (only when the client asked for
//     it with stream_options.include_usage) and [DONE];
//   - ping and event types it does not know are skipped, as Anthropic's
//     versioning asks of clients; a content block or delta type it does not
//     know, an error event, or an event it cannot read ends the stream
//     with an OpenAI error event and no [DONE], so the answer counts as
//     incomplete.
//
// An upstream that ends without message_stop ends the chunk stream without
// [DONE] too.
type ChunkReader struct {
	src          io.ReadCloser
	includeUsage bool
	created      int64

	sse  neutral.SSEReader
	buf  []byte // read from src, not yet given to sse
	out  []byte // translated, not yet read
	done bool   // the stream is over: what is in out is the last

	id, model string
	usage     usageIn
	blocks    map[int]*streamBlock
	tools     int // tool calls begun so far
	finished  bool
}

// streamBlock is what the reader knows of an open content block.
type streamBlock struct {
	kind string // text, tool_use, thinking
	tool int    // the tool call's index in the chunk stream
}

// NewChunkReader returns a ChunkReader over src, stamping every chunk
// with created (Unix seconds); includeUsage writes the usage chunk.
func NewChunkReader(src io.ReadCloser, includeUsage bool, created int64) *ChunkReader {
	return &ChunkReader{src: src, includeUsage: includeUsage, created: created, blocks: map[int]*streamBlock{}}
}

// Read gives the next bytes of the chunk stream.
func (c *ChunkReader) Read(p []byte) (int, error) {
	for len(c.out) == 0 {
		if c.done {
			return 0, io.EOF
		}
		if cap(c.buf) == 0 {
			c.buf = make([]byte, 32<<10)
		}
		n, err := c.src.Read(c.buf[:cap(c.buf)])
		if n > 0 {
			c.sse.Read(c.buf[:n], (*chunkHandler)(c))
		}
		if err != nil && !c.done {
			// io.EOF before message_stop: no [DONE], the answer is
			// incomplete; another error is the connection's.
			c.done = true
			if err != io.EOF {
				return 0, err
			}
		}
	}
	n := copy(p, c.out)
	c.out = c.out[n:]
	return n, nil
}

// Close closes the upstream stream.
func (c *ChunkReader) Close() error { return c.src.Close() }

// chunkHandler is the ChunkReader as the SSE reader's handler.
type chunkHandler ChunkReader

func (h *chunkHandler) Event(data []byte) { (*ChunkReader)(h).event(data) }
func (h *chunkHandler) Comment([]byte)    {}
func (h *chunkHandler) TooLarge() {
	(*ChunkReader)(h).fail("The provider sent a stream event too large to read.")
}
func (h *chunkHandler) Ended() bool { return h.done }

// streamEvent is every event type's members the reader uses.
type streamEvent struct {
	Type    string     `json:"type"`
	Message *messageIn `json:"message"`
	Index   *int       `json:"index"`
	Block   *blockIn   `json:"content_block"`
	Delta   *struct {
		Type        string  `json:"type"`
		Text        string  `json:"text"`
		PartialJSON string  `json:"partial_json"`
		StopReason  *string `json:"stop_reason"`
	} `json:"delta"`
	Usage *streamUsage `json:"usage"`
	Error *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
}

func (c *ChunkReader) event(data []byte) {
	var e streamEvent
	if err := json.Unmarshal(data, &e); err != nil {
		c.fail("The provider sent a stream event the gateway cannot read.")
		return
	}
	switch e.Type {
	case "message_start":
		if e.Message == nil || c.id != "" {
			c.fail("The provider's stream began twice, or without its message.")
			return
		}
		c.id, c.model, c.usage = chatID(e.Message.ID), e.Message.Model, e.Message.Usage
		empty := ""
		c.chunk(outMessage{Role: "assistant", Content: &empty}, nil)
	case "content_block_start":
		c.blockStart(&e)
	case "content_block_delta":
		c.blockDelta(&e)
	case "content_block_stop":
		if !c.started() || e.Index == nil || c.blocks[*e.Index] == nil {
			c.fail("The provider closed a content block it never opened.")
			return
		}
		delete(c.blocks, *e.Index)
	case "message_delta":
		if !c.started() || e.Delta == nil {
			c.fail("The provider's message_delta came before message_start.")
			return
		}
		if e.Usage != nil {
			c.mergeUsage(e.Usage)
		}
		if e.Delta.StopReason != nil {
			finish, err := finishReason(e.Delta.StopReason)
			if err != nil {
				c.fail("The provider ended the answer in a way the gateway cannot say: " + err.Error())
				return
			}
			c.finished = true
			c.chunk(outMessage{}, &finish)
		}
	case "message_stop":
		if !c.finished {
			c.fail("The provider ended the stream without a stop reason.")
			return
		}
		if c.includeUsage {
			u := c.usage.chat()
			c.emit(outCompletion{ID: c.id, Object: "chat.completion.chunk", Created: c.created, Model: c.model, Choices: []outChoice{}, Usage: &u})
		}
		c.out = append(c.out, "data: [DONE]\n\n"...)
		c.done = true
	case "error":
		msg := "The provider's stream failed."
		if e.Error != nil && e.Error.Message != "" {
			msg = fmt.Sprintf("The provider's stream failed (%s): %s", e.Error.Type, e.Error.Message)
		}
		c.fail(msg)
	default:
		// ping, and event types added after this translation was
		// written: Anthropic asks clients to skip them. What they could
		// carry of the answer would come in a block type, refused below.
	}
}

func (c *ChunkReader) started() bool { return c.id != "" }

func (c *ChunkReader) blockStart(e *streamEvent) {
	if !c.started() || e.Index == nil || e.Block == nil || c.blocks[*e.Index] != nil {
		c.fail("The provider opened a content block out of order.")
		return
	}
	b := e.Block
	switch b.Type {
	case "text":
		c.blocks[*e.Index] = &streamBlock{kind: "text"}
		if b.Text != "" {
			text := b.Text
			c.chunk(outMessage{Content: &text}, nil)
		}
	case "tool_use":
		if b.ID == "" || b.Name == "" {
			c.fail("The provider began a tool call without an id or a name.")
			return
		}
		idx := c.tools
		c.tools++
		c.blocks[*e.Index] = &streamBlock{kind: "tool_use", tool: idx}
		c.chunk(outMessage{ToolCalls: []outCall{{Index: &idx, ID: b.ID, Type: "function", Function: outFunction{Name: b.Name}}}}, nil)
	case "thinking", "redacted_thinking":
		c.blocks[*e.Index] = &streamBlock{kind: "thinking"}
	default:
		c.fail(fmt.Sprintf("The provider sent a content block of type %q, which the gateway cannot say as a chat completion.", b.Type))
	}
}

func (c *ChunkReader) blockDelta(e *streamEvent) {
	if e.Index == nil || e.Delta == nil || c.blocks[*e.Index] == nil {
		c.fail("The provider sent a delta of a content block it never opened.")
		return
	}
	b, d := c.blocks[*e.Index], e.Delta
	switch {
	case b.kind == "text" && d.Type == "text_delta":
		if d.Text != "" {
			text := d.Text
			c.chunk(outMessage{Content: &text}, nil)
		}
	case b.kind == "tool_use" && d.Type == "input_json_delta":
		if d.PartialJSON != "" {
			idx := b.tool
			c.chunk(outMessage{ToolCalls: []outCall{{Index: &idx, Function: outFunction{Arguments: d.PartialJSON}}}}, nil)
		}
	case b.kind == "thinking" && (d.Type == "thinking_delta" || d.Type == "signature_delta"):
	default:
		c.fail(fmt.Sprintf("The provider sent a %q delta in a %s block, which the gateway cannot say as a chat completion.", d.Type, b.kind))
	}
}

// streamUsage is message_delta's usage: the counts it gives are
// cumulative, and the ones it leaves out keep message_start's.
type streamUsage struct {
	InputTokens              *count `json:"input_tokens"`
	OutputTokens             *count `json:"output_tokens"`
	CacheCreationInputTokens *count `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     *count `json:"cache_read_input_tokens"`
}

// mergeUsage takes message_delta's cumulative counts over message_start's.
func (c *ChunkReader) mergeUsage(u *streamUsage) {
	for _, f := range []struct {
		from *count
		to   *count
	}{
		{u.InputTokens, &c.usage.InputTokens}, {u.OutputTokens, &c.usage.OutputTokens},
		{u.CacheCreationInputTokens, &c.usage.CacheCreationInputTokens}, {u.CacheReadInputTokens, &c.usage.CacheReadInputTokens},
	} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
}

// chunk emits one chunk of one choice.
func (c *ChunkReader) chunk(delta outMessage, finish *string) {
	c.emit(outCompletion{ID: c.id, Object: "chat.completion.chunk", Created: c.created, Model: c.model,
		Choices: []outChoice{{Index: 0, Delta: &delta, FinishReason: finish}}})
}

func (c *ChunkReader) emit(v outCompletion) {
	b, err := json.Marshal(v, jsontext.AllowInvalidUTF8(false))
	if err != nil {
		c.fail("The provider sent text the gateway cannot encode.")
		return
	}
	c.out = append(c.out, "data: "...)
	c.out = append(c.out, b...)
	c.out = append(c.out, "\n\n"...)
}

// fail ends the stream with an OpenAI error event and no [DONE].
func (c *ChunkReader) fail(message string) {
	if c.done {
		return
	}
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": message, "type": "server_error", "code": "upstream_error", "param": nil}})
	c.out = append(c.out, "data: "...)
	c.out = append(c.out, b...)
	c.out = append(c.out, "\n\n"...)
	c.done = true
}
