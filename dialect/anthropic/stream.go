package anthropic

import (
	"errors"
	"io"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sacpgw/gateway/dialect/internal/neutral"
)

// Stream translates an OpenAI SSE chunk stream into Anthropic's SSE event
// stream as bytes arrive: Write takes any slices of the upstream stream
// (events may be split anywhere), writes complete Anthropic events to w.
//
// The input is read by the WHATWG rules (lines end in LF, CR or CRLF; a
// blank line ends an event; data lines join with LF; other fields are
// ignored), so what comes out depends on the bytes only, never on how they
// were sliced. Each Write makes at most one Write to w, of whole events.
//
// The output:
//
//   - message_start at the first chunk (input_tokens is 0 unless that chunk
//     carries usage: OpenAI reports usage last, and message_delta repeats
//     it, as Anthropic's own message_delta now does);
//   - a text block for the text (and a refusal's text), a tool_use block
//     per tool call index, each content_block_start, deltas,
//     content_block_stop, one block open at a time;
//   - message_delta once both the finish_reason and the usage chunk
//     (stream_options.include_usage) have come, or at [DONE] with what
//     came;
//   - message_stop at [DONE];
//   - ping for every SSE comment line (the gateway's ": keep-alive"),
//     wherever it comes, before message_start too: the Anthropic SDKs skip
//     pings wherever they are, and the client's connection needs the bytes
//     while the model thinks.
//
// Anything it cannot translate faithfully ends the stream with an error
// event and nothing after it: an OpenAI error event ({"error": ...}, typed
// by streamType), a chunk that is not JSON or not a chunk, several
// choices, a tool call without id or name, arguments of a tool call that
// come after another call started or that do not make a JSON object, text
// after the finish_reason, [DONE] before any chunk or without a
// finish_reason, an event over neutral.MaxEvent bytes.
type Stream struct {
	sh    neutral.Shell // ended: message_stop or error written
	model string

	// The translation.
	started  bool
	id       string
	index    int           // the index of the open block, or of the next one
	open     int           // blockNone, blockText or blockTool
	calls    neutral.Calls // the tool calls
	finish   *string
	reason   string
	usage    *usage
	deltaOut bool // message_delta written
}

const (
	blockNone = iota
	blockText
	blockTool
)

var errClosed = errors.New("anthropic: write to a closed Stream")

// NewStream returns a Stream writing to w. model is the model named in
// message_start; empty: the first chunk's.
func NewStream(w io.Writer, model string) *Stream {
	// The model goes into every message_start as JSON: make it valid
	// UTF-8 here rather than fail later.
	s := &Stream{model: strings.ToValidUTF8(model, "\uFFFD")}
	s.sh = neutral.NewShell(w, (*translator)(s), errClosed)
	return s
}

// Write reads p as the next bytes of the upstream stream and writes the
// events they complete. Bytes after the end of the stream ([DONE] or an
// error) are read and dropped.
func (s *Stream) Write(p []byte) (int, error) { return s.sh.Write(p) }

// Close ends the stream: if the upstream ended without [DONE], it writes an
// error event; it never writes message_stop twice. An event the upstream
// left unfinished is dropped, as the WHATWG rules drop it.
func (s *Stream) Close() error { return s.sh.Close() }

// translator is the Stream as its shell's translator.
type translator Stream

func (t *translator) Event(data []byte) { (*Stream)(t).event(data) }
func (t *translator) Done()             { (*Stream)(t).done() }

func (t *translator) Comment([]byte) {
	(*Stream)(t).emit("ping", pingEvent{Type: "ping"})
}

func (t *translator) TooLarge() {
	(*Stream)(t).fail("api_error", "The upstream sent an event too large to translate.")
}

func (t *translator) Unfinished() {
	(*Stream)(t).fail("api_error", "The upstream stream ended before it was complete.")
}

// event translates one upstream event other than [DONE].
func (s *Stream) event(data []byte) {
	var c completion
	if !neutral.ReadChunk(data, &c) {
		s.fail("api_error", "The upstream sent a stream event that is not a chat completion chunk.")
		return
	}
	if c.Error != nil {
		msg := c.Error.Message
		if strings.TrimSpace(msg) == "" {
			msg = "The upstream failed."
		}
		s.fail(streamType(c.Error.Type), msg)
		return
	}
	if !s.started {
		s.start(&c, data)
	}
	if c.Usage != nil && !s.deltaOut {
		s.usage = c.Usage
	}
	if len(c.Choices) > 1 {
		s.fail("api_error", "The upstream sent several choices; the Messages API answers with one.")
		return
	}
	for i := range c.Choices {
		if !s.choice(&c.Choices[i]) {
			return
		}
	}
	s.delta()
}

// start writes message_start.
func (s *Stream) start(c *completion, data []byte) {
	s.started = true
	s.id = messageID(c.ID, data)
	model := s.model
	if model == "" {
		model = c.Model
	}
	var u usageOut
	if c.Usage != nil {
		u.InputTokens = usageOf(c.Usage).InputTokens
	}
	s.emit("message_start", messageStartEvent{Type: "message_start", Message: messageOut{
		ID: s.id, Type: "message", Role: "assistant", Model: model, Content: []any{}, Usage: u,
	}})
}

// choice translates a choice's delta and finish; false: the stream ended.
func (s *Stream) choice(ch *choice) bool {
	if ch.Index != 0 {
		s.fail("api_error", "The upstream sent several choices; the Messages API answers with one.")
		return false
	}
	if d := ch.Delta; d != nil {
		text := answerText(d)
		if (text != "" || len(d.ToolCalls) > 0) && s.finish != nil {
			s.fail("api_error", "The upstream sent content after its finish_reason.")
			return false
		}
		if text != "" {
			if s.open != blockText {
				if !s.closeBlock() {
					return false
				}
				s.open = blockText
				s.emit("content_block_start", blockStartEvent{Type: "content_block_start", Index: s.index, ContentBlock: textBlock{Type: "text", Text: ""}})
			}
			s.emit("content_block_delta", blockDeltaEvent{Type: "content_block_delta", Index: s.index, Delta: textDelta{Type: "text_delta", Text: text}})
		}
		for i := range d.ToolCalls {
			if !s.toolCall(&d.ToolCalls[i]) {
				return false
			}
		}
	}
	if ch.FinishReason != nil && s.finish == nil {
		reason, err := stopReason(ch.FinishReason, s.calls.Started() > 0)
		if err != nil {
			s.fail("api_error", "The upstream finished with an unknown finish_reason.")
			return false
		}
		if !s.closeBlock() {
			return false
		}
		s.finish, s.reason = ch.FinishReason, reason
	}
	return true
}

// toolCall translates one tool call delta.
func (s *Stream) toolCall(tc *toolCall) bool {
	idx, more, problem := s.calls.Place(tc, s.open == blockTool)
	switch {
	case more:
		return s.arguments(tc.Function.Arguments)
	case problem != "":
		s.fail("api_error", problem)
		return false
	}
	if !s.closeBlock() {
		return false
	}
	s.calls.Start(idx, tc.ID)
	s.open = blockTool
	s.emit("content_block_start", blockStartEvent{Type: "content_block_start", Index: s.index,
		ContentBlock: toolUseBlock{Type: "tool_use", ID: tc.ID, Name: tc.Function.Name, Input: jsontext.Value("{}")}})
	return s.arguments(tc.Function.Arguments)
}

func (s *Stream) arguments(fragment string) bool {
	if fragment == "" {
		return true
	}
	if !s.calls.Add(fragment) {
		s.fail("api_error", "The upstream sent tool call arguments too large to translate.")
		return false
	}
	s.emit("content_block_delta", blockDeltaEvent{Type: "content_block_delta", Index: s.index,
		Delta: inputJSONDelta{Type: "input_json_delta", PartialJSON: fragment}})
	return true
}

// closeBlock writes content_block_stop for the open block, if any, after
// checking that a tool call's arguments make the object the client will
// parse; false: they did not, and the stream ended.
func (s *Stream) closeBlock() bool {
	switch s.open {
	case blockNone:
		return true
	case blockTool:
		if _, err := toolInput(string(s.calls.Args)); err != nil {
			s.fail("api_error", "The upstream's tool call arguments are not a JSON object.")
			return false
		}
	}
	s.emit("content_block_stop", blockStopEvent{Type: "content_block_stop", Index: s.index})
	s.open = blockNone
	s.index++
	return true
}

// delta writes message_delta once the finish and the usage are known.
func (s *Stream) delta() {
	if s.deltaOut || s.finish == nil || s.usage == nil {
		return
	}
	s.writeDelta()
}

func (s *Stream) writeDelta() {
	s.deltaOut = true
	s.emit("message_delta", messageDeltaEvent{Type: "message_delta",
		Delta: stopDelta{StopReason: s.reason}, Usage: usageOf(s.usage)})
}

// done is [DONE]: the upstream says the answer is complete.
func (s *Stream) done() {
	switch {
	case !s.started:
		s.fail("api_error", "The upstream stream ended without an answer.")
		return
	case s.finish == nil:
		s.fail("api_error", "The upstream stream ended without a finish_reason: the answer may be incomplete.")
		return
	}
	if !s.deltaOut {
		s.writeDelta()
	}
	s.emit("message_stop", messageStopEvent{Type: "message_stop"})
	s.sh.End()
}

// fail writes an error event and ends the stream; after the end it does
// nothing, so no stream has two ends.
func (s *Stream) fail(typ, message string) {
	if s.sh.Ended() {
		return
	}
	s.sh.AppendEvent("error", errorBody(typ, message))
	s.sh.End()
}

func (s *Stream) emit(name string, v any) {
	if s.sh.Ended() {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		// Strings from the upstream were read as valid UTF-8 and the
		// model's was made valid: this does not happen, and if it did
		// the stream must still end well-formed.
		s.fail("api_error", "The gateway could not encode an event.")
		return
	}
	s.sh.AppendEvent(name, b)
}

type pingEvent struct {
	Type string `json:"type"`
}

type messageStartEvent struct {
	Type    string     `json:"type"`
	Message messageOut `json:"message"`
}

type blockStartEvent struct {
	Type         string `json:"type"`
	Index        int    `json:"index"`
	ContentBlock any    `json:"content_block"`
}

type blockDeltaEvent struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
	Delta any    `json:"delta"`
}

type textDelta struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

type inputJSONDelta struct {
	Type        string `json:"type"`
	PartialJSON string `json:"partial_json"`
}

type blockStopEvent struct {
	Type  string `json:"type"`
	Index int    `json:"index"`
}

type messageDeltaEvent struct {
	Type  string    `json:"type"`
	Delta stopDelta `json:"delta"`
	Usage usageOut  `json:"usage"`
}

type stopDelta struct {
	StopReason   string  `json:"stop_reason"`
	StopSequence *string `json:"stop_sequence"`
}

type messageStopEvent struct {
	Type string `json:"type"`
}
