package sacp

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// ErrMalformedRequest is wrapped by every Inject error about the request body,
// so the proxy can map them all to one 400 invalid_request_error.
var ErrMalformedRequest = errors.New("malformed chat completions request")

var errEmptyTemplate = errors.New("sacp template is empty")

// separator goes between the agent's own system prompt and the template, so
// the template's markdown heading starts a block of its own.
const separator = "\n\n"

// Inject returns body, an OpenAI chat-completions request, with tpl appended
// so that the protocol closes the system prompt, as SACP asks and as the first
// thing the gateway does for a json_standard agent (README, "Behaviour"):
//
//   - the template is appended to the last message of the leading run of
//     "system"/"developer" messages, so it is read after the agent's own
//     instructions and nothing the agent wrote can come after it;
//   - without a leading system message, {"role":"system","content":tpl} is
//     inserted first;
//   - string content gets "\n\n" + template; array content (content parts)
//     gets one more text part; null or missing content becomes the template;
//   - system messages later in the conversation are not touched.
//
// Only the one rewritten (or inserted) message is encoded; every other byte
// of the body is carried over as it was read, so numbers, unknown fields,
// vendor extensions and the order of keys keep their exact form.
// Injecting a body that already ends its system prompt with the template is a
// no-op, so a re-ask built from an injected body does not repeat it.
// Errors about the body wrap ErrMalformedRequest; an empty tpl is an error
// too.
func Inject(body []byte, tpl Template) ([]byte, error) {
	if tpl.Text == "" {
		// A zero Template would switch the protocol off without a trace.
		return nil, errEmptyTemplate
	}
	// One pass over the body: it must be one JSON object with a messages
	// array; the leading run of system/developer messages is found on the
	// way, and everything else stays as it was written.
	dec := jsontext.NewDecoder(bytes.NewReader(body))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return nil, malformed("body: not a JSON object")
	}
	found := false
	var open, last, lastStart, lastEnd int
	var empty bool
	for dec.PeekKind() != '}' {
		name, err := dec.ReadToken()
		if err != nil {
			return nil, malformed("body: %v", err)
		}
		if name.String() != "messages" {
			if err := dec.SkipValue(); err != nil {
				return nil, malformed("body: %v", err)
			}
			continue
		}
		found = true
		switch dec.PeekKind() {
		case '[':
		case 0: // invalid or truncated: the read says why
			_, err := dec.ReadValue()
			return nil, malformed("body: %v", err)
		default:
			return nil, malformed("messages: not an array")
		}
		if open, last, empty, lastStart, lastEnd, err = leadingRun(dec); err != nil {
			return nil, err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return nil, malformed("body: %v", err)
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, malformed("body: data after the JSON object")
	}
	if !found {
		return nil, malformed("messages: missing")
	}
	if last < 0 {
		sys, err := encode(map[string]string{"role": "system", "content": tpl.Text})
		if err != nil {
			return nil, malformed("messages: %v", err)
		}
		if !empty {
			sys = append(sys, ',')
		}
		return splice(body, open, open, sys), nil
	}
	msg, err := appendToMessage(body[lastStart:lastEnd], tpl.Text)
	if err != nil {
		return nil, malformed("messages[%d]: %v", last, err)
	}
	return splice(body, lastStart, lastEnd, msg), nil
}

// leadingRun reads the messages array (the decoder is at its '[') and
// returns the offset just after the '[', the index and byte span of the
// last message of the leading system/developer run (last -1: none), and
// whether the array is empty. Messages after the run are checked as JSON
// only.
func leadingRun(dec *jsontext.Decoder) (open, last int, empty bool, start, end int, err error) {
	if _, err := dec.ReadToken(); err != nil {
		return 0, 0, false, 0, 0, malformed("messages: %v", err)
	}
	open, last = int(dec.InputOffset()), -1
	empty = dec.PeekKind() == ']'
	leading := true
	for i := 0; dec.PeekKind() != ']'; i++ {
		raw, err := dec.ReadValue()
		if err != nil {
			return 0, 0, false, 0, 0, malformed("messages[%d]: %v", i, err)
		}
		if !leading {
			continue
		}
		role, err := messageRole(json.RawMessage(raw))
		if err != nil {
			return 0, 0, false, 0, 0, malformed("messages[%d]: %v", i, err)
		}
		if role != "system" && role != "developer" {
			leading = false
			continue
		}
		end = int(dec.InputOffset())
		last, start = i, end-len(raw)
	}
	if _, err := dec.ReadToken(); err != nil {
		return 0, 0, false, 0, 0, malformed("messages: %v", err)
	}
	return open, last, empty, start, end, nil
}

// splice returns a copy of body with body[from:to] replaced by with.
func splice(body []byte, from, to int, with []byte) []byte {
	out := make([]byte, 0, len(body)-(to-from)+len(with))
	out = append(out, body[:from]...)
	out = append(out, with...)
	return append(out, body[to:]...)
}

func malformed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrMalformedRequest, fmt.Sprintf(format, args...))
}

// messageRole decodes only the role, so messages after the leading run are
// never parsed beyond it.
func messageRole(raw json.RawMessage) (string, error) {
	var m struct {
		Role *string `json:"role"`
	}
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", fmt.Errorf("not a message object: %v", err)
	}
	if m.Role == nil {
		return "", errors.New("role: missing")
	}
	return *m.Role, nil
}

// appendToMessage appends text to the content of one message, keeping every
// other field as raw JSON.
func appendToMessage(raw json.RawMessage, text string) (json.RawMessage, error) {
	var msg map[string]json.RawMessage
	if err := json.Unmarshal(raw, &msg); err != nil {
		return nil, err
	}
	content, err := appendToContent(msg["content"], text)
	if err != nil {
		return nil, fmt.Errorf("content: %v", err)
	}
	if content == nil {
		return raw, nil // already injected
	}
	msg["content"] = content
	return encode(msg)
}

// appendToContent returns the new content, or nil when it already ends with
// text.
func appendToContent(content json.RawMessage, text string) (json.RawMessage, error) {
	switch kindOf(content) {
	case "", "null":
		return encode(text)
	case "string":
		var s string
		if err := json.Unmarshal(content, &s); err != nil {
			return nil, err
		}
		if strings.HasSuffix(s, text) {
			return nil, nil
		}
		if s != "" {
			s += separator
		}
		return encode(s + text)
	case "array":
		var parts []json.RawMessage
		if err := json.Unmarshal(content, &parts); err != nil {
			return nil, err
		}
		if n := len(parts); n > 0 && textPartEndsWith(parts[n-1], text) {
			return nil, nil
		}
		if len(parts) > 0 {
			// Providers join text parts without a guaranteed separator.
			text = separator + text
		}
		part, err := encode(map[string]string{"type": "text", "text": text})
		if err != nil {
			return nil, err
		}
		return encode(append(parts, part))
	default:
		return nil, fmt.Errorf("got %s, want string or array", kindOf(content))
	}
}

func textPartEndsWith(raw json.RawMessage, text string) bool {
	var p struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	return json.Unmarshal(raw, &p) == nil && p.Type == "text" && strings.HasSuffix(p.Text, text)
}
