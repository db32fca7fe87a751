package neutral

import (
	"io"
	"slices"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// Translator is what a dialect's stream plugs into a Shell: what it makes
// of the upstream's events. Each writes through the Shell it was given.
type Translator interface {
	// Event is one complete upstream event other than [DONE].
	Event(data []byte)
	// Done is [DONE]: the upstream says the answer is complete.
	Done()
	// Comment is one SSE comment line, its colon included.
	Comment(line []byte)
	// TooLarge is an upstream event over MaxEvent bytes.
	TooLarge()
	// Unfinished is Close before the stream ended: the upstream ended
	// without [DONE].
	Unfinished()
}

// Shell is the plumbing of a dialect's stream: it reads the upstream SSE
// chunk stream (see SSEReader) as Write gives it, hands what it reads to
// a Translator, and writes what the translation appended to w, at most one
// Write to w per Write, of whole events. After the end of the stream (the
// translation's, or a failed write to w) it reads and drops the bytes.
type Shell struct {
	w         io.Writer
	t         Translator
	errClosed error // a Write after Close

	sse    SSEReader
	ended  bool // the final event written: nothing more
	closed bool
	err    error // the writer's
	out    []byte
}

// NewShell returns a Shell writing to w what t translates; a Write after
// Close fails with errClosed.
func NewShell(w io.Writer, t Translator, errClosed error) Shell {
	return Shell{w: w, t: t, errClosed: errClosed}
}

// Write reads p as the next bytes of the upstream stream and writes the
// events they complete.
func (s *Shell) Write(p []byte) (int, error) {
	if s.closed {
		return 0, s.errClosed
	}
	if s.err != nil {
		return 0, s.err
	}
	s.sse.Read(p, (*shellHandler)(s))
	return len(p), s.flush()
}

// Close ends the stream: if it has not ended, the Translator's Unfinished
// says how. An event the upstream left unfinished is dropped, as the WHATWG
// rules drop it.
func (s *Shell) Close() error {
	if s.closed {
		return s.err
	}
	s.closed = true
	if s.err != nil {
		return s.err
	}
	s.t.Unfinished()
	return s.flush()
}

// Ended reports whether the stream has ended: nothing more is written.
func (s *Shell) Ended() bool { return s.ended }

// End ends the stream.
func (s *Shell) End() { s.ended = true }

// AppendEvent appends the event "event: NAME\ndata: DATA\n\n".
func (s *Shell) AppendEvent(name string, data []byte) {
	s.out = append(s.out, "event: "...)
	s.out = append(s.out, name...)
	s.out = append(s.out, "\ndata: "...)
	s.out = append(s.out, data...)
	s.out = append(s.out, '\n', '\n')
}

// AppendString appends text as it is.
func (s *Shell) AppendString(text string) {
	s.out = append(s.out, text...)
}

func (s *Shell) flush() error {
	if len(s.out) == 0 {
		return nil
	}
	_, err := s.w.Write(s.out)
	s.out = s.out[:0]
	if err != nil {
		s.err = err
		s.ended = true
	}
	return err
}

// shellHandler is the Shell as the SSE reader's handler.
type shellHandler Shell

func (h *shellHandler) Event(data []byte) {
	if string(data) == "[DONE]" {
		h.t.Done()
		return
	}
	h.t.Event(data)
}

func (h *shellHandler) Comment(line []byte) { h.t.Comment(line) }
func (h *shellHandler) TooLarge()           { h.t.TooLarge() }
func (h *shellHandler) Ended() bool         { return h.ended }

// ReadChunk reads one upstream event into c; false: it is not a chat
// completion chunk (a chunk is an object; json would read null as an
// empty one).
func ReadChunk[T any](data []byte, c *T) bool {
	return jsontext.Value(data).Kind() == '{' && json.Unmarshal(data, c) == nil
}

// Calls follows the tool calls of a stream's answer: the open one, its
// arguments so far, and the OpenAI indexes of the calls started.
type Calls struct {
	Index int    // the open call's OpenAI index
	ID    string // and its id
	Args  []byte // and its arguments so far
	seen  []int
}

// Place says where a tool call delta goes, open telling whether a call is
// open: more of the open call (more), or a new call of OpenAI index idx.
// problem is the error message of a delta neither dialect can translate:
// more of a call started before and since closed (a dialect's blocks or
// items are written one at a time: one closed is closed), or a new call
// without an id or a name.
func (c *Calls) Place(tc *ToolCall, open bool) (idx int, more bool, problem string) {
	switch {
	case tc.Index != nil:
		idx = *tc.Index
	case open && (tc.ID == "" || tc.ID == c.ID):
		// A provider that leaves out the index: more of the open call
		// (some repeat its id on every delta).
		idx = c.Index
	default:
		// A new call without an index: one no upstream index can be.
		idx = -1 - len(c.seen)
	}
	switch {
	case open && idx == c.Index:
		return idx, true, ""
	case slices.Contains(c.seen, idx):
		return idx, false, "The upstream interleaved the deltas of its tool calls."
	case tc.ID == "" || tc.Function.Name == "":
		return idx, false, "The upstream started a tool call without an id or a name."
	}
	return idx, false, ""
}

// Start opens the call of OpenAI index idx.
func (c *Calls) Start(idx int, id string) {
	c.seen = append(c.seen, idx)
	c.Index, c.ID, c.Args = idx, id, c.Args[:0]
}

// Started is how many calls were started.
func (c *Calls) Started() int { return len(c.seen) }

// Add appends a fragment to the open call's arguments; false: they would
// be over MaxEvent bytes, and nothing was added.
func (c *Calls) Add(fragment string) bool {
	if len(c.Args)+len(fragment) > MaxEvent {
		return false
	}
	c.Args = append(c.Args, fragment...)
	return true
}
