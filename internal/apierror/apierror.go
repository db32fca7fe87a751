// Package apierror maps the gateway's failures to HTTP in one place, in the
// error shape of the OpenAI API so that agents' SDKs raise their usual
// exceptions: {"error": {"message", "type", "code", "param"}}.
//
// Stages never write error JSON themselves: they return an *Error (or any
// error, which becomes a generic 500) and the front door calls Write.
package apierror

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Error is a failure with the status and codes a client sees.
type Error struct {
	Status  int
	Type    string
	Code    string
	Message string
	Param   string
	// Header holds extra response headers (Retry-After, x-ratelimit-*).
	Header http.Header
	// Err is the underlying cause, for logs only; it never reaches the client.
	Err error
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return e.Code + ": " + e.Message
}

func (e *Error) Unwrap() error { return e.Err }

// Types and codes of the HTTP API's errors (docs/reference.md, HTTP API).
const (
	TypeInvalidRequest = "invalid_request_error"
	TypeAuthentication = "authentication_error"
	TypePermission     = "permission_error"
	TypeRateLimit      = "rate_limit_error"
	TypeUpstream       = "upstream_error"
	TypeServer         = "server_error"
)

// BadRequest is a 400 for a malformed request; param names the field at fault.
func BadRequest(param, format string, args ...any) *Error {
	return &Error{Status: http.StatusBadRequest, Type: TypeInvalidRequest, Code: "invalid_request", Param: param, Message: fmt.Sprintf(format, args...)}
}

// Unauthorized is a 401 for a missing or unknown token.
func Unauthorized(msg string) *Error {
	return &Error{Status: http.StatusUnauthorized, Type: TypeAuthentication, Code: "invalid_api_key", Message: msg}
}

// Forbidden is a 403 for an RBAC or policy denial.
func Forbidden(msg string) *Error {
	return &Error{Status: http.StatusForbidden, Type: TypePermission, Code: "policy_denied", Message: msg}
}

// ModelNotFound is a 404 for a model the agent may not use or no upstream serves.
func ModelNotFound(model string) *Error {
	return &Error{Status: http.StatusNotFound, Type: TypeInvalidRequest, Code: "model_not_found", Param: "model",
		Message: fmt.Sprintf("The model `%s` does not exist or you do not have access to it.", model)}
}

// TooLarge is a 413 for a body over the agent's max_request_size.
func TooLarge(limit int64) *Error {
	return &Error{Status: http.StatusRequestEntityTooLarge, Type: TypeInvalidRequest, Code: "request_too_large",
		Message: fmt.Sprintf("Request body exceeds this agent's max_request_size of %d bytes.", limit)}
}

// RateLimited is a 429; h carries Retry-After and the x-ratelimit-* headers
// (Write adds x-should-retry: false when Retry-After is far: FailFast).
func RateLimited(msg string, h http.Header) *Error {
	return &Error{Status: http.StatusTooManyRequests, Type: TypeRateLimit, Code: "rate_limit_exceeded", Message: msg, Header: h}
}

// Upstream is a 502 (failed) or 504 (timed out) from the provider.
func Upstream(status int, msg string, cause error) *Error {
	return &Error{Status: status, Type: TypeUpstream, Code: "upstream_error", Message: msg, Err: cause}
}

// AuditUnavailable is the 503 of fail_mode closed.
func AuditUnavailable(cause error) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: TypeServer, Code: "audit_unavailable",
		Message: "The audit trail is unavailable; the request was not served.", Err: cause}
}

// From returns err as an *Error; anything else is an internal error whose
// details stay in the logs.
func From(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	if errors.Is(err, ErrStateUnavailable) {
		return StateUnavailable(err)
	}
	return &Error{Status: http.StatusInternalServerError, Type: TypeServer, Code: "internal_error",
		Message: "The gateway failed to process the request.", Err: err}
}

// ErrStateUnavailable marks a failure of the state backend (Redis down,
// slow past its deadline): the client gets 503 state_unavailable with
// Retry-After, never a 500, and may try again.
var ErrStateUnavailable = errors.New("state backend unavailable")

// StateUnavailable is the 503 of a call whose store is down.
func StateUnavailable(cause error) *Error {
	return &Error{Status: http.StatusServiceUnavailable, Type: TypeServer, Code: "state_unavailable",
		Message: "The gateway's shared state is unavailable; retry shortly.", Header: http.Header{"Retry-After": {"1"}}, Err: cause}
}

type body struct {
	Error payload `json:"error"`
}

type payload struct {
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Code    string  `json:"code"`
	Param   *string `json:"param"`
}

// FailFastAfter is the longest wait a 429 leaves to the client's retries.
// OpenAI's SDKs sleep on Retry-After and try again (openai-go twice, up to
// a minute each time), so an agent behind a limit that resets in a minute
// hangs for minutes before it sees the error. Past this wait the answer
// tells them not to retry; a shorter wait is worth sleeping through.
const FailFastAfter = 10 * time.Second

// FailFast marks a 429 whose Retry-After (seconds or an HTTP date) is
// further than FailFastAfter with "x-should-retry: false", the header
// OpenAI's and Anthropic's SDKs obey over their own retry policy: the
// client fails at once with the 429 and its own code decides what to do.
// Any other answer, or a 429 without Retry-After, is left as it is. Write
// applies it to every error; a handler that passes a provider's 429 on
// calls it itself.
func FailFast(h http.Header, status int, now time.Time) {
	if status != http.StatusTooManyRequests {
		return
	}
	ra := strings.TrimSpace(h.Get("Retry-After"))
	if ra == "" {
		return
	}
	var wait time.Duration
	if secs, err := strconv.ParseFloat(ra, 64); err == nil {
		wait = time.Duration(secs * float64(time.Second))
	} else if t, err := http.ParseTime(ra); err == nil {
		wait = t.Sub(now)
	} else {
		return // unreadable: the SDKs fall back to their backoff
	}
	if wait > FailFastAfter {
		h.Set("X-Should-Retry", "false")
	}
}

// Write sends err to the client and returns the *Error it sent.
func Write(w http.ResponseWriter, err error) *Error {
	e := From(err)
	h := w.Header()
	for k, vs := range e.Header {
		h[k] = vs
	}
	FailFast(h, e.Status, time.Now())
	b := e.JSON()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(e.Status)
	_, _ = w.Write(b)
	return e
}

// JSON is the error in OpenAI's shape, {"error":{...}}, newline-terminated:
// the body of an error answer, and the data of an error event in a stream
// that has already begun.
func (e *Error) JSON() []byte {
	p := payload{Message: e.Message, Type: e.Type, Code: e.Code}
	if e.Param != "" {
		p.Param = &e.Param
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false) // messages quote "<token>" and such literally
	_ = enc.Encode(body{Error: p})
	return buf.Bytes()
}
