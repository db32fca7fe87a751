// Package envelope decodes, validates, normalises and re-encodes the
// inter-agent message envelopes the gateway relays at POST /relay/messages
// (docs/agent-messaging.md): the ACL envelope (flat, sender_id/receiver_id,
// lowercase types) and the SAM envelope (sender/recipient objects,
// correlation_id, uppercase types, error object); docs/glossary.md names both.
//
// A null receiver is a broadcast; a null receiver with a type (ACL
// receiver_type, SAM recipient.role) is a group send to every agent of that
// type (Message.GroupType).
//
// Both formats decode into one Message so that routing, RBAC, queueing and
// history need not know which one an agent speaks; Marshal writes a Message
// back in its own format, and Decode(Marshal(m)) equals m for any decoded m.
//
// Input is untrusted: Decode accepts exactly one JSON object with valid UTF-8,
// no duplicate keys at any depth, at most 64 levels of nesting and no trailing
// data, and only the keys each format defines. Every rejection is a
// *FieldError naming the JSON path of the offending field. The package is
// pure (no I/O, no global mutable state) and uses only the standard library
// and internal/jsonlex, the JSON lexical rules every reader of the gateway
// shares.
package envelope

import (
	"encoding/json"
	"time"
)

// Format is the wire format of an envelope.
type Format string

// The two envelope formats.
const (
	ACL Format = "acl" // the ACL envelope
	SAM Format = "sam" // the SAM envelope
)

// Type is the normalised message type, shared by both formats.
type Type string

// Message types. ACL "notification" and SAM "EVENT" are both Event. The SAM
// envelope has no acknowledgement type, but the relay of the agent
// communication patterns has the recipient acknowledge, so SAM "ACK" is
// accepted too.
const (
	Request  Type = "request"
	Response Type = "response"
	Event    Type = "event"
	Error    Type = "error"
	Ack      Type = "ack"
)

// Priority is a message's priority (the ACL envelope's levels).
type Priority string

// Priorities; Medium is the default when the sender states none.
const (
	Low      Priority = "low"
	Medium   Priority = "medium"
	High     Priority = "high"
	Critical Priority = "critical"
)

// Rank orders priorities for queueing: critical 0, high 1, medium 2, low 3;
// lower is served first. An unknown value ranks 4, after low, so that a
// malformed priority can never jump the queue.
func (p Priority) Rank() int {
	switch p {
	case Critical:
		return 0
	case High:
		return 1
	case Medium:
		return 2
	case Low:
		return 3
	}
	return 4
}

// Party is a sender or recipient: ACL sender_id/sender_type and
// receiver_id/receiver_type, SAM {agent_id, role}. Role is what the sender
// claims; the gateway checks it against the agent's registered type.
type Party struct {
	ID   string
	Role string
}

// ErrorInfo describes an error. SAM carries it as the "error" object; ACL
// carries only Message (the "error" string) and Code (payload.error_code when
// that is a string), so Source, Severity and Retryable are not encoded in ACL.
type ErrorInfo struct {
	Code     string
	Message  string
	Source   string
	Severity string // normalised to upper case: INFO, WARNING, ERROR, CRITICAL or FATAL
	// Retryable is nil when the sender did not say.
	Retryable *bool
}

// Fatal reports whether the error's severity is CRITICAL or FATAL, the cases
// the error propagation of the agent communication patterns routes to a
// human instead of a retry.
func (e *ErrorInfo) Fatal() bool {
	if e == nil {
		return false
	}
	sev, _ := severity(e.Severity)
	return sev == "CRITICAL" || sev == "FATAL"
}

// Message is a decoded, validated envelope of either format.
type Message struct {
	Format        Format
	ID            string    // message_id; "" until Fill when the sender omitted it
	Type          Type      // normalised type
	Timestamp     time.Time // in UTC; zero until Fill when absent
	Priority      Priority  // ACL "priority", SAM metadata.priority; Medium by default
	Sender        Party
	Recipient     *Party // nil: a broadcast, or a group send (GroupType)
	GroupType     string // a group send's recipient type (ACL receiver_type with no receiver_id, SAM recipient {"agent_id": null, "role": T}); "" otherwise
	WorkflowID    string // ACL workflow_id; "" for SAM
	TaskID        string // ACL task_id; "" for SAM
	CorrelationID string // SAM correlation_id; "" for ACL
	InReplyTo     string // ACL in_reply_to; SAM metadata.in_reply_to
	Action        string // ACL action; SAM payload.action
	Status        string // ACL status; "" for SAM
	Error         *ErrorInfo
	// Payload is the payload object, compacted but otherwise byte for byte as
	// received; nil when absent or null. For SAM it includes "action".
	Payload json.RawMessage
	// Metadata is the metadata object, compacted; nil when absent or null.
	// It includes the keys mirrored in Priority, TimeoutMS and (SAM) InReplyTo.
	Metadata  json.RawMessage
	TimeoutMS int // metadata.timeout_ms; 0 when absent
	// TTLMS is metadata.ttl_ms, 0 when absent: a queued message not handed
	// over within it from its acceptance is not delivered.
	TTLMS int
}

// FieldError is a validation failure: Field is the JSON path of the offending
// field ("sender.agent_id", "metadata.timeout_ms", "payload.tasks[0]"), or ""
// for the envelope as a whole (not an object, syntax error, trailing data).
type FieldError struct {
	Field  string
	Reason string
}

// Error returns "<field>: <reason>". Reasons quote at most 64 bytes of any
// input value.
func (e *FieldError) Error() string {
	if e.Field == "" {
		return "envelope: " + e.Reason
	}
	return e.Field + ": " + e.Reason
}

// Fill gives the message an ID (from newID) and a Timestamp (now, in UTC)
// when the sender left them out, so that every relayed and recorded message
// has both (as the ACL envelope's protocol puts it: "Every message has a
// unique ID and timestamp").
func (m *Message) Fill(now time.Time, newID func() string) {
	if m.ID == "" && newID != nil {
		m.ID = newID()
	}
	if m.Timestamp.IsZero() {
		// Round(0) drops the monotonic reading so that a filled message
		// compares equal to itself after a Marshal/Decode round trip.
		m.Timestamp = now.Round(0).UTC()
	}
}

// Key is the message's history key: ("workflow", WorkflowID) for ACL,
// ("correlation", CorrelationID) for SAM, ("", "") when it has none.
func (m *Message) Key() (kind, id string) {
	switch {
	case m.Format == ACL && m.WorkflowID != "":
		return "workflow", m.WorkflowID
	case m.Format == SAM && m.CorrelationID != "":
		return "correlation", m.CorrelationID
	}
	return "", ""
}

// gatewayErrorAction is the action of an ACL error the gateway generates: ACL
// requires an action on every type but ack, and NewError has none to offer.
const gatewayErrorAction = "gateway_error"

// NewError builds an ERROR generated by the gateway, in format f, from `from`
// to `to` (nil: broadcast), replying to inReplyTo. For ACL it belongs to
// workflowID and carries message as the "error" string, code as
// payload.error_code and action "gateway_error"; retryable and severity have
// no place in ACL and are dropped. For SAM it belongs to correlationID and
// carries the error object with source from.ID; inReplyTo goes to
// metadata.in_reply_to. The message has no ID or Timestamp until Fill.
func NewError(f Format, from Party, to *Party, inReplyTo, workflowID, correlationID, code, message string, retryable bool, severity string) *Message {
	m := &Message{Format: f, Type: Error, Priority: Medium, Sender: from, Recipient: copyParty(to), InReplyTo: inReplyTo}
	switch f {
	case ACL:
		m.WorkflowID = workflowID
		m.Action = gatewayErrorAction
		m.Error = &ErrorInfo{Code: code, Message: message}
	case SAM:
		m.CorrelationID = correlationID
		r := retryable
		m.Error = &ErrorInfo{Code: code, Message: message, Source: from.ID, Severity: upperSeverity(severity), Retryable: &r}
	}
	m.normalise()
	return m
}

// NewResponse builds a RESPONSE in format f from `from` to `to`, replying to
// inReplyTo, in workflowID (ACL) or correlationID (SAM), with the given action
// and payload (nil for none). The human in the loop pattern injects a human's
// decision this way. For SAM the action is stored in the payload, as the format
// requires.
func NewResponse(f Format, from Party, to *Party, inReplyTo, workflowID, correlationID, action string, payload json.RawMessage) *Message {
	m := &Message{Format: f, Type: Response, Priority: Medium, Sender: from, Recipient: copyParty(to),
		InReplyTo: inReplyTo, Action: action}
	if len(payload) > 0 && string(payload) != "null" {
		m.Payload = append(json.RawMessage(nil), payload...)
	}
	switch f {
	case ACL:
		m.WorkflowID = workflowID
	case SAM:
		m.CorrelationID = correlationID
	}
	m.normalise()
	return m
}

// normalise brings Payload and Metadata in line with the fields mirrored in
// them, so that a constructed message equals its own round trip. Invalid
// payloads are left alone for Marshal to report.
func (m *Message) normalise() {
	var s scanner
	if p, err := m.encodedPayload(&s); err == nil {
		m.Payload = p
	}
	if md, err := m.encodedMetadata(&s); err == nil {
		m.Metadata = md
	}
}

// upperSeverity normalises a known severity and keeps anything else as given,
// for Marshal to reject.
func upperSeverity(s string) string {
	if u, ok := severity(s); ok {
		return u
	}
	return s
}

func copyParty(p *Party) *Party {
	if p == nil {
		return nil
	}
	c := *p
	return &c
}
