package mcp

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// JSON-RPC error codes. The first five are JSON-RPC's own; the gateway's
// refusals use codes of the implementation-defined range (-32000 to
// -32099) that neither MCP nor its SDKs use, so that a client can tell
// them apart (docs/mcp.md, "Errors").
const (
	codeParse          = -32700
	codeInvalidRequest = -32600
	codeMethodNotFound = -32601
	codeInvalidParams  = -32602
	codeInternal       = -32603
	// codeDenied: the policy, or the agent's mcp_tools, refused.
	codeDenied = -32060
	// codeEscalated: a person must approve; data carries escalation_id and
	// human_review_url.
	codeEscalated = -32061
	// codeRateLimited: the agent's rate_limit or the tool's limit.
	codeRateLimited = -32062
	// codeBlocked: a blocking redaction detector matched.
	codeBlocked = -32063
	// codeUpstream: the MCP server failed, timed out or answered
	// something the gateway does not pass on.
	codeUpstream = -32064
	// codeUnavailable: the audit trail or the shared state is down.
	codeUnavailable = -32065
)

// Bounds of what a message may carry in its envelope.
const (
	maxIDLen     = 128
	maxMethodLen = 128
	maxBatch     = 32
)

// message is one JSON-RPC 2.0 message, read strictly: exactly the members
// JSON-RPC defines, each of the type it must have, no name twice at any
// depth, valid UTF-8. The raw values are kept as received, to be passed on
// or spliced into what the gateway sends.
type message struct {
	// raw is the whole message as received.
	raw []byte
	// id is the request or response id (a string or an integer), nil for a
	// notification, "null" for an error about an unreadable request.
	id jsontext.Value
	// method is set for a request or a notification.
	method string
	// params is nil when absent, else an object.
	params jsontext.Value
	// result or errObj is set for a response (exactly one).
	result jsontext.Value
	errObj *rpcError
}

func (m *message) isRequest() bool      { return m.method != "" && m.id != nil }
func (m *message) isNotification() bool { return m.method != "" && m.id == nil }
func (m *message) isResponse() bool     { return m.method == "" }

// rpcError is a JSON-RPC error object.
type rpcError struct {
	Code    int64          `json:"code"`
	Message string         `json:"message"`
	Data    jsontext.Value `json:"data,omitzero"`
}

// wire is the envelope as read: every member a raw value, nil when absent,
// so that presence and type are checked by hand.
type wire struct {
	JSONRPC jsontext.Value `json:"jsonrpc"`
	ID      jsontext.Value `json:"id"`
	Method  jsontext.Value `json:"method"`
	Params  jsontext.Value `json:"params"`
	Result  jsontext.Value `json:"result"`
	Error   jsontext.Value `json:"error"`
}

// strict are the reading options: an unknown member is refused, names
// match exactly (no case folding), and jsontext's defaults refuse a
// duplicate name at any depth and invalid UTF-8.
var strict = json.JoinOptions(json.RejectUnknownMembers(true), json.MatchCaseInsensitiveNames(false))

// errMalformed marks a document that is JSON but not a message the
// gateway knows (JSON-RPC's Invalid Request, not a Parse error).
var errMalformed = errors.New("not a JSON-RPC message")

// readMessages reads a POST body: one message, or a batch (an array of 1
// to maxBatch messages). A syntax error wraps nothing; a shape error wraps
// errMalformed.
func readMessages(data []byte) (msgs []*message, batch bool, err error) {
	v := jsontext.Value(data)
	if !v.IsValid() {
		return nil, false, errors.New("invalid JSON (syntax, duplicate member name or invalid UTF-8)")
	}
	switch v.Kind() {
	case '{':
		m, err := readMessage(data)
		if err != nil {
			return nil, false, err
		}
		return []*message{m}, false, nil
	case '[':
		var elems []jsontext.Value
		if err := json.Unmarshal(data, &elems, strict); err != nil {
			return nil, true, fmt.Errorf("batch: %w", errMalformed)
		}
		if len(elems) == 0 || len(elems) > maxBatch {
			return nil, true, fmt.Errorf("a batch holds 1 to %d messages, this one %d: %w", maxBatch, len(elems), errMalformed)
		}
		msgs = make([]*message, len(elems))
		for i, e := range elems {
			if msgs[i], err = readMessage(e); err != nil {
				return nil, true, fmt.Errorf("batch[%d]: %w", i, err)
			}
		}
		return msgs, true, nil
	}
	return nil, false, fmt.Errorf("a message is an object and a batch an array: %w", errMalformed)
}

// readMessage reads one message (an object).
func readMessage(data []byte) (*message, error) {
	var w wire
	if jsontext.Value(data).Kind() != '{' {
		return nil, fmt.Errorf("a message is an object: %w", errMalformed)
	}
	if err := json.Unmarshal(data, &w, strict); err != nil {
		return nil, fmt.Errorf("%s: %w", memberProblem(err), errMalformed)
	}
	if string(w.JSONRPC) != `"2.0"` {
		return nil, fmt.Errorf(`jsonrpc must be "2.0": %w`, errMalformed)
	}
	m := &message{raw: data}
	if w.ID != nil {
		if err := checkID(w.ID); err != nil {
			return nil, err
		}
		m.id = w.ID
	}
	if w.Method != nil {
		if err := json.Unmarshal(w.Method, &m.method, strict); err != nil || m.method == "" || len(m.method) > maxMethodLen {
			return nil, fmt.Errorf("method must be a string of 1 to %d bytes: %w", maxMethodLen, errMalformed)
		}
		if string(m.id) == "null" {
			return nil, fmt.Errorf("a request's id is a string or an integer: %w", errMalformed)
		}
		if w.Result != nil || w.Error != nil {
			return nil, fmt.Errorf("a request carries no result or error: %w", errMalformed)
		}
		if w.Params != nil {
			if w.Params.Kind() != '{' {
				return nil, fmt.Errorf("params must be an object: %w", errMalformed)
			}
			m.params = w.Params
		}
		return m, nil
	}
	// A response.
	switch {
	case w.ID == nil:
		return nil, fmt.Errorf("a message has a method or an id: %w", errMalformed)
	case w.Params != nil:
		return nil, fmt.Errorf("a response carries no params: %w", errMalformed)
	case (w.Result == nil) == (w.Error == nil):
		return nil, fmt.Errorf("a response has a result or an error, not both: %w", errMalformed)
	case w.Result != nil:
		if w.Result.Kind() != '{' || string(m.id) == "null" {
			return nil, fmt.Errorf("a result is an object, answering a string or integer id: %w", errMalformed)
		}
		m.result = w.Result
	default:
		e, err := readError(w.Error)
		if err != nil {
			return nil, err
		}
		m.errObj = e
	}
	return m, nil
}

// readError reads an error object: an integer code and a message, both
// required, and data of any kind.
func readError(v jsontext.Value) (*rpcError, error) {
	var raw struct {
		Code    jsontext.Value `json:"code"`
		Message jsontext.Value `json:"message"`
		Data    jsontext.Value `json:"data"`
	}
	e := &rpcError{Data: nil}
	if v.Kind() != '{' || json.Unmarshal(v, &raw, strict) != nil || raw.Code.Kind() != '0' || raw.Message.Kind() != '"' ||
		json.Unmarshal(raw.Code, &e.Code) != nil || json.Unmarshal(raw.Message, &e.Message) != nil {
		return nil, fmt.Errorf("error must be {code (an integer), message, data?}: %w", errMalformed)
	}
	e.Data = raw.Data
	return e, nil
}

// checkID accepts a string of at most maxIDLen bytes, an integer of at
// most 18 digits, and null (an error about an unreadable request).
func checkID(id jsontext.Value) error {
	switch id.Kind() {
	case '"':
		var s string
		if json.Unmarshal(id, &s) == nil && len(s) <= maxIDLen {
			return nil
		}
	case '0':
		s := string(id)
		if _, err := strconv.ParseInt(s, 10, 64); err == nil && len(s) <= 19 {
			return nil
		}
	case 'n':
		return nil
	}
	return fmt.Errorf("id must be a string of at most %d bytes or an integer: %w", maxIDLen, errMalformed)
}

// memberProblem names the problem of an envelope that did not decode,
// without quoting the document.
func memberProblem(err error) string {
	var se *json.SemanticError
	if errors.As(err, &se) && se.JSONPointer != "" {
		return "member " + string(se.JSONPointer) + " is unknown or of the wrong type"
	}
	return "unreadable message"
}

// Encoding. Every id and raw value spliced here was read by the strict
// reader or made by the gateway, so the output is valid JSON.

// response is {"jsonrpc":"2.0","id":id,"result":result}.
func response(id, result jsontext.Value) []byte { return envelope(id, "result", result) }

// envelope is {"jsonrpc":"2.0","id":id,"<member>":value}, member result
// or error: every response the gateway writes, in one allocation.
func envelope(id jsontext.Value, member string, value jsontext.Value) []byte {
	b := make([]byte, 0, len(id)+len(member)+len(value)+30)
	b = append(b, `{"jsonrpc":"2.0","id":`...)
	b = append(b, id...)
	b = append(b, `,"`...)
	b = append(b, member...)
	b = append(b, `":`...)
	b = append(b, value...)
	return append(b, '}')
}

// request is {"jsonrpc":"2.0","id":id,"method":method,"params":params};
// a nil id makes it a notification, nil params leaves them out.
func request(id jsontext.Value, method string, params jsontext.Value) []byte {
	b := []byte(`{"jsonrpc":"2.0"`)
	if id != nil {
		b = append(b, `,"id":`...)
		b = append(b, id...)
	}
	b = append(b, `,"method":`...)
	b, _ = jsontext.AppendQuote(b, method)
	if params != nil {
		b = append(b, `,"params":`...)
		b = append(b, params...)
	}
	return append(b, '}')
}

// errorResponse is a JSON-RPC error answering id (nil: null). data, when
// not nil, is marshalled as the error's data.
func errorResponse(id jsontext.Value, code int64, msg string, data any) []byte {
	if id == nil {
		id = jsontext.Value("null")
	}
	e := rpcError{Code: code, Message: msg}
	if data != nil {
		raw, err := json.Marshal(data, json.Deterministic(true))
		if err == nil {
			e.Data = raw
		}
	}
	body, err := json.Marshal(e)
	if err != nil {
		// The gateway's own strings and numbers: cannot fail.
		body = []byte(`{"code":-32603,"message":"internal error"}`)
	}
	return envelope(id, "error", body)
}

// withError is a response to m's id carrying e (the upstream's error, its
// texts redacted by the caller).
func withError(id jsontext.Value, e *rpcError) []byte {
	return errorResponse(id, e.Code, e.Message, dataOf(e.Data))
}

// dataOf is raw data to marshal again as is (nil: none).
func dataOf(raw jsontext.Value) any {
	if raw == nil {
		return nil
	}
	return raw
}

// compact is v without insignificant whitespace: a message on one line,
// as an SSE data field wants it.
func compact(v jsontext.Value) []byte {
	if !bytes.ContainsAny(v, " \t\r\n") {
		return v
	}
	c := v.Clone()
	if err := c.Compact(); err != nil {
		return v
	}
	return c
}
