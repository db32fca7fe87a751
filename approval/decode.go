package approval

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"reflect"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sacpgw/gateway/internal/apierror"
	sj "github.com/sacpgw/gateway/internal/strictjson"
)

// bodyOverhead is what a request may carry besides its content: the other
// fields, and the JSON escaping of the content itself. Content is bounded by
// protocol.limits.max_content_size, and ordinary text (quotes, newlines)
// escapes to well under twice its size, so 2×max + 64 KiB lets every
// request the policy should judge reach the policy (which then explains an
// oversized content as a violation) while bounding what the gateway buffers.
const bodyOverhead = 64 << 10

// readBody reads at most limit bytes; more is a 413.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, tooLarge(limit)
	}
	b, err := io.ReadAll(http.MaxBytesReader(w, r.Body, limit))
	if err != nil {
		if _, ok := errors.AsType[*http.MaxBytesError](err); ok {
			return nil, tooLarge(limit)
		}
		return nil, apierror.BadRequest("", "The request body could not be read: %v.", err)
	}
	return b, nil
}

func tooLarge(limit int64) *apierror.Error {
	return &apierror.Error{Status: http.StatusRequestEntityTooLarge, Type: apierror.TypeInvalidRequest, Code: "request_too_large",
		Message: fmt.Sprintf("Request body exceeds the approval API's limit of %d bytes.", limit)}
}

// DecodeAgentRequest parses an AgentRequest strictly: valid UTF-8, one JSON
// object, no unknown or duplicate keys (an auditor reading the stored body
// must see the same request the policy judged), known request_type and
// action, well-formed digests. Missing fields a request type requires are
// not checked here: that is the policy's job, so the agent gets a violation
// with a suggestion rather than a bare 400. The only defaults filled in are
// the ones the approval protocol implies: a QUERY reads.
//
// Errors are *apierror.Error 400s whose Param names the field at fault.
func DecodeAgentRequest(body []byte) (*AgentRequest, error) {
	var req AgentRequest
	if err := decodeStrict(body, &req); err != nil {
		return nil, err
	}
	if err := req.normalise(); err != nil {
		return nil, err
	}
	return &req, nil
}

func (req *AgentRequest) normalise() error {
	if req.AgentID == "" {
		return apierror.BadRequest("agent_id", "agent_id is required.")
	}
	if !contains(requestTypes, req.RequestType) {
		return apierror.BadRequest("request_type", "request_type must be one of %s; got %q.", strings.Join(requestTypes, ", "), req.RequestType)
	}
	if req.Action != "" && !contains(actions, req.Action) {
		return apierror.BadRequest("action", "action must be one of %s; got %q.", strings.Join(actions, ", "), req.Action)
	}
	switch req.RequestType {
	case TypeQuery:
		if req.Action == "" {
			req.Action = ActionRead
		}
	case TypeApproval, TypeValidate:
		// Without an action there is nothing to authorise: the RBAC verdict
		// depends on it, so it is part of the message's shape.
		if req.Action == "" {
			return apierror.BadRequest("action", "action is required for %s (one of %s).", req.RequestType, strings.Join(actions, ", "))
		}
	}
	// REPORT takes its action and target from the request it reports on,
	// which it must name.
	if req.RequestType == TypeReport && req.RequestID == "" {
		return apierror.BadRequest("request_id", "request_id is required for a REPORT: it names the APPROVED request being reported on.")
	}
	// The id lands in audit entries and messages; ours are 36 characters.
	if len(req.RequestID) > 128 {
		return apierror.BadRequest("request_id", "request_id is at most 128 characters.")
	}
	if req.TargetType != "" && !contains(targetTypes, req.TargetType) {
		return apierror.BadRequest("target_type", "target_type must be one of %s; got %q.", strings.Join(targetTypes, ", "), req.TargetType)
	}
	if req.ChangesMade != nil && req.ChangesMade.ContentSHA256 != "" {
		d, err := normaliseDigest(req.ChangesMade.ContentSHA256)
		if err != nil {
			return apierror.BadRequest("changes_made.content_sha256", "changes_made.content_sha256 %v.", err)
		}
		req.ChangesMade.ContentSHA256 = d
	}
	if req.RequestType != TypeReport && (req.Completed != nil || req.ChangesMade != nil) {
		return apierror.BadRequest("request_type", "completed and changes_made belong to a REPORT, not a %s.", req.RequestType)
	}
	return nil
}

// normaliseDigest accepts 64 hex digits, optionally prefixed "sha256:", and
// returns them in lowercase.
func normaliseDigest(s string) (string, error) {
	s = strings.ToLower(strings.TrimPrefix(s, "sha256:"))
	if len(s) != 64 {
		return "", fmt.Errorf("must be 64 hex digits")
	}
	if _, err := hex.DecodeString(s); err != nil {
		return "", fmt.Errorf("must be 64 hex digits")
	}
	return s, nil
}

// UnmarshalJSON accepts a summary string, a list of paths, or the object.
func (c *ChangesMade) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	switch {
	case len(b) > 0 && b[0] == '"':
		return json.Unmarshal(b, &c.Summary)
	case len(b) > 0 && b[0] == '[':
		return json.Unmarshal(b, &c.Files)
	}
	type plain ChangesMade // no UnmarshalJSON: no recursion
	var p plain
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return &fieldError{field: "changes_made", err: err}
	}
	*c = ChangesMade(p)
	return nil
}

// ContextQuery is the body of POST /agent/context.
type ContextQuery struct {
	Query string `json:"query"`
	// Limit bounds the number of specifications returned; 0 means 5.
	Limit     int    `json:"limit,omitempty"`
	SessionID string `json:"session_id,omitempty"`
}

// DecisionRequest is the body of POST /admin/escalations/{id}/decision.
type DecisionRequest struct {
	Decision string `json:"decision"`
	Reviewer string `json:"reviewer"`
	Comment  string `json:"comment"`
}

// maxComment bounds a reviewer's comment; it goes into the audit trail.
const maxComment = 4 << 10

// decodeStrict decodes one JSON object into v with the checks of
// DecodeAgentRequest, turning every failure into a 400 naming the field.
func decodeStrict(body []byte, v any) error {
	if !utf8.Valid(body) {
		return apierror.BadRequest("", "The request body is not valid UTF-8.")
	}
	if err := checkStrict(body, v); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return jsonError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return apierror.BadRequest("", "The request body must hold exactly one JSON object.")
	}
	return nil
}

// fieldError is a nested decoder's error, which encoding/json passes on
// without saying where it happened.
type fieldError struct {
	field string
	err   error
}

func (e *fieldError) Error() string { return e.field + ": " + e.err.Error() }
func (e *fieldError) Unwrap() error { return e.err }

// jsonError maps encoding/json's errors to a 400 with the field at fault.
func jsonError(err error) error {
	if fe, ok := errors.AsType[*fieldError](err); ok {
		msg := strings.TrimPrefix(fe.err.Error(), "json: ")
		if te, ok := errors.AsType[*json.UnmarshalTypeError](fe.err); ok {
			msg = "must be a string, a list of paths or an object, not a JSON " + te.Value
		}
		return apierror.BadRequest(fe.field, "Invalid %s: %s.", fe.field, msg)
	}
	if _, ok := errors.AsType[*time.ParseError](err); ok {
		return apierror.BadRequest("timestamp", "timestamp must be an RFC 3339 date-time such as 2025-11-02T09:00:00Z.")
	}
	if te, ok := errors.AsType[*json.UnmarshalTypeError](err); ok {
		field := te.Field
		switch field {
		case "":
			return apierror.BadRequest("", "The request body must be a JSON object.")
		case "deviations":
			return apierror.BadRequest(field, "deviations must be a list of objects whose values are strings.")
		}
		return apierror.BadRequest(field, "%s must be %s, not a JSON %s.", field, jsonKind(te.Type.Kind().String()), te.Value)
	}
	if se, ok := errors.AsType[*json.SyntaxError](err); ok {
		return apierror.BadRequest("", "The request body is not valid JSON (offset %d): %v.", se.Offset, se)
	}
	msg := err.Error()
	if name, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		name = strings.Trim(name, `"`)
		return apierror.BadRequest(name, "Unknown field %q: the approval API accepts only the fields of the approval protocol's AgentRequest.", name)
	}
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return apierror.BadRequest("", "The request body is empty or truncated.")
	}
	return apierror.BadRequest("", "Invalid request body: %s.", strings.TrimPrefix(msg, "json: "))
}

func jsonKind(k string) string {
	switch k {
	case "string":
		return "a string"
	case "slice":
		return "an array"
	case "map", "struct":
		return "an object"
	case "bool":
		return "a boolean"
	case "int", "int64":
		return "an integer"
	case "ptr":
		return "a value of another type"
	}
	return "a " + k
}

// checkStrict is the one strict reading of an approval body (see
// internal/strictjson): a key named twice at any depth, or a key that
// differs from a field of v only by case, is refused. encoding/json keeps
// the last duplicate and matches case-insensitively, so without this a body
// could mean one thing to the policy and another to whoever reads the
// audited bytes later ("content" and "Content").
func checkStrict(body []byte, v any) error {
	err := sj.Check(body, sj.FromStruct(reflect.TypeOf(v)))
	if err == nil {
		return nil
	}
	if se, ok := errors.AsType[*sj.Error](err); ok {
		key := se.Path
		if i := strings.LastIndexAny(key, ".]"); i >= 0 {
			key = key[i+1:]
		}
		if se.Msg == "duplicate key" {
			return apierror.BadRequest(key, "Duplicate key %q in the request body.", key)
		}
		if strings.Contains(se.Msg, "only by case") {
			return apierror.BadRequest(key, "Invalid request body: %s.", se.Error())
		}
	}
	return apierror.BadRequest("", "The request body is not valid JSON: %v.", err)
}
