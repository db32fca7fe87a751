package mcp

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
)

// event is one server-sent event as read (WHATWG HTML, "Parsing an event
// stream"): its type ("" means message), its data lines joined by "\n",
// and its id.
type event struct {
	name string
	data []byte
	id   string
}

// errEventTooLarge is an event whose data passed the bound: the stream is
// abandoned rather than a message cut.
var errEventTooLarge = errors.New("server-sent event larger than the gateway accepts")

// readEvents reads the events of r until it ends or fn returns an error or
// stop. Lines end at CR, LF or CRLF; a leading BOM is dropped; comments
// and unknown fields are ignored; an event without data is dispatched too
// (an MCP server's priming event carries only an id).
func readEvents(r io.Reader, max int, fn func(ev event) (stop bool, err error)) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), max+16)
	sc.Split(splitLines)
	var ev event
	var data bytes.Buffer
	has, first := false, true
	for sc.Scan() {
		line := sc.Bytes()
		if first {
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
			first = false
		}
		if len(line) == 0 {
			if has {
				ev.data = bytes.TrimSuffix(data.Bytes(), []byte("\n"))
				if stop, err := fn(ev); stop || err != nil {
					return err
				}
			}
			ev, has = event{}, false
			data.Reset()
			continue
		}
		if line[0] == ':' {
			continue
		}
		field, value, _ := bytes.Cut(line, []byte(":"))
		value = bytes.TrimPrefix(value, []byte(" "))
		switch string(field) {
		case "data":
			if data.Len()+len(value)+1 > max {
				return errEventTooLarge
			}
			data.Write(value)
			data.WriteByte('\n')
			has = true
		case "event":
			ev.name, has = string(value), true
		case "id":
			if bytes.IndexByte(value, 0) < 0 {
				ev.id = string(value)
			}
			has = true
		}
	}
	if errors.Is(sc.Err(), bufio.ErrTooLong) {
		return errEventTooLarge
	}
	// An event not ended by a blank line is dropped, as the standard says.
	return sc.Err()
}

// splitLines splits at CRLF, LF or CR.
func splitLines(data []byte, atEOF bool) (int, []byte, error) {
	i := bytes.IndexAny(data, "\r\n")
	switch {
	case i < 0:
		if atEOF && len(data) > 0 {
			return len(data), data, nil
		}
		return 0, nil, nil
	case data[i] == '\n':
		return i + 1, data[:i], nil
	case i+1 < len(data):
		if data[i+1] == '\n' {
			return i + 2, data[:i], nil
		}
		return i + 1, data[:i], nil
	case atEOF:
		return i + 1, data[:i], nil
	}
	// A CR at the end of the buffer: an LF may follow.
	return 0, nil, nil
}

// writeEvent writes msg as one "message" event and flushes it. A message
// is compacted JSON, one line: a JSON string cannot hold a raw line break,
// so only whitespace between tokens could, and compacting removes it.
func writeEvent(w http.ResponseWriter, msg []byte) error {
	msg = compact(msg)
	b := make([]byte, 0, len(msg)+24)
	b = append(b, "event: message\ndata: "...)
	b = append(b, msg...)
	b = append(b, "\n\n"...)
	if _, err := w.Write(b); err != nil {
		return err
	}
	return http.NewResponseController(w).Flush()
}
