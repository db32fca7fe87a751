// Package usage reads a provider's report of the tokens a call consumed,
// once and strictly, for every reader in the gateway: the books (what an
// exchange cost, what a budget is charged) and the dialects that show the
// counts to their clients in another API's terms.
//
// A report is OpenAI's usage object. It is believed only when it makes
// sense: every count a plain non-negative integer (0, 17; not 10.5, 1e3,
// -1, "17" or null), prompt_tokens given, total_tokens (when given)
// exactly prompt_tokens + completion_tokens (0 when absent, as in an
// embeddings report), and the cached prompt tokens
// (prompt_tokens_details.cached_tokens, when given) at most prompt_tokens.
// Anything else is an unreadable report: the gateway cannot know what the
// call cost, and must not act as if it knew (a negative count would turn
// into a refund, a smaller total into tokens never charged). What the
// caller does then is its own decision; Read only says why.
//
// Members the gateway does not use (completion_tokens_details, audio
// counts, a provider's own additions) are not judged.
package usage

import (
	"bytes"
	"errors"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
)

// Report is a usage report the gateway believes.
type Report struct {
	// Prompt is every prompt token, the cached ones included.
	Prompt int64
	// Completion is every generated token (0 when the report has none:
	// embeddings).
	Completion int64
	// Total is Prompt + Completion.
	Total int64
	// Cached is how many of Prompt the provider served from its prompt
	// cache; HasCached says the report gave it.
	Cached    int64
	HasCached bool
}

// MaxCount is the largest count believed: 2⁵³-1, the largest integer every
// JSON reader (a JavaScript client's included) reads exactly. No call
// comes near it, and sums of a few counts stay far from overflowing.
const MaxCount = 1<<53 - 1

// Error is a report that cannot be believed. Its text says why in terms
// of the report's members and never quotes a value, so it may go into the
// audit trail as it is.
type Error struct{ Reason string }

func (e *Error) Error() string { return "unreadable usage: " + e.Reason }

func fail(reason string) error { return &Error{Reason: reason} }

// Count reads one token count: a plain non-negative integer literal of at
// most MaxCount. name is the member it came from, for the error.
func Count(name string, raw []byte) (int64, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		return 0, fail(name + " is empty")
	}
	if raw[0] == '-' {
		return 0, fail(name + " is negative")
	}
	for _, c := range raw {
		if c < '0' || c > '9' {
			// 10.5 and 1e3 are numbers, but no count: providers write
			// counts as integers, and one that does not is not trusted.
			return 0, fail(name + " is not an integer")
		}
	}
	if len(raw) > 1 && raw[0] == '0' {
		return 0, fail(name + " is not an integer")
	}
	n, err := strconv.ParseInt(string(raw), 10, 64)
	if err != nil || n > MaxCount {
		return 0, fail(name + " is too large")
	}
	return n, nil
}

// Read reads a usage object (raw is the value of "usage", not null).
func Read(raw []byte) (Report, error) {
	var r Report
	dec := jsontext.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return Report{}, fail("usage is not an object")
	}
	var prompt, total bool
	var totalN int64
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return Report{}, fail("usage is not valid JSON")
		}
		name := tok.String()
		v, err := dec.ReadValue()
		if err != nil {
			return Report{}, fail("usage is not valid JSON")
		}
		switch name {
		case "prompt_tokens":
			r.Prompt, err = Count(name, v)
			prompt = true
		case "completion_tokens":
			r.Completion, err = Count(name, v)
		case "total_tokens":
			totalN, err = Count(name, v)
			total = true
		case "prompt_tokens_details":
			r.Cached, r.HasCached, err = cached(v)
		}
		if err != nil {
			return Report{}, err
		}
	}
	if _, err := dec.ReadToken(); err != nil {
		return Report{}, fail("usage is not valid JSON")
	}
	switch {
	case !prompt:
		return Report{}, fail("prompt_tokens is missing")
	case total && totalN != r.Prompt+r.Completion:
		return Report{}, fail("total_tokens is not prompt_tokens + completion_tokens")
	case r.Cached > r.Prompt:
		return Report{}, fail("cached_tokens is more than prompt_tokens")
	}
	r.Total = r.Prompt + r.Completion
	return r, nil
}

// cached reads prompt_tokens_details (null: none) for its cached_tokens.
func cached(raw jsontext.Value) (n int64, ok bool, err error) {
	switch raw.Kind() {
	case 'n':
		return 0, false, nil
	case '{':
	default:
		return 0, false, fail("prompt_tokens_details is not an object")
	}
	dec := jsontext.NewDecoder(bytes.NewReader(raw))
	if _, err := dec.ReadToken(); err != nil {
		return 0, false, fail("usage is not valid JSON")
	}
	for dec.PeekKind() == '"' {
		tok, err := dec.ReadToken()
		if err != nil {
			return 0, false, fail("usage is not valid JSON")
		}
		name := tok.String()
		v, err := dec.ReadValue()
		if err != nil {
			return 0, false, fail("usage is not valid JSON")
		}
		if name == "cached_tokens" {
			if n, err = Count(name, v); err != nil {
				return 0, false, err
			}
			ok = true
		}
	}
	return n, ok, nil
}

// Reason is why err (from Read or Count) made a report unreadable; "" for
// another error or none.
func Reason(err error) string {
	if e := (*Error)(nil); errors.As(err, &e) {
		return e.Reason
	}
	return ""
}
