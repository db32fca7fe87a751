package a2a

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	sdk "github.com/a2aproject/a2a-go/v2/a2a"

	"github.com/sacpgw/gateway/internal/strictjson"
)

// Version is the A2A protocol version the door serves: the one of the
// official SDKs' current releases (a2a-go v2, @a2a-js/sdk 1.x, a2a-python
// 1.x), JSON-RPC binding.
const Version sdk.ProtocolVersion = "1.0"

// servedVersion reports whether v (an interface's or a request's
// A2A-Version) is a 1.x version.
func servedVersion(v string) bool { return v == "1" || strings.HasPrefix(v, "1.") }

// The JSON-RPC methods of A2A 1.0 the door serves.
const (
	mSend      = "SendMessage"
	mStream    = "SendStreamingMessage"
	mGet       = "GetTask"
	mList      = "ListTasks"
	mCancel    = "CancelTask"
	mSubscribe = "SubscribeToTask"
)

// refusedMethods are A2A 1.0 methods the door knows and answers with a
// refusal by name (the handler's): push notification configs (the
// gateway does not call addresses an agent gives it) and the extended
// card (the gateway's card is the only one).
var refusedMethods = map[string]bool{
	"GetTaskPushNotificationConfig": true, "CreateTaskPushNotificationConfig": true,
	"ListTaskPushNotificationConfigs": true, "DeleteTaskPushNotificationConfig": true,
	"GetExtendedAgentCard": true,
}

// legacyMethods are the method names of A2A 0.3 (and earlier): a client
// of that version is told which version is served, not "method not found".
var legacyMethods = map[string]bool{
	"message/send": true, "message/stream": true, "tasks/get": true, "tasks/list": true, "tasks/cancel": true,
	"tasks/resubscribe": true, "tasks/pushNotificationConfig/set": true, "tasks/pushNotificationConfig/get": true,
	"tasks/pushNotificationConfig/list": true, "tasks/pushNotificationConfig/delete": true,
	"agent/getAuthenticatedExtendedCard": true,
}

// rpcCall is one JSON-RPC request, read and checked.
type rpcCall struct {
	id     any // a string, a number, or nil
	method string
	// send is the request of SendMessage and SendStreamingMessage; taskID
	// the task the other methods name ("" for ListTasks).
	send   *sdk.SendMessageRequest
	taskID string
	// skill is what the message's metadata names ("" for none).
	skill string
}

// rpcError is a refusal of the reader, answered in JSON-RPC's shape.
type rpcError struct {
	code int
	msg  string
	id   any
}

func (e *rpcError) Error() string { return e.msg }

// JSON-RPC's error codes the reader answers with, and A2A's "version not
// supported".
const (
	codeParse, codeInvalid, codeNoMethod, codeParams = -32700, -32600, -32601, -32602
	codeVersion                                      = -32009
)

// Known member names, so that a case variant (which encoding/json would
// read as the known member) is refused.
var (
	partFields = strictjson.Object(map[string]*strictjson.Fields{
		"text": nil, "raw": nil, "data": nil, "url": nil, "filename": nil, "mediaType": nil, "metadata": nil,
	})
	messageFields = strictjson.Object(map[string]*strictjson.Fields{
		"messageId": nil, "contextId": nil, "extensions": nil, "metadata": nil, "parts": strictjson.Array(partFields),
		"referenceTaskIds": nil, "role": nil, "taskId": nil,
	})
	paramsFields = strictjson.Object(map[string]*strictjson.Fields{
		"tenant": nil, "message": messageFields, "metadata": nil, "id": nil, "historyLength": nil, "contextId": nil,
		"status": nil, "pageSize": nil, "pageToken": nil, "statusTimestampAfter": nil, "includeArtifacts": nil,
		"configuration": strictjson.Object(map[string]*strictjson.Fields{
			"acceptedOutputModes": nil, "returnImmediately": nil, "historyLength": nil, "pushNotificationConfig": nil,
		}),
	})
	envelopeFields = strictjson.Object(map[string]*strictjson.Fields{"jsonrpc": nil, "id": nil, "method": nil, "params": paramsFields})
)

// readCall reads one JSON-RPC request of A2A 1.0 strictly: valid UTF-8,
// no repeated or case-variant member, a known method of this version
// (one of 0.3 is refused by name), its params as the SDK reads them, and
// for a message each part with exactly one kind of content. version is
// the request's A2A-Version header ("" when absent).
func readCall(body []byte, version string) (*rpcCall, *rpcError) {
	if err := strictjson.Check(body, envelopeFields); err != nil {
		return nil, &rpcError{code: codeParse, msg: "Invalid JSON: " + err.Error()}
	}
	var env struct {
		JSONRPC string          `json:"jsonrpc"`
		ID      json.RawMessage `json:"id"`
		Method  string          `json:"method"`
		Params  json.RawMessage `json:"params"`
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&env); err != nil {
		return nil, &rpcError{code: codeInvalid, msg: "Invalid JSON-RPC request: " + err.Error()}
	}
	id, ok := readID(env.ID)
	if !ok {
		return nil, &rpcError{code: codeInvalid, msg: "Invalid JSON-RPC request: id must be a string, a number or null."}
	}
	call := &rpcCall{id: id, method: env.Method}
	fail := func(code int, format string, args ...any) (*rpcCall, *rpcError) {
		return nil, &rpcError{code: code, msg: fmt.Sprintf(format, args...), id: id}
	}
	switch {
	case env.JSONRPC != "2.0":
		return fail(codeInvalid, "Invalid JSON-RPC request: jsonrpc must be \"2.0\".")
	case legacyMethods[env.Method]:
		return fail(codeVersion, "%q is a method of A2A 0.3, which this gateway does not serve: it speaks A2A %s (JSON-RPC method names such as SendMessage).", env.Method, Version)
	case version != "" && !servedVersion(version):
		return fail(codeVersion, "A2A-Version %q is not served: this gateway speaks A2A %s.", clip(version), Version)
	case refusedMethods[env.Method]:
		return call, nil // the handler refuses it by name
	}
	switch env.Method {
	case mSend, mStream:
		req, err := readSend(env.Params)
		if err != nil {
			return fail(codeParams, "Invalid params: %v", err)
		}
		call.send, call.skill = req, skillOf(req)
	case mGet, mCancel, mSubscribe:
		var p struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(env.Params, &p); err != nil || p.ID == "" {
			return fail(codeParams, "Invalid params: %s needs the task's id.", env.Method)
		}
		call.taskID = p.ID
	case mList:
		var p sdk.ListTasksRequest
		if len(env.Params) > 0 {
			if err := json.Unmarshal(env.Params, &p); err != nil {
				return fail(codeParams, "Invalid params: %v", err)
			}
		}
	default:
		return fail(codeNoMethod, "Method %q is not an A2A %s method.", clip(env.Method), Version)
	}
	return call, nil
}

// readID accepts what JSON-RPC allows as an id.
func readID(raw json.RawMessage) (any, bool) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, true
	}
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return nil, false
	}
	switch v.(type) {
	case string, float64:
		return v, true
	}
	return nil, false
}

// readSend reads a message's params: a message with an id, the user's
// role, and parts of one kind of content each (the SDK would take the
// first kind it finds and drop the others, so a part that carries two
// could pass the checks with one and reach the agent with the other).
func readSend(params json.RawMessage) (*sdk.SendMessageRequest, error) {
	var shape struct {
		Message *struct {
			Parts    []map[string]json.RawMessage `json:"parts"`
			Metadata json.RawMessage              `json:"metadata"`
		} `json:"message"`
	}
	if err := json.Unmarshal(params, &shape); err != nil {
		return nil, err
	}
	if shape.Message == nil {
		return nil, errors.New("message is required")
	}
	if len(shape.Message.Parts) == 0 {
		return nil, errors.New("message.parts: at least one part is required")
	}
	for i, p := range shape.Message.Parts {
		if err := checkPart(p); err != nil {
			return nil, fmt.Errorf("message.parts[%d]: %w", i, err)
		}
	}
	var req sdk.SendMessageRequest
	if err := json.Unmarshal(params, &req); err != nil {
		return nil, err
	}
	m := req.Message
	switch {
	case m.ID == "":
		return nil, errors.New("message.messageId is required")
	case m.Role != sdk.MessageRoleUser:
		return nil, fmt.Errorf("message.role must be %s", sdk.MessageRoleUser)
	case req.Config != nil && req.Config.PushConfig != nil:
		return nil, errors.New("configuration.pushNotificationConfig: push notifications are not served by this gateway")
	}
	if s, ok := m.Metadata["skill"]; ok {
		if str, ok := s.(string); !ok || str == "" {
			return nil, errors.New("message.metadata.skill must be a skill id")
		}
	}
	return &req, nil
}

// checkPart: exactly one kind of content, of its type, and known members
// of their types only.
func checkPart(p map[string]json.RawMessage) error {
	if _, ok := p["kind"]; ok {
		// Named first, whatever else the part holds: it is what an A2A 0.3
		// client sends, and the error should say so.
		return fmt.Errorf("unknown member \"kind\" (an A2A 0.3 part; a part of A2A %s has text, raw, data or url)", Version)
	}
	kinds := 0
	// In name order, so that a part with several wrong members is always
	// refused with the same message.
	for _, k := range slices.Sorted(maps.Keys(p)) {
		v := p[k]
		switch k {
		case "text", "raw", "url", "filename", "mediaType":
			var s string
			if json.Unmarshal(v, &s) != nil {
				return fmt.Errorf("%s must be a string", k)
			}
			if k != "filename" && k != "mediaType" {
				kinds++
			}
		case "data":
			kinds++
		case "metadata":
			var m map[string]any
			if json.Unmarshal(v, &m) != nil || m == nil {
				return errors.New("metadata must be an object")
			}
		default:
			return fmt.Errorf("unknown member %q (a part of A2A %s has text, raw, data or url)", clip(k), Version)
		}
	}
	if kinds != 1 {
		return errors.New("a part carries exactly one of text, raw, data and url")
	}
	return nil
}

// skillOf is the skill the message names in its metadata, "" for none.
func skillOf(req *sdk.SendMessageRequest) string {
	s, _ := req.Message.Metadata["skill"].(string)
	return s
}

// clip shortens what a caller sent before it is quoted in an answer.
func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
