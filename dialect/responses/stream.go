package responses

import (
	"errors"
	"io"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json"

	"github.com/sacpgw/gateway/dialect/internal/neutral"
)

// Stream translates an OpenAI SSE chunk stream into the Responses API's SSE
// event stream as bytes arrive: Write takes any slices of the upstream
// stream (events may be split anywhere), writes complete events to w, each
// as "event: TYPE\ndata: JSON\n\n" with a sequence_number counting from 0.
//
// The input is read by the WHATWG rules (lines end in LF, CR or CRLF; a
// blank line ends an event; data lines join with LF; other fields are
// ignored), so what comes out depends on the bytes only, never on how they
// were sliced. Each Write makes at most one Write to w, of whole events.
//
// The output:
//
//   - response.created and response.in_progress at the first chunk (the
//     response in_progress, output [], usage null);
//   - for text: a message item (response.output_item.added), an output_text
//     part (response.content_part.added), response.output_text.delta per
//     chunk, then response.output_text.done, response.content_part.done and
//     response.output_item.done; a refusal is a refusal part of the same
//     message (response.refusal.delta, response.refusal.done);
//   - for each tool call: a function_call item (response.output_item.added
//     with arguments ""), response.function_call_arguments.delta per
//     fragment, response.function_call_arguments.done and
//     response.output_item.done; one item open at a time, closed when the
//     next starts or the finish_reason comes (the last item of an answer
//     cut by length or content_filter is done with status incomplete);
//   - at [DONE], response.completed, or response.incomplete for length and
//     content_filter, with the whole response: every item, the usage of
//     the usage chunk (stream_options.include_usage; null if none came);
//   - every SSE comment line (the gateway's ": keep-alive") as a comment
//     line of its own between events, before response.created too. It is
//     not followed by a blank line: the openai-go SDK dispatches an event at
//     every blank line and would fail on one with no data.
//
// Anything it cannot translate faithfully ends the stream with an error
// event ({type: "error", code, message, param, sequence_number}) and, once
// response.created is out, response.failed (the response with status
// failed, the items done so far, error {code, message}); nothing after
// them. The causes: an OpenAI error event ({"error": ...}: its code, or its
// type, and message), a chunk that is not JSON or not a chunk, several
// choices, a tool call without id or name, arguments of a tool call that
// come after another call started, content after the finish_reason, an
// unknown finish_reason, [DONE] before any chunk or without a
// finish_reason, the end of the input without [DONE], an event over
// neutral.MaxEvent bytes.
type Stream struct {
	sh    neutral.Shell // ended: the final event written
	model string
	meta  Meta

	// The translation.
	started bool
	suffix  string // of the response's and its items' ids
	created int64
	seq     int64
	items   []any // the items done
	open    int   // itemNone, itemMessage or itemCall
	itemID  string

	// The open message's parts.
	part     int // partNone, partText or partRefusal
	parts    []any
	partText []byte

	// The tool calls, and the open one's name.
	calls    neutral.Calls
	callName string

	finish     *string
	status     string
	incomplete *incompleteDetails
	usage      *usage
}

const (
	itemNone = iota
	itemMessage
	itemCall
)

const (
	partNone = iota
	partText
	partRefusal
)

var errClosed = errors.New("responses: write to a closed Stream")

// NewStream returns a Stream writing to w. model is the model named in the
// response; empty: the first chunk's.
func NewStream(w io.Writer, model string) *Stream {
	return NewStreamWith(w, model, Meta{})
}

// NewStreamWith is NewStream for the response m describes (see
// ResponseWith): m.Keep is called when [DONE] completes the answer, before
// response.completed (or response.incomplete) is written.
func NewStreamWith(w io.Writer, model string, m Meta) *Stream {
	// The model goes into every response object as JSON: make it valid
	// UTF-8 here rather than fail later.
	s := &Stream{model: strings.ToValidUTF8(model, "\uFFFD"), meta: m}
	s.sh = neutral.NewShell(w, (*translator)(s), errClosed)
	return s
}

// Write reads p as the next bytes of the upstream stream and writes the
// events they complete. Bytes after the end of the stream ([DONE] or an
// error) are read and dropped.
func (s *Stream) Write(p []byte) (int, error) { return s.sh.Write(p) }

// Close ends the stream: if the upstream ended without [DONE], it writes an
// error event (and response.failed); it never ends the stream twice. An
// event the upstream left unfinished is dropped, as the WHATWG rules drop
// it.
func (s *Stream) Close() error { return s.sh.Close() }

// translator is the Stream as its shell's translator.
type translator Stream

func (t *translator) Event(data []byte) { (*Stream)(t).event(data) }
func (t *translator) Done()             { (*Stream)(t).done() }

// Comment passes a comment line on (the gateway's ": keep-alive").
func (t *translator) Comment(line []byte) {
	if !t.sh.Ended() {
		t.sh.AppendString(strings.ToValidUTF8(string(line), "\uFFFD") + "\n")
	}
}

func (t *translator) TooLarge() {
	(*Stream)(t).fail("server_error", "server_error", "The upstream sent an event too large to translate.", nil)
}

func (t *translator) Unfinished() {
	(*Stream)(t).fail("server_error", "server_error", "The upstream stream ended before it was complete.", nil)
}

// event translates one upstream event other than [DONE].
func (s *Stream) event(data []byte) {
	var c completion
	if !neutral.ReadChunk(data, &c) {
		s.fail("server_error", "server_error", "The upstream sent a stream event that is not a chat completion chunk.", nil)
		return
	}
	if c.Error != nil {
		s.fail(c.Error.streamError())
		return
	}
	if !s.started {
		s.start(&c, data)
	}
	if c.Usage != nil {
		s.usage = c.Usage
	}
	if len(c.Choices) > 1 {
		s.fail("server_error", "server_error", "The upstream sent several choices; the Responses API answers with one.", nil)
		return
	}
	for i := range c.Choices {
		if !s.choice(&c.Choices[i]) {
			return
		}
	}
}

// start writes response.created and response.in_progress.
func (s *Stream) start(c *completion, data []byte) {
	s.started = true
	s.suffix = s.meta.Suffix
	if s.suffix == "" {
		s.suffix = idSuffix(c.ID, data)
	}
	s.created = c.Created
	if s.model == "" {
		s.model = c.Model
	}
	r := s.response("in_progress", nil)
	s.emit(responseEvent{Type: "response.created", Response: r, SequenceNumber: s.seq})
	s.emit(responseEvent{Type: "response.in_progress", Response: r, SequenceNumber: s.seq})
}

func (s *Stream) response(status string, output []any) responseOut {
	r := newResponse(s.suffix, s.created, s.model, status, output)
	r.PreviousResponseID, r.Store = s.meta.previous(), s.meta.Store
	return r
}

// choice translates a choice's delta and finish; false: the stream ended.
func (s *Stream) choice(ch *choice) bool {
	if ch.Index != 0 {
		s.fail("server_error", "server_error", "The upstream sent several choices; the Responses API answers with one.", nil)
		return false
	}
	if d := ch.Delta; d != nil {
		hasText := d.Content != nil && *d.Content != ""
		hasRefusal := d.Refusal != nil && *d.Refusal != ""
		if (hasText || hasRefusal || len(d.ToolCalls) > 0) && s.finish != nil {
			s.fail("server_error", "server_error", "The upstream sent content after its finish_reason.", nil)
			return false
		}
		if hasText {
			s.text(partText, *d.Content)
		}
		if hasRefusal {
			s.text(partRefusal, *d.Refusal)
		}
		for i := range d.ToolCalls {
			if !s.toolCall(&d.ToolCalls[i]) {
				return false
			}
		}
	}
	if ch.FinishReason != nil && s.finish == nil {
		status, incomplete, err := finishStatus(ch.FinishReason)
		if err != nil {
			s.fail("server_error", "server_error", "The upstream finished with an unknown finish_reason.", nil)
			return false
		}
		itemStatus := "completed"
		if status == "incomplete" {
			itemStatus = "incomplete"
		}
		s.closeItem(itemStatus)
		s.finish, s.status, s.incomplete = ch.FinishReason, status, incomplete
	}
	return true
}

// text adds text to a part of the given kind of the open message, opening
// the message and the part as needed.
func (s *Stream) text(kind int, text string) {
	if s.open != itemMessage {
		s.closeItem("completed")
		s.open, s.itemID, s.parts = itemMessage, "msg_"+s.suffix, nil
		if len(s.items) > 0 {
			// Text after a tool call: a message of its own, its id unique.
			s.itemID += "_" + strconv.Itoa(len(s.items))
		}
		s.emit(itemEvent{Type: "response.output_item.added", OutputIndex: len(s.items),
			Item: messageItem{ID: s.itemID, Type: "message", Status: "in_progress", Role: "assistant", Content: []any{}}, SequenceNumber: s.seq})
	}
	if s.part != kind {
		s.closePart()
		s.part, s.partText = kind, s.partText[:0]
		s.emit(partEvent{Type: "response.content_part.added", ItemID: s.itemID, OutputIndex: len(s.items), ContentIndex: len(s.parts),
			Part: s.partValue(), SequenceNumber: s.seq})
	}
	s.partText = append(s.partText, text...)
	if kind == partText {
		s.emit(textDeltaEvent{Type: "response.output_text.delta", ItemID: s.itemID, OutputIndex: len(s.items), ContentIndex: len(s.parts),
			Delta: text, Logprobs: []any{}, SequenceNumber: s.seq})
		return
	}
	s.emit(refusalDeltaEvent{Type: "response.refusal.delta", ItemID: s.itemID, OutputIndex: len(s.items), ContentIndex: len(s.parts),
		Delta: text, SequenceNumber: s.seq})
}

// partValue is the open part as it stands.
func (s *Stream) partValue() any {
	if s.part == partRefusal {
		return refusalPart{Type: "refusal", Refusal: string(s.partText)}
	}
	return outputText{Type: "output_text", Text: string(s.partText), Annotations: []any{}}
}

func (s *Stream) closePart() {
	if s.part == partNone {
		return
	}
	idx, cidx := len(s.items), len(s.parts)
	if s.part == partText {
		s.emit(textDoneEvent{Type: "response.output_text.done", ItemID: s.itemID, OutputIndex: idx, ContentIndex: cidx,
			Text: string(s.partText), Logprobs: []any{}, SequenceNumber: s.seq})
	} else {
		s.emit(refusalDoneEvent{Type: "response.refusal.done", ItemID: s.itemID, OutputIndex: idx, ContentIndex: cidx,
			Refusal: string(s.partText), SequenceNumber: s.seq})
	}
	p := s.partValue()
	s.emit(partEvent{Type: "response.content_part.done", ItemID: s.itemID, OutputIndex: idx, ContentIndex: cidx, Part: p, SequenceNumber: s.seq})
	s.parts = append(s.parts, p)
	s.part = partNone
}

// toolCall translates one tool call delta.
func (s *Stream) toolCall(tc *toolCall) bool {
	idx, more, problem := s.calls.Place(tc, s.open == itemCall)
	switch {
	case more:
		return s.arguments(tc.Function.Arguments)
	case problem != "":
		s.fail("server_error", "server_error", problem, nil)
		return false
	}
	s.closeItem("completed")
	s.calls.Start(idx, tc.ID)
	s.open, s.callName = itemCall, tc.Function.Name
	s.itemID = callItemID(s.suffix, len(s.items))
	s.emit(itemEvent{Type: "response.output_item.added", OutputIndex: len(s.items),
		Item: s.callItem("in_progress"), SequenceNumber: s.seq})
	return s.arguments(tc.Function.Arguments)
}

func (s *Stream) callItem(status string) functionCallItem {
	return functionCallItem{ID: s.itemID, Type: "function_call", Status: status, Arguments: string(s.calls.Args), CallID: s.calls.ID, Name: s.callName}
}

func (s *Stream) arguments(fragment string) bool {
	if fragment == "" {
		return true
	}
	if !s.calls.Add(fragment) {
		s.fail("server_error", "server_error", "The upstream sent tool call arguments too large to translate.", nil)
		return false
	}
	s.emit(argsDeltaEvent{Type: "response.function_call_arguments.delta", ItemID: s.itemID, OutputIndex: len(s.items),
		Delta: fragment, SequenceNumber: s.seq})
	return true
}

// closeItem writes the done events of the open item, if any, with the
// given status, and keeps the item for the final response.
func (s *Stream) closeItem(status string) {
	idx := len(s.items)
	var item any
	switch s.open {
	case itemNone:
		return
	case itemMessage:
		s.closePart()
		parts := s.parts
		if parts == nil {
			parts = []any{}
		}
		item = messageItem{ID: s.itemID, Type: "message", Status: status, Role: "assistant", Content: parts}
	case itemCall:
		s.emit(argsDoneEvent{Type: "response.function_call_arguments.done", ItemID: s.itemID, OutputIndex: idx,
			Arguments: string(s.calls.Args), SequenceNumber: s.seq})
		item = s.callItem(status)
	}
	s.emit(itemEvent{Type: "response.output_item.done", OutputIndex: idx, Item: item, SequenceNumber: s.seq})
	s.items = append(s.items, item)
	s.open, s.parts = itemNone, nil
}

// done is [DONE]: the upstream says the answer is complete.
func (s *Stream) done() {
	switch {
	case !s.started:
		s.fail("server_error", "server_error", "The upstream stream ended without an answer.", nil)
		return
	case s.finish == nil:
		s.fail("server_error", "server_error", "The upstream stream ended without a finish_reason: the answer may be incomplete.", nil)
		return
	}
	r := s.response(s.status, s.items)
	r.IncompleteDetails = s.incomplete
	r.Usage = responsesUsage(s.usage)
	if s.meta.Keep != nil {
		a, err := answerOf(r.ID, s.status, s.items)
		if err != nil {
			// The items are the translation's own: this does not happen,
			// and if it did the answer must not be kept half-read.
			s.fail("server_error", "server_error", "The gateway could not read back the answer it translated.", nil)
			return
		}
		// Before the final event: a client that continues the response as
		// soon as it sees it complete finds it kept.
		r.Store = s.meta.Keep(a)
	}
	s.emit(responseEvent{Type: "response." + s.status, Response: r, SequenceNumber: s.seq})
	s.sh.End()
}

// fail writes an error event, and response.failed once the response was
// created, and ends the stream; after the end it does nothing, so no
// stream has two ends.
func (s *Stream) fail(code, failedCode, message string, param *string) {
	if s.sh.Ended() {
		return
	}
	s.emit(errorEvent{Type: "error", Code: code, Message: message, Param: param, SequenceNumber: s.seq})
	if s.started {
		r := s.response("failed", s.items)
		r.Error = &responseError{Code: failedCode, Message: message}
		s.emit(responseEvent{Type: "response.failed", Response: r, SequenceNumber: s.seq})
	}
	s.sh.End()
}

// emit writes one event; its sequence_number is s.seq, which the caller
// put in v.
func (s *Stream) emit(v event) {
	if s.sh.Ended() {
		return
	}
	b, err := json.Marshal(v)
	if err != nil {
		// Strings from the upstream were read as valid UTF-8 and the
		// model's was made valid: this does not happen, and if it did
		// the stream must still end well-formed.
		s.fail("server_error", "server_error", "The gateway could not encode an event.", nil)
		return
	}
	s.sh.AppendEvent(v.eventType(), b)
	s.seq++
}

// event is one Responses stream event; its type names it.
type event interface{ eventType() string }

type responseEvent struct {
	Type           string      `json:"type"`
	Response       responseOut `json:"response"`
	SequenceNumber int64       `json:"sequence_number"`
}

type itemEvent struct {
	Type           string `json:"type"`
	OutputIndex    int    `json:"output_index"`
	Item           any    `json:"item"`
	SequenceNumber int64  `json:"sequence_number"`
}

type partEvent struct {
	Type           string `json:"type"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	ContentIndex   int    `json:"content_index"`
	Part           any    `json:"part"`
	SequenceNumber int64  `json:"sequence_number"`
}

type textDeltaEvent struct {
	Type           string `json:"type"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	ContentIndex   int    `json:"content_index"`
	Delta          string `json:"delta"`
	Logprobs       []any  `json:"logprobs"`
	SequenceNumber int64  `json:"sequence_number"`
}

type textDoneEvent struct {
	Type           string `json:"type"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	ContentIndex   int    `json:"content_index"`
	Text           string `json:"text"`
	Logprobs       []any  `json:"logprobs"`
	SequenceNumber int64  `json:"sequence_number"`
}

type refusalDeltaEvent struct {
	Type           string `json:"type"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	ContentIndex   int    `json:"content_index"`
	Delta          string `json:"delta"`
	SequenceNumber int64  `json:"sequence_number"`
}

type refusalDoneEvent struct {
	Type           string `json:"type"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	ContentIndex   int    `json:"content_index"`
	Refusal        string `json:"refusal"`
	SequenceNumber int64  `json:"sequence_number"`
}

type argsDeltaEvent struct {
	Type           string `json:"type"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	Delta          string `json:"delta"`
	SequenceNumber int64  `json:"sequence_number"`
}

type argsDoneEvent struct {
	Type           string `json:"type"`
	ItemID         string `json:"item_id"`
	OutputIndex    int    `json:"output_index"`
	Arguments      string `json:"arguments"`
	SequenceNumber int64  `json:"sequence_number"`
}

type errorEvent struct {
	Type           string  `json:"type"`
	Code           string  `json:"code"`
	Message        string  `json:"message"`
	Param          *string `json:"param"`
	SequenceNumber int64   `json:"sequence_number"`
}

func (e responseEvent) eventType() string     { return e.Type }
func (e itemEvent) eventType() string         { return e.Type }
func (e partEvent) eventType() string         { return e.Type }
func (e textDeltaEvent) eventType() string    { return e.Type }
func (e textDoneEvent) eventType() string     { return e.Type }
func (e refusalDeltaEvent) eventType() string { return e.Type }
func (e refusalDoneEvent) eventType() string  { return e.Type }
func (e argsDeltaEvent) eventType() string    { return e.Type }
func (e argsDoneEvent) eventType() string     { return e.Type }
func (e errorEvent) eventType() string        { return e.Type }
