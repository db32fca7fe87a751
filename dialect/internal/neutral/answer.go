package neutral

import (
	"errors"
	"fmt"
	"net/http"
	"strings"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"

	"github.com/sacpgw/gateway/internal/usage"
)

// Completion is the part of an OpenAI chat completion, or of a stream
// chunk, that the dialects' translations read; E is the dialect's reading
// of the error object a stream may carry instead.
type Completion[E any] struct {
	ID      string   `json:"id"`
	Created int64    `json:"created"`
	Model   string   `json:"model"`
	Choices []Choice `json:"choices"`
	Usage   *Usage   `json:"usage"`
	Error   *E       `json:"error"`
}

// ReadCompletion reads a chat completion, with json v2's defaults and
// unknown members allowed, and its one choice, which has a message; api
// names the API that answers with one ("Messages").
func ReadCompletion[E any](chat []byte, api string) (*Completion[E], *Choice, error) {
	var c Completion[E]
	if err := json.Unmarshal(chat, &c); err != nil {
		return nil, nil, fmt.Errorf("reading the chat completion: %w", err)
	}
	if len(c.Choices) != 1 {
		return nil, nil, fmt.Errorf("the chat completion has %d choices; the %s API answers with one", len(c.Choices), api)
	}
	if c.Choices[0].Message == nil {
		return nil, nil, errors.New("the chat completion's choice has no message")
	}
	return &c, &c.Choices[0], nil
}

// Usage is the usage of a chat completion, or of a stream's usage chunk,
// as far as both dialects read it. It is read by the gateway's one usage
// reader (internal/usage): a report the books refused as unreadable (the
// answer itself was delivered) is not shown to the client as counts, and
// never fails the translation of the answer around it. Known says the
// report was read.
type Usage struct {
	PromptTokens, CompletionTokens int64
	Known                          bool
	cached, reasoning              *int64
}

// UnmarshalJSON reads a usage object; an unreadable one leaves Known false.
func (u *Usage) UnmarshalJSON(b []byte) error {
	*u = Usage{}
	r, err := usage.Read(b)
	if err != nil {
		return nil
	}
	u.PromptTokens, u.CompletionTokens, u.Known = r.Prompt, r.Completion, true
	if r.HasCached {
		u.cached = &r.Cached
	}
	// The reasoning tokens are not in the books: read leniently, shown
	// only when they make sense.
	var d struct {
		Details *struct {
			ReasoningTokens *int64 `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	}
	if json.Unmarshal(b, &d) == nil && d.Details != nil && d.Details.ReasoningTokens != nil {
		n := min(max(*d.Details.ReasoningTokens, 0), u.CompletionTokens)
		u.reasoning = &n
	}
	return nil
}

// Cached is the cached prompt tokens (at most PromptTokens); false: the
// usage does not say.
func (u *Usage) Cached() (int64, bool) {
	if u.cached == nil {
		return 0, false
	}
	return *u.cached, true
}

// Reasoning is the reasoning tokens among the completion tokens; false:
// the usage does not say.
func (u *Usage) Reasoning() (int64, bool) {
	if u.reasoning == nil {
		return 0, false
	}
	return *u.reasoning, true
}

// ReadError reads an OpenAI error body ({"error": {...}}) leniently, as
// the path of something already gone wrong should: the error object, or
// the text of {"error": "text"} (of some OpenAI-compatible providers) when
// not blank; neither when the body is neither.
func ReadError(body []byte) (object jsontext.Value, text string) {
	var e struct {
		Error jsontext.Value `json:"error"`
	}
	if json.Unmarshal(body, &e) != nil {
		return nil, ""
	}
	switch e.Error.Kind() {
	case '{':
		return e.Error, ""
	case '"':
		var s string
		if json.Unmarshal(e.Error, &s) == nil && strings.TrimSpace(s) != "" {
			return nil, s
		}
	}
	return nil, ""
}

// StatusText is the status's text, or "The upstream failed." for a status
// without one: the message of an error body that says none.
func StatusText(status int) string {
	if text := http.StatusText(status); text != "" {
		return text
	}
	return "The upstream failed."
}

// StatusType is the error type both dialects give a status:
//
//	400 invalid_request_error    401 authentication_error
//	403 permission_error         404 not_found_error
//	429 rate_limit_error         other 4xx invalid_request_error
//
// and "" for any other status, which each dialect types its own way.
func StatusType(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	}
	if status >= 400 && status < 500 {
		return "invalid_request_error"
	}
	return ""
}
