package sacp

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// ErrMalformedRequest is wrapped by every Inject error about the request body,
// so the proxy can map them all to one 400 invalid_request_error.
var ErrMalformedRequest = errors.New("malformed chat completions request")

var errEmptyTemplate = errors.New("sacp template is empty")

// separator goes between the agent's own system prompt and the template, so
// the template's markdown heading starts a block of its own.
const separator = "\n\n"

// Inject returns body, an OpenAI chat-completions request, with tpl appended
// so that the protocol closes the system prompt (seed 000 3.2, SPEC 4.1 step 1):
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
// Only "messages" and the one rewritten message are re-encoded; every other
// value is carried over as raw JSON, so numbers, unknown fields and vendor
// extensions keep their exact meaning (object keys may be reordered).
// Injecting a body that already ends its system prompt with the template is a
// no-op, so a re-ask built from an injected body does not repeat it.
// Errors about the body wrap ErrMalformedRequest; an empty tpl is an error
// too.
func Inject(body []byte, tpl Template) ([]byte, error) {
	if tpl.Text == "" {
		// A zero Template would switch the protocol off without a trace.
		return nil, errEmptyTemplate
	}
	var req map[string]json.RawMessage
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, malformed("body: %v", err)
	}
	if req == nil {
		return nil, malformed("body: not a JSON object")
	}
	rawMsgs, ok := req["messages"]
	if !ok {
		return nil, malformed("messages: missing")
	}
	var msgs []json.RawMessage
	if err := json.Unmarshal(rawMsgs, &msgs); err != nil || msgs == nil {
		return nil, malformed("messages: not an array")
	}

	last := -1 // index of the last message of the leading system/developer run
	for i, raw := range msgs {
		role, err := messageRole(raw)
		if err != nil {
			return nil, malformed("messages[%d]: %v", i, err)
		}
		if role != "system" && role != "developer" {
			break
		}
		last = i
	}

	if last < 0 {
		sys, err := encode(map[string]string{"role": "system", "content": tpl.Text})
		if err != nil {
			return nil, malformed("messages: %v", err)
		}
		msgs = append([]json.RawMessage{sys}, msgs...)
	} else {
		msg, err := appendToMessage(msgs[last], tpl.Text)
		if err != nil {
			return nil, malformed("messages[%d]: %v", last, err)
		}
		msgs[last] = msg
	}

	var err error
	if req["messages"], err = encode(msgs); err != nil {
		return nil, malformed("messages: %v", err)
	}
	out, err := encode(req)
	if err != nil {
		return nil, malformed("body: %v", err)
	}
	return out, nil
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
