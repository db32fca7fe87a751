package neutral

import "bytes"

// MaxEvent bounds what one upstream event may buffer: a chunk is small,
// and a stream that never ends its line must not grow without bound.
const MaxEvent = 16 << 20

// SSEReader reads the upstream SSE chunk stream by the WHATWG rules (lines
// end in LF, CR or CRLF; a blank line ends an event; data lines join with
// LF; other fields are ignored), so what it reads depends on the bytes
// only, never on how they were sliced. The zero value is ready.
type SSEReader struct {
	line   []byte // the line read so far
	data   []byte // the data of the event read so far, each line ending in LF
	skipLF bool   // the last line ended in CR: an LF next is part of it
}

// SSEHandler is told what an SSEReader reads.
type SSEHandler interface {
	// Event is one complete event's data.
	Event(data []byte)
	// Comment is one comment line, its colon included.
	Comment(line []byte)
	// TooLarge is an event over MaxEvent bytes; the reader stops reading
	// the bytes it was given.
	TooLarge()
	// Ended reports that the stream is over: the bytes left are dropped.
	Ended() bool
}

// Read splits p into lines, reading until p is used up or h has ended.
func (r *SSEReader) Read(p []byte, h SSEHandler) {
	for len(p) > 0 && !h.Ended() {
		if r.skipLF {
			r.skipLF = false
			if p[0] == '\n' {
				p = p[1:]
				continue
			}
		}
		i := bytes.IndexAny(p, "\r\n")
		if i < 0 {
			r.line = append(r.line, p...)
			if len(r.line)+len(r.data) > MaxEvent {
				h.TooLarge()
			}
			return
		}
		r.line = append(r.line, p[:i]...)
		r.skipLF = p[i] == '\r'
		p = p[i+1:]
		// The same bound as for a partial line, so that where the input
		// was cut never decides whether a long line is refused.
		if len(r.line)+len(r.data) > MaxEvent {
			h.TooLarge()
			return
		}
		r.lineDone(h)
		r.line = r.line[:0]
	}
}

// lineDone interprets one complete line.
func (r *SSEReader) lineDone(h SSEHandler) {
	line := r.line
	switch {
	case len(line) == 0:
		if len(r.data) > 0 {
			data := r.data[:len(r.data)-1] // the last LF is the line's, not the data's
			h.Event(data)
			r.data = r.data[:0]
		}
		return
	case line[0] == ':':
		h.Comment(line)
		return
	}
	field, value := line, []byte(nil)
	if i := bytes.IndexByte(line, ':'); i >= 0 {
		field, value = line[:i], line[i+1:]
		value = bytes.TrimPrefix(value, []byte(" "))
	}
	// OpenAI's streams use data lines only; event, id and retry would not
	// change what a chunk means.
	if string(field) == "data" {
		r.data = append(r.data, value...)
		r.data = append(r.data, '\n')
	}
}
