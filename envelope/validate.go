package envelope

import (
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Limits on field values. Ids and actions end up in routing keys, RBAC
// requests, Redis keys and audit records, hence the small alphabet.
const (
	maxID      = 128  // message, agent, workflow, task and correlation ids
	maxAction  = 128  // ACL action, SAM payload.action
	maxRole    = 64   // sender_type, receiver_type, role
	maxStatus  = 64   // ACL status
	maxCode    = 128  // error code
	maxSource  = 128  // SAM error.source
	maxMessage = 4096 // error message
	maxTimeout = 3_600_000
	// maxTTL bounds metadata.ttl_ms: a day.
	maxTTL  = 86_400_000
	maxEcho = 64 // bytes of an input value an error may quote
)

// names maps the normalised fields to each format's JSON paths, so that one
// validation routine reports errors in the sender's own vocabulary.
type names struct {
	priority, senderID, senderRole, recipient, recipientID, recipientRole string
	inReplyTo, action, errorCode, errorMessage                            string
}

var aclNames = names{
	priority: "priority", senderID: "sender_id", senderRole: "sender_type",
	recipient: "receiver_id", recipientID: "receiver_id", recipientRole: "receiver_type",
	inReplyTo: "in_reply_to", action: "action", errorCode: "payload.error_code", errorMessage: "error",
}

var samNames = names{
	priority: "metadata.priority", senderID: "sender.agent_id", senderRole: "sender.role",
	recipient: "recipient", recipientID: "recipient.agent_id", recipientRole: "recipient.role",
	inReplyTo: "metadata.in_reply_to", action: "payload.action", errorCode: "error.code", errorMessage: "error.message",
}

// validate checks the normalised fields; Decode runs it after extracting the
// fields and Marshal before encoding, so that the gateway never emits an
// envelope it would refuse to accept.
func (m *Message) validate() *FieldError {
	var n *names
	switch m.Format {
	case ACL:
		n = &aclNames
	case SAM:
		n = &samNames
	default:
		return &FieldError{Field: "format", Reason: "must be " + string(ACL) + " or " + string(SAM)}
	}
	if m.ID != "" {
		if fe := checkID("message_id", m.ID); fe != nil {
			return fe
		}
	}
	switch m.Type {
	case Request, Response, Event, Error, Ack:
	default:
		return &FieldError{Field: "message_type", Reason: "unknown message type " + quote(string(m.Type))}
	}
	if y := m.Timestamp.Year(); !m.Timestamp.IsZero() && (y < 0 || y > 9999) {
		return &FieldError{Field: "timestamp", Reason: "year outside 0000-9999"}
	}
	if m.Priority.Rank() > Low.Rank() {
		return badPriority(n.priority, string(m.Priority))
	}
	if fe := checkID(n.senderID, m.Sender.ID); fe != nil {
		return fe
	}
	if fe := checkText(n.senderRole, m.Sender.Role, maxRole); fe != nil {
		return fe
	}
	if m.Recipient != nil {
		if fe := checkID(n.recipientID, m.Recipient.ID); fe != nil {
			return fe
		}
		if fe := checkText(n.recipientRole, m.Recipient.Role, maxRole); fe != nil {
			return fe
		}
		if m.GroupType != "" {
			return &FieldError{Field: n.recipientID, Reason: "a group send (" + n.recipientRole + " without an id) has no " + n.recipientID}
		}
	}
	if fe := checkText(n.recipientRole, m.GroupType, maxRole); fe != nil {
		return fe
	}
	if fe := m.validateThread(); fe != nil {
		return fe
	}
	if m.InReplyTo != "" {
		if fe := checkID(n.inReplyTo, m.InReplyTo); fe != nil {
			return fe
		}
	}
	if m.Action != "" {
		if fe := checkAction(n.action, m.Action); fe != nil {
			return fe
		}
	}
	if m.TimeoutMS != 0 && (m.TimeoutMS < 1 || m.TimeoutMS > maxTimeout) {
		return badTimeout(strconv.Itoa(m.TimeoutMS))
	}
	if m.Error != nil {
		if fe := m.validateError(n); fe != nil {
			return fe
		}
	}
	return m.validateRequired(n)
}

// validateThread checks the fields that exist in only one of the formats.
func (m *Message) validateThread() *FieldError {
	if m.Format == SAM {
		switch {
		case m.WorkflowID != "":
			return notInFormat("workflow_id", SAM)
		case m.TaskID != "":
			return notInFormat("task_id", SAM)
		case m.Status != "":
			return notInFormat("status", SAM)
		}
		if m.CorrelationID != "" {
			return checkID("correlation_id", m.CorrelationID)
		}
		return nil
	}
	if m.CorrelationID != "" {
		return notInFormat("correlation_id", ACL)
	}
	if m.WorkflowID != "" {
		if fe := checkID("workflow_id", m.WorkflowID); fe != nil {
			return fe
		}
	}
	if m.TaskID != "" {
		if fe := checkID("task_id", m.TaskID); fe != nil {
			return fe
		}
	}
	return checkText("status", m.Status, maxStatus)
}

func (m *Message) validateError(n *names) *FieldError {
	e := m.Error
	if m.Format == ACL {
		if e.Message == "" {
			return &FieldError{Field: n.errorMessage, Reason: "must be a non-empty string"}
		}
		if fe := checkText(n.errorMessage, e.Message, maxMessage); fe != nil {
			return fe
		}
		return checkText(n.errorCode, e.Code, maxCode)
	}
	if e.Code == "" {
		return &FieldError{Field: n.errorCode, Reason: "required: a non-empty string"}
	}
	if fe := checkText(n.errorCode, e.Code, maxCode); fe != nil {
		return fe
	}
	if e.Message == "" {
		return &FieldError{Field: n.errorMessage, Reason: "required: a non-empty string"}
	}
	if fe := checkText(n.errorMessage, e.Message, maxMessage); fe != nil {
		return fe
	}
	if fe := checkText("error.source", e.Source, maxSource); fe != nil {
		return fe
	}
	if e.Severity != "" {
		if _, ok := severity(e.Severity); !ok {
			return badSeverity(e.Severity)
		}
	}
	return nil
}

// validateRequired enforces what each message type needs to be routed.
func (m *Message) validateRequired(n *names) *FieldError {
	if m.Recipient == nil && (m.Type == Request || m.Type == Response) {
		return &FieldError{Field: n.recipient, Reason: "required for a " + string(m.Type) + " (only notifications and events may be broadcast or sent to a group)"}
	}
	if m.Format == ACL && m.InReplyTo == "" && (m.Type == Response || m.Type == Ack) {
		return &FieldError{Field: n.inReplyTo, Reason: "required for a " + string(m.Type)}
	}
	if m.Type == Error && m.Error == nil {
		return &FieldError{Field: "error", Reason: "required for an error message"}
	}
	if m.Action == "" {
		switch {
		case m.Format == ACL && m.Type != Ack:
			return &FieldError{Field: n.action, Reason: "required for a " + aclTypeName(m.Type)}
		case m.Format == SAM && (m.Type == Request || m.Type == Event):
			return &FieldError{Field: n.action, Reason: "required for " + samTypeName(m.Type)}
		}
	}
	return nil
}

// validID reports whether s is 1-128 bytes of [A-Za-z0-9._:@-].
func validID(s string) bool {
	if len(s) == 0 || len(s) > maxID {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == ':' || c == '@' || c == '-') {
			return false
		}
	}
	return true
}

func checkID(field, s string) *FieldError {
	if validID(s) {
		return nil
	}
	if s == "" {
		return &FieldError{Field: field, Reason: "must not be empty"}
	}
	return &FieldError{Field: field, Reason: fmt.Sprintf("must be 1-%d characters of [A-Za-z0-9._:@-], got %s", maxID, quote(s))}
}

// checkAction allows the id alphabet minus '@': actions become RBAC objects
// ("send:<action>"), and a narrow alphabet keeps them from being read as
// patterns or principals.
func checkAction(field, s string) *FieldError {
	ok := len(s) > 0 && len(s) <= maxAction
	for i := 0; ok && i < len(s); i++ {
		c := s[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			c == '.' || c == '_' || c == ':' || c == '-'
	}
	if ok {
		return nil
	}
	if s == "" {
		return &FieldError{Field: field, Reason: "must not be empty"}
	}
	return &FieldError{Field: field, Reason: fmt.Sprintf("must be 1-%d characters of [A-Za-z0-9._:-], got %s", maxAction, quote(s))}
}

func checkText(field, s string, limit int) *FieldError {
	if len(s) > limit {
		return &FieldError{Field: field, Reason: fmt.Sprintf("longer than %d bytes", limit)}
	}
	return nil
}

func parsePriority(s string) (Priority, bool) {
	switch p := Priority(s); p {
	case Low, Medium, High, Critical:
		return p, true
	}
	return "", false
}

func badPriority(field, s string) *FieldError {
	return &FieldError{Field: field, Reason: "must be one of low, medium, high, critical, got " + quote(s)}
}

func badTimeout(s string) *FieldError {
	return &FieldError{Field: "metadata.timeout_ms", Reason: fmt.Sprintf("must be an integer from 1 to %d, got %s", maxTimeout, truncate(s))}
}

// severity normalises a SAM error severity to upper case.
func severity(s string) (string, bool) {
	b := []byte(s)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - ('a' - 'A')
		}
	}
	u := string(b)
	switch u {
	case "INFO", "WARNING", "ERROR", "CRITICAL", "FATAL":
		return u, true
	}
	return "", false
}

func badSeverity(s string) *FieldError {
	return &FieldError{Field: "error.severity", Reason: "must be one of INFO, WARNING, ERROR, CRITICAL, FATAL, got " + quote(s)}
}

func notInFormat(field string, f Format) *FieldError {
	return &FieldError{Field: field, Reason: "not part of an " + strings.ToUpper(string(f)) + " envelope"}
}

// cut shortens s to at most maxEcho bytes on a rune boundary, so that errors
// never echo much of an attacker's input.
func cut(s string) (string, bool) {
	if len(s) <= maxEcho {
		return s, false
	}
	n := maxEcho
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n], true
}

func truncate(s string) string {
	c, cutOff := cut(s)
	if cutOff {
		return c + "..."
	}
	return c
}

func quote(s string) string {
	c, cutOff := cut(s)
	q := strconv.Quote(c)
	if cutOff {
		q += "..."
	}
	return q
}
