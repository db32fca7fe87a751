package proxy

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"sync"
)

// maxEventSize bounds one SSE event (all its data lines); a provider's
// stream past it is refused rather than buffered without end.
const maxEventSize = 8 << 20

// errEventTooLarge is a stream event over maxEventSize.
var errEventTooLarge = errors.New("stream event larger than 8 MiB")

// sseMessage is one dispatched SSE event, or a comment line.
type sseMessage struct {
	// comment is set for a ":" line; data and name are then empty.
	comment bool
	// name is the event's "event:" field ("" when absent).
	name string
	// data is the event's data lines joined with "\n".
	data []byte
}

// sseReader reads a text/event-stream per the WHATWG rules: lines end in
// CRLF, LF or CR alone; a leading BOM is dropped; "data:" lines of one event
// are joined with "\n"; one space after the colon is dropped; "id" and
// "retry" are read and ignored; an event without data is not dispatched;
// an event cut by the end of the stream is discarded. There is no second
// reader with other rules: the gateway acts on exactly these events.
type sseReader struct {
	r      *bufio.Reader
	line   []byte
	data   bytes.Buffer
	name   string
	hasDat bool
	// skipLF: the last line ended in CR, so an LF right after it belongs to
	// the same line break.
	skipLF  bool
	started bool
}

// sseReaders recycles the readers of finished streams: a 16 KiB buffer
// per stream is otherwise allocated and cleared for every answer.
var sseReaders = sync.Pool{New: func() any { return &sseReader{r: bufio.NewReaderSize(nil, 16<<10)} }}

// newSSEReader returns a reader of r; release hands it back once nothing
// reads from it any more.
func newSSEReader(r io.Reader) *sseReader {
	s := sseReaders.Get().(*sseReader)
	s.r.Reset(r)
	return s
}

// release returns s to the pool: the caller is done with it and with
// every message it returned.
func (s *sseReader) release() {
	s.r.Reset(nil)
	s.line, s.name, s.hasDat, s.skipLF, s.started = s.line[:0], "", false, false, false
	s.data.Reset()
	sseReaders.Put(s)
}

// next returns the next event or comment. At the end of the stream it
// returns io.EOF (a partial event is dropped, as a browser would).
func (s *sseReader) next() (sseMessage, error) {
	for {
		line, err := s.readLine()
		if err != nil {
			return sseMessage{}, err
		}
		if len(line) == 0 {
			if !s.hasDat {
				s.name = ""
				continue
			}
			msg := sseMessage{name: s.name, data: bytes.Clone(bytes.TrimSuffix(s.data.Bytes(), []byte("\n")))}
			s.data.Reset()
			s.name, s.hasDat = "", false
			return msg, nil
		}
		if line[0] == ':' {
			return sseMessage{comment: true}, nil
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			value = bytes.TrimPrefix(value, []byte(" "))
		}
		switch string(field) {
		case "data":
			if s.data.Len()+len(value) > maxEventSize {
				return sseMessage{}, errEventTooLarge
			}
			s.data.Write(value)
			s.data.WriteByte('\n')
			s.hasDat = true
		case "event":
			s.name = string(value)
		}
	}
}

// readLine returns one line without its terminator. The returned slice is
// valid until the next call. It looks for the terminator in what the
// bufio.Reader holds, not byte by byte.
func (s *sseReader) readLine() ([]byte, error) {
	s.line = s.line[:0]
	for {
		if _, err := s.r.Peek(1); err != nil {
			if err == io.EOF && len(s.line) > 0 {
				// A last line without its terminator never ends an event.
				return nil, io.ErrUnexpectedEOF
			}
			return nil, err
		}
		buf, _ := s.r.Peek(s.r.Buffered())
		if s.skipLF {
			// The last line ended in CR: an LF right after it belongs to
			// the same line break.
			s.skipLF = false
			if buf[0] == '\n' {
				_, _ = s.r.Discard(1)
				continue
			}
		}
		i := 0
		for i < len(buf) && buf[i] != '\n' && buf[i] != '\r' {
			i++
		}
		if len(s.line)+i > maxEventSize {
			return nil, errEventTooLarge
		}
		s.line = append(s.line, buf[:i]...)
		if i == len(buf) {
			_, _ = s.r.Discard(i)
			continue
		}
		s.skipLF = buf[i] == '\r'
		_, _ = s.r.Discard(i + 1)
		return s.bom(), nil
	}
}

// bom drops a byte order mark at the very start of the stream.
func (s *sseReader) bom() []byte {
	if !s.started {
		s.started = true
		return bytes.TrimPrefix(s.line, []byte("\xEF\xBB\xBF"))
	}
	return s.line
}
