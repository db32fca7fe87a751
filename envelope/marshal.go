package envelope

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sacpgw/gateway/internal/jsonlex"
)

// Marshal encodes the message in its own format with its protocol's field
// names and types (ACL lower case, SAM upper case), in the protocol's field
// order, omitting absent optional fields; a broadcast is written as an
// explicit null receiver_id / recipient, a group send as a null receiver_id
// with its receiver_type / a recipient {"agent_id": null, "role": T}. The message is validated first, so
// the gateway never relays an envelope it would itself refuse.
//
// Fields mirrored inside Payload or Metadata (SAM payload.action and
// metadata.priority/timeout_ms/in_reply_to, ACL metadata.timeout_ms and
// payload.error_code) are written from the Message fields, replacing the
// mirrored keys in place and keeping every other byte of the objects, so that
// Decode(Marshal(m)) equals m.
func (m *Message) Marshal() ([]byte, error) {
	if fe := m.validate(); fe != nil {
		return nil, fmt.Errorf("marshal %s envelope: %w", m.Format, fe)
	}
	var s scanner // shared by payload and metadata
	payload, fe := m.encodedPayload(&s)
	if fe != nil {
		return nil, fmt.Errorf("marshal %s envelope: %w", m.Format, fe)
	}
	metadata, fe := m.encodedMetadata(&s)
	if fe != nil {
		return nil, fmt.Errorf("marshal %s envelope: %w", m.Format, fe)
	}
	w := objWriter{b: make([]byte, 0, 256+len(payload)+len(metadata))}
	w.b = append(w.b, '{')
	if m.Format == ACL {
		m.writeACL(&w, payload, metadata)
	} else {
		m.writeSAM(&w, payload, metadata)
	}
	return append(w.b, '}'), nil
}

func (m *Message) writeACL(w *objWriter, payload, metadata json.RawMessage) {
	w.optString("message_id", m.ID)
	w.string("message_type", aclTypeName(m.Type))
	w.time("timestamp", m.Timestamp)
	w.string("priority", string(m.Priority))
	w.string("sender_id", m.Sender.ID)
	w.optString("sender_type", m.Sender.Role)
	if m.Recipient == nil {
		w.raw("receiver_id", []byte("null"))
		w.optString("receiver_type", m.GroupType)
	} else {
		w.string("receiver_id", m.Recipient.ID)
		w.optString("receiver_type", m.Recipient.Role)
	}
	w.optString("workflow_id", m.WorkflowID)
	w.optString("task_id", m.TaskID)
	w.optString("action", m.Action)
	w.raw("payload", payload)
	w.optString("in_reply_to", m.InReplyTo)
	w.optString("status", m.Status)
	if m.Error != nil {
		w.string("error", m.Error.Message)
	}
	w.raw("metadata", metadata)
}

func (m *Message) writeSAM(w *objWriter, payload, metadata json.RawMessage) {
	w.optString("message_id", m.ID)
	w.optString("correlation_id", m.CorrelationID)
	w.time("timestamp", m.Timestamp)
	w.key("sender")
	writeParty(w, m.Sender)
	switch {
	case m.Recipient == nil && m.GroupType != "":
		w.key("recipient")
		pw := objWriter{b: append(w.b, '{')}
		pw.raw("agent_id", []byte("null"))
		pw.string("role", m.GroupType)
		w.b = append(pw.b, '}')
	case m.Recipient == nil:
		w.raw("recipient", []byte("null"))
	default:
		w.key("recipient")
		writeParty(w, *m.Recipient)
	}
	w.string("message_type", samTypeName(m.Type))
	w.raw("payload", payload)
	w.raw("metadata", metadata)
	if e := m.Error; e != nil {
		w.key("error")
		ew := objWriter{b: append(w.b, '{')}
		ew.string("code", e.Code)
		ew.string("message", e.Message)
		ew.optString("source", e.Source)
		if sev, ok := severity(e.Severity); ok {
			ew.string("severity", sev)
		}
		if e.Retryable != nil {
			ew.raw("retryable", strconv.AppendBool(nil, *e.Retryable))
		}
		w.b = append(ew.b, '}')
	}
}

func writeParty(w *objWriter, p Party) {
	pw := objWriter{b: append(w.b, '{')}
	pw.string("agent_id", p.ID)
	pw.optString("role", p.Role)
	w.b = append(pw.b, '}')
}

func aclTypeName(t Type) string {
	if t == Event {
		return "notification"
	}
	return string(t)
}

func samTypeName(t Type) string { return strings.ToUpper(string(t)) }

// encodedPayload is Payload with the mirrored fields written from m.
func (m *Message) encodedPayload(s *scanner) (json.RawMessage, *FieldError) {
	var edits []edit
	switch m.Format {
	case SAM:
		edits = []edit{{key: "action", str: m.Action, del: m.Action == ""}}
	case ACL:
		// An empty Code leaves payload.error_code alone: the payload is the
		// sender's, and only a code the gateway knows is written back.
		if m.Error != nil && m.Error.Code != "" {
			edits = []edit{{key: "error_code", str: m.Error.Code}}
		}
	}
	return applyEdits(s, "payload", m.Payload, edits)
}

// encodedMetadata is Metadata with the mirrored fields written from m.
func (m *Message) encodedMetadata(s *scanner) (json.RawMessage, *FieldError) {
	timeout := edit{key: "timeout_ms", del: m.TimeoutMS == 0, num: m.TimeoutMS, isNum: true}
	edits := []edit{timeout}
	if m.Format == SAM {
		// The default priority is not added where the sender left it out,
		// so that metadata stays as received.
		edits = append(edits,
			edit{key: "priority", str: string(m.Priority), keepAbsent: m.Priority == Medium},
			edit{key: "in_reply_to", str: m.InReplyTo, del: m.InReplyTo == ""})
	}
	return applyEdits(s, "metadata", m.Metadata, edits)
}

// edit is a change to one key of a JSON object: set a string or integer
// value, or delete the key.
type edit struct {
	key        string
	str        string
	num        int
	isNum      bool
	del        bool
	keepAbsent bool // do not add the key when it is absent
}

func (e *edit) encode(b []byte) []byte {
	if e.isNum {
		return strconv.AppendInt(b, int64(e.num), 10)
	}
	return appendString(b, e.str)
}

// satisfiedBy reports whether the existing value v (nil: key absent) already
// says what the edit wants.
func (e *edit) satisfiedBy(v []byte) bool {
	switch {
	case v == nil:
		return e.del || e.keepAbsent
	case e.del:
		return false
	case e.isNum:
		return string(v) == strconv.Itoa(e.num)
	}
	return v[0] == '"' && stringValue(v) == e.str
}

// applyEdits validates obj as a JSON object (nil allowed) and returns it
// compacted with the edits applied. Untouched members keep their bytes,
// including key spelling and order; new keys are appended.
func applyEdits(s *scanner, field string, obj json.RawMessage, edits []edit) (json.RawMessage, *FieldError) {
	if len(obj) == 0 || string(obj) == "null" {
		var b []byte
		for i := range edits {
			if e := &edits[i]; !e.satisfiedBy(nil) {
				b = appendMember(b, e.key, e)
			}
		}
		if b == nil {
			return nil, nil
		}
		b[0] = '{'
		return append(b, '}'), nil
	}
	members, fe := s.scanObject(obj, 1, field)
	if fe != nil {
		return nil, fe
	}
	changed := false
	found := make([]bool, len(edits))
	for _, mb := range members {
		for i := range edits {
			if string(mb.key) == edits[i].key {
				found[i] = true
				changed = changed || !edits[i].satisfiedBy(mb.val)
			}
		}
	}
	for i := range edits {
		changed = changed || (!found[i] && !edits[i].satisfiedBy(nil))
	}
	if !changed {
		if isCompact(obj) {
			return obj, nil
		}
		return compact(obj), nil
	}
	b := make([]byte, 0, len(obj)+64)
	for _, mb := range members {
		var e *edit
		for i := range edits {
			if string(mb.key) == edits[i].key {
				e = &edits[i]
			}
		}
		switch {
		case e == nil:
			b = append(append(append(b, ','), mb.rawKey...), ':')
			b = appendCompact(b, mb.val)
		case !e.del:
			b = append(append(append(b, ','), mb.rawKey...), ':')
			b = e.encode(b)
		}
	}
	for i := range edits {
		if !found[i] && !edits[i].satisfiedBy(nil) {
			b = appendMember(b, edits[i].key, &edits[i])
		}
	}
	if len(b) == 0 {
		return json.RawMessage("{}"), nil
	}
	b[0] = '{'
	return append(b, '}'), nil
}

// appendMember appends ,"key":value; the caller turns the first comma into
// the opening brace.
func appendMember(b []byte, key string, e *edit) []byte {
	b = appendString(append(b, ','), key)
	return e.encode(append(b, ':'))
}

// objWriter writes the members of a JSON object, managing commas.
type objWriter struct {
	b    []byte
	more bool
}

func (w *objWriter) key(k string) {
	if w.more {
		w.b = append(w.b, ',')
	}
	w.more = true
	w.b = append(appendString(w.b, k), ':')
}

func (w *objWriter) string(k, v string) {
	w.key(k)
	w.b = appendString(w.b, v)
}

func (w *objWriter) optString(k, v string) {
	if v != "" {
		w.string(k, v)
	}
}

func (w *objWriter) raw(k string, v []byte) {
	if len(v) > 0 {
		w.key(k)
		w.b = append(w.b, v...)
	}
}

func (w *objWriter) time(k string, t time.Time) {
	if !t.IsZero() {
		w.key(k)
		w.b = append(w.b, '"')
		w.b = t.UTC().AppendFormat(w.b, time.RFC3339Nano)
		w.b = append(w.b, '"')
	}
}

// appendString appends s as a JSON string. Unlike encoding/json it does not
// escape <, > and &: envelopes are not embedded in HTML, and the bytes the
// sender chose should survive the relay. Invalid UTF-8 becomes U+FFFD.
func appendString(b []byte, s string) []byte { return jsonlex.AppendQuoted(b, s, false) }
