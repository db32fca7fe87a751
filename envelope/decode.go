package envelope

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// Decode detects the envelope's format — a top-level "sender" (an object)
// is SAM, a "sender_id" is ACL — and decodes it as DecodeSAM or DecodeACL would. An
// envelope with both or neither is rejected: guessing would let a sender pick
// which set of fields the gateway checks.
func Decode(raw []byte) (*Message, error) {
	return decodeAs(raw, "")
}

// DecodeACL decodes and validates an ACL envelope (docs/glossary.md).
func DecodeACL(raw []byte) (*Message, error) {
	return decodeAs(raw, ACL)
}

// DecodeSAM decodes and validates a SAM envelope (docs/glossary.md).
func DecodeSAM(raw []byte) (*Message, error) {
	return decodeAs(raw, SAM)
}

// decodeAs scans raw's top-level object, its sub-objects collected, and
// decodes it in format f ("": the format its sender member says).
func decodeAs(raw []byte, f Format) (*Message, error) {
	s := scanner{collectSubs: true}
	top, fe := s.scanObject(raw, 0, "")
	if fe != nil {
		return nil, fe
	}
	switch f {
	case ACL:
		return s.decodeACL(top)
	case SAM:
		return s.decodeSAM(top)
	}
	return s.decodeDetected(top)
}

func (s *scanner) decodeDetected(top []member) (*Message, error) {
	var hasSender, hasSenderID bool
	for i := range top {
		switch string(top[i].key) {
		case "sender":
			hasSender = true
		case "sender_id":
			hasSenderID = true
		}
	}
	switch {
	case hasSender && hasSenderID:
		return nil, &FieldError{Field: "sender_id", Reason: "conflicts with sender: an envelope is either ACL (sender_id) or SAM (sender), not both"}
	case hasSender:
		return s.decodeSAM(top)
	case hasSenderID:
		return s.decodeACL(top)
	}
	return nil, &FieldError{Field: "sender", Reason: "required: sender (SAM) or sender_id (ACL)"}
}

// readMembers reads the top-level members in order with field, which
// returns false for a member it does not know (refused by name), and
// stops at the first problem; then the required members must all be
// there, the first missing one named.
func readMembers(top []member, required []string, field func(key, v []byte) (bool, *FieldError)) *FieldError {
	for i := range top {
		known, fe := field(top[i].key, top[i].val)
		if !known {
			fe = unknownField("", top[i].key)
		}
		if fe != nil {
			return fe
		}
	}
	for _, name := range required {
		if !slices.ContainsFunc(top, func(m member) bool { return string(m.key) == name }) {
			return &FieldError{Field: name, Reason: "required"}
		}
	}
	return nil
}

// aclRequired are the members an ACL envelope must have, in the order a
// missing one is reported.
var aclRequired = []string{"message_type", "sender_id"}

func (s *scanner) decodeACL(top []member) (*Message, error) {
	m := &Message{Format: ACL, Priority: Medium}
	var emptyReceiverType bool
	var to Party
	fe := readMembers(top, aclRequired, func(key, v []byte) (known bool, fe *FieldError) {
		switch string(key) {
		case "message_id":
			m.ID, fe = optID("message_id", v)
		case "message_type":
			m.Type, fe = decodeType(ACL, v)
		case "timestamp":
			m.Timestamp, fe = decodeTime(v)
		case "priority":
			m.Priority, fe = decodePriority("priority", v)
		case "sender_id":
			m.Sender.ID, fe = optID("sender_id", v)
		case "sender_type":
			m.Sender.Role, fe = optText("sender_type", v, maxRole)
		case "receiver_id":
			to.ID, fe = optID("receiver_id", v)
		case "receiver_type":
			to.Role, fe = optText("receiver_type", v, maxRole)
			emptyReceiverType = fe == nil && v[0] == '"' && to.Role == ""
		case "workflow_id":
			m.WorkflowID, fe = optID("workflow_id", v)
		case "task_id":
			m.TaskID, fe = optID("task_id", v)
		case "in_reply_to":
			m.InReplyTo, fe = optID("in_reply_to", v)
		case "action":
			m.Action, fe = optAction("action", v)
		case "status":
			m.Status, fe = optText("status", v, maxStatus)
		case "error":
			var msg string
			if msg, fe = optText("error", v, maxMessage); fe == nil && v[0] == '"' {
				if msg == "" {
					fe = &FieldError{Field: "error", Reason: "must be a non-empty string or null"}
				}
				m.Error = &ErrorInfo{Message: msg}
			}
		case "payload":
			m.Payload, fe = optObject("payload", v, true)
		case "metadata":
			m.Metadata, fe = optObject("metadata", v, true)
		default:
			return false, nil
		}
		return true, fe
	})
	if fe != nil {
		return nil, fe
	}
	if m.Sender.ID == "" {
		return nil, &FieldError{Field: "sender_id", Reason: "required"}
	}
	switch {
	case to.ID != "":
		m.Recipient = &to
	case to.Role != "":
		// A typed but anonymous receiver is a group send: every agent of
		// that type.
		m.GroupType = to.Role
	case emptyReceiverType:
		// Neither a group nor clearly a broadcast: refused rather than
		// guessed.
		return nil, &FieldError{Field: "receiver_type", Reason: "must name an agent type when receiver_id is null (or be left out for a broadcast)"}
	}
	if m.Error != nil && m.Payload != nil {
		for _, mb := range s.subs[subPayload] {
			if string(mb.key) == "error_code" && mb.val[0] == '"' {
				m.Error.Code = stringValue(mb.val)
			}
		}
	}
	if m.Metadata != nil {
		for _, mb := range s.subs[subMetadata] {
			var fe *FieldError
			switch string(mb.key) {
			case "timeout_ms":
				m.TimeoutMS, fe = decodeTimeout(mb.val)
			case "ttl_ms":
				m.TTLMS, fe = decodeTTL(mb.val)
			}
			if fe != nil {
				return nil, fe
			}
		}
	}
	return m.validated()
}

// samRequired are the members a SAM envelope must have, in the order a
// missing one is reported.
var samRequired = []string{"message_type", "sender"}

func (s *scanner) decodeSAM(top []member) (*Message, error) {
	m := &Message{Format: SAM, Priority: Medium}
	fe := readMembers(top, samRequired, func(key, v []byte) (known bool, fe *FieldError) {
		switch string(key) {
		case "message_id":
			m.ID, fe = optID("message_id", v)
		case "correlation_id":
			m.CorrelationID, fe = optID("correlation_id", v)
		case "timestamp":
			m.Timestamp, fe = decodeTime(v)
		case "sender":
			if v[0] != '{' {
				fe = &FieldError{Field: "sender", Reason: "must be an object {agent_id, role}"}
				break
			}
			m.Sender, fe = decodeParty("sender", s.subs[subSender])
		case "recipient":
			fe = s.samRecipient(m, v)
		case "message_type":
			m.Type, fe = decodeType(SAM, v)
		case "payload":
			if m.Payload, fe = optObject("payload", v, false); fe == nil {
				m.Action, fe = samAction(s.subs[subPayload])
			}
		case "metadata":
			if m.Metadata, fe = optObject("metadata", v, true); fe == nil && m.Metadata != nil {
				fe = m.samMetadata(s.subs[subMetadata])
			}
		case "error":
			if isObject(v) {
				m.Error, fe = decodeErrorObject(s.subs[subError])
			} else if string(v) != "null" {
				fe = &FieldError{Field: "error", Reason: "must be an object {code, message, source, severity, retryable}"}
			}
		default:
			return false, nil
		}
		return true, fe
	})
	if fe != nil {
		return nil, fe
	}
	return m.validated()
}

// samRecipient reads a SAM recipient: null (a broadcast), a party, or a
// party with a null agent_id (a group send to its role).
func (s *scanner) samRecipient(m *Message, v []byte) *FieldError {
	if string(v) == "null" {
		return nil
	}
	if !isObject(v) {
		return &FieldError{Field: "recipient", Reason: "must be an object {agent_id, role} or null"}
	}
	p, fe := decodeParty("recipient", s.subs[subRecipient])
	if fe == nil && p.ID == "" {
		// {"agent_id": null, "role": T}: a group send.
		m.GroupType = p.Role
		return nil
	}
	m.Recipient = &p
	return fe
}

// isObject: the scanned value v is an object (not null, nor any other
// kind).
func isObject(v []byte) bool { return v[0] == '{' }

// validated is m once it passes validate.
func (m *Message) validated() (*Message, error) {
	if fe := m.validate(); fe != nil {
		return nil, fe
	}
	return m, nil
}

// partyFields are the paths of a SAM party's fields, spelled out so that
// decoding builds no strings.
var partyFields = map[string][2]string{
	"sender":    {"sender.agent_id", "sender.role"},
	"recipient": {"recipient.agent_id", "recipient.role"},
}

func decodeParty(prefix string, members []member) (Party, *FieldError) {
	var p Party
	fields := partyFields[prefix]
	for _, mb := range members {
		var fe *FieldError
		switch string(mb.key) {
		case "agent_id":
			p.ID, fe = optID(fields[0], mb.val)
		case "role":
			p.Role, fe = optText(fields[1], mb.val, maxRole)
		default:
			fe = unknownField(prefix, mb.key)
		}
		if fe != nil {
			return p, fe
		}
	}
	if p.ID == "" {
		// Only a recipient may be a type instead of an agent (a group
		// send); a sender is always one agent.
		if prefix == "recipient" && p.Role != "" {
			return p, nil
		}
		if prefix == "recipient" {
			return p, &FieldError{Field: fields[0], Reason: "required (or recipient.role for a group send, or a null recipient for a broadcast)"}
		}
		return p, &FieldError{Field: fields[0], Reason: "required"}
	}
	return p, nil
}

// samAction extracts payload.action; when present it must be a valid action
// whatever the type, because Marshal re-derives it from Message.Action.
func samAction(payload []member) (string, *FieldError) {
	for _, mb := range payload {
		if string(mb.key) != "action" {
			continue
		}
		if mb.val[0] != '"' {
			return "", &FieldError{Field: "payload.action", Reason: "must be a string"}
		}
		a := stringValue(mb.val)
		return a, checkAction("payload.action", a)
	}
	return "", nil
}

// samMetadata extracts the metadata keys the gateway acts on. They must not be
// null when present: Marshal re-derives them from the Message fields.
func (m *Message) samMetadata(md []member) *FieldError {
	for _, mb := range md {
		var fe *FieldError
		switch string(mb.key) {
		case "priority":
			if mb.val[0] != '"' {
				return &FieldError{Field: "metadata.priority", Reason: "must be a string"}
			}
			m.Priority, fe = decodePriority("metadata.priority", mb.val)
		case "timeout_ms":
			m.TimeoutMS, fe = decodeTimeout(mb.val)
		case "ttl_ms":
			m.TTLMS, fe = decodeTTL(mb.val)
		case "in_reply_to":
			if mb.val[0] != '"' {
				return &FieldError{Field: "metadata.in_reply_to", Reason: "must be a string"}
			}
			m.InReplyTo, fe = optID("metadata.in_reply_to", mb.val)
		}
		if fe != nil {
			return fe
		}
	}
	return nil
}

func decodeErrorObject(members []member) (*ErrorInfo, *FieldError) {
	e := &ErrorInfo{}
	for _, mb := range members {
		var fe *FieldError
		switch string(mb.key) {
		case "code":
			e.Code, fe = optText("error.code", mb.val, maxCode)
		case "message":
			e.Message, fe = optText("error.message", mb.val, maxMessage)
		case "source":
			e.Source, fe = optText("error.source", mb.val, maxSource)
		case "severity":
			var sev string
			if sev, fe = optText("error.severity", mb.val, maxEcho); fe == nil && sev != "" {
				var ok bool
				if e.Severity, ok = severity(sev); !ok {
					fe = badSeverity(sev)
				}
			} else if fe == nil && mb.val[0] == '"' {
				fe = badSeverity(sev)
			}
		case "retryable":
			switch string(mb.val) {
			case "true", "false":
				r := string(mb.val) == "true"
				e.Retryable = &r
			case "null":
			default:
				fe = &FieldError{Field: "error.retryable", Reason: "must be a boolean"}
			}
		default:
			fe = unknownField("error", mb.key)
		}
		if fe != nil {
			return nil, fe
		}
	}
	if e.Code == "" {
		return nil, &FieldError{Field: "error.code", Reason: "required: a non-empty string"}
	}
	if e.Message == "" {
		return nil, &FieldError{Field: "error.message", Reason: "required: a non-empty string"}
	}
	return e, nil
}

// optString decodes a string or null (""), and checks a string with check.
func optString(field string, v []byte, check func(field, s string) *FieldError) (string, *FieldError) {
	switch v[0] {
	case 'n':
		return "", nil
	case '"':
		s := stringValue(v)
		return s, check(field, s)
	}
	return "", &FieldError{Field: field, Reason: "must be a string"}
}

// optText decodes a string or null ("") and bounds its length.
func optText(field string, v []byte, limit int) (string, *FieldError) {
	return optString(field, v, func(field, s string) *FieldError { return checkText(field, s, limit) })
}

// optID decodes an id or null (""). An empty string is not an absent id: it
// is rejected so that "" never reaches a routing decision.
func optID(field string, v []byte) (string, *FieldError) { return optString(field, v, checkID) }

func optAction(field string, v []byte) (string, *FieldError) { return optString(field, v, checkAction) }

// optObject returns the compacted object, or nil for null when nullOK.
func optObject(field string, v []byte, nullOK bool) (json.RawMessage, *FieldError) {
	switch {
	case v[0] == '{':
		return compact(v), nil
	case nullOK && v[0] == 'n':
		return nil, nil
	}
	return nil, &FieldError{Field: field, Reason: "must be an object"}
}

// compact copies a validated JSON value without insignificant whitespace.
// The scanner has already checked the grammar, so this only has to track
// whether it is inside a string.
func compact(v []byte) json.RawMessage {
	return appendCompact(make(json.RawMessage, 0, len(v)), v)
}

// isCompact reports whether a validated JSON value has no insignificant
// whitespace.
func isCompact(v []byte) bool {
	inString := false
	for i := 0; i < len(v); i++ {
		switch c := v[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case !inString && (c == ' ' || c == '\t' || c == '\n' || c == '\r'):
			return false
		}
	}
	return true
}

func appendCompact(out, v []byte) []byte {
	inString := false
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case inString:
			switch c {
			case '\\':
				out = append(out, c, v[i+1])
				i++
				continue
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			continue
		}
		out = append(out, c)
	}
	return out
}

var aclTypes = map[string]Type{"request": Request, "response": Response, "notification": Event, "error": Error, "ack": Ack}

var samTypes = map[string]Type{"request": Request, "response": Response, "event": Event, "error": Error, "ack": Ack}

func decodeType(f Format, v []byte) (Type, *FieldError) {
	if v[0] != '"' {
		return "", &FieldError{Field: "message_type", Reason: "must be a string"}
	}
	s := stringValue(v)
	table, want := aclTypes, "request, response, notification, error, ack"
	if f == SAM {
		table, want = samTypes, "REQUEST, RESPONSE, EVENT, ERROR, ACK"
	}
	if len(s) <= len("notification") {
		if t, ok := table[asciiLower(s)]; ok {
			return t, nil
		}
	}
	return "", &FieldError{Field: "message_type", Reason: "unknown message type " + quote(s) + "; want one of " + want}
}

// asciiLower folds ASCII letters only: Unicode folding would let "AC\u212a"
// (Kelvin sign) pass for "ack".
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if c >= 'A' && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func decodeTime(v []byte) (time.Time, *FieldError) {
	switch v[0] {
	case 'n':
		return time.Time{}, nil
	case '"':
	default:
		return time.Time{}, &FieldError{Field: "timestamp", Reason: "must be a string"}
	}
	s := stringValue(v)
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, &FieldError{Field: "timestamp", Reason: "must be RFC 3339 with a time zone (e.g. 2025-11-23T10:00:00Z), got " + quote(s)}
	}
	// UTC so that equal instants compare equal and the sender's zone
	// offset cannot smuggle a distinct time.Location through.
	t = t.UTC()
	if y := t.Year(); y < 0 || y > 9999 {
		// RFC 3339 cannot write the instant back in UTC.
		return time.Time{}, &FieldError{Field: "timestamp", Reason: "year outside 0000-9999 in UTC"}
	}
	return t, nil
}

func decodePriority(field string, v []byte) (Priority, *FieldError) {
	switch v[0] {
	case 'n':
		return Medium, nil
	case '"':
	default:
		return "", &FieldError{Field: field, Reason: "must be a string"}
	}
	s := stringValue(v)
	p, ok := parsePriority(s)
	if !ok {
		return "", badPriority(field, s)
	}
	return p, nil
}

// decodeTimeout accepts a plain JSON integer only: 1.5, 5e3 and "5" are
// refused rather than rounded or coerced.
func decodeTimeout(v []byte) (int, *FieldError) {
	n, ok := decodeMillis(v, maxTimeout)
	if !ok {
		return 0, badTimeout(string(v))
	}
	return n, nil
}

// decodeTTL reads metadata.ttl_ms: how long a queued message stays worth
// delivering, 1 ms to a day.
func decodeTTL(v []byte) (int, *FieldError) {
	n, ok := decodeMillis(v, maxTTL)
	if !ok {
		return 0, &FieldError{Field: "metadata.ttl_ms", Reason: fmt.Sprintf("must be an integer from 1 to %d, got %s", maxTTL, truncate(string(v)))}
	}
	return n, nil
}

// decodeMillis reads a JSON integer of milliseconds from 1 to max, digits
// only (no fraction, exponent or sign but a refused minus).
func decodeMillis(v []byte, max int) (int, bool) {
	digits := v
	if len(digits) > 0 && digits[0] == '-' {
		digits = digits[1:]
	}
	if len(digits) == 0 || len(digits) > 8 || bytes.IndexFunc(digits, func(r rune) bool { return r < '0' || r > '9' }) >= 0 {
		return 0, false
	}
	n, err := strconv.Atoi(string(v))
	if err != nil || n < 1 || n > max {
		return 0, false
	}
	return n, true
}

func unknownField(prefix string, key []byte) *FieldError {
	segs := []string{string(appendPathKey(nil, key))}
	if prefix != "" {
		segs = []string{prefix, segs[0]}
	}
	return &FieldError{Field: joinPath(segs), Reason: "unknown field"}
}
