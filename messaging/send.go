package messaging

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/envelope"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/mailbox"
	"github.com/sacpgw/gateway/policy"
	"github.com/sacpgw/gateway/registry"
)

// send is one POST /v1/messages on its way through the checks.
type send struct {
	ex        *scope.Exchange // ex.Agent is the sender
	msg       *envelope.Message
	recipient *registry.Entry // nil for a broadcast
	targets   []registry.Entry
	checks    map[string]any
	conf      *conf
	// chosenID: the sender chose the message_id (the gateway did not).
	chosenID bool
}

// Send serves POST /v1/messages. The agent is the authenticated one (the
// route runs behind identity and the request rate limit).
func (s *Service) Send(w http.ResponseWriter, r *http.Request) {
	ex := scope.Get(r.Context())
	in := &send{ex: ex, checks: map[string]any{}}
	if err := s.accept(r, in); err != nil {
		s.stats.refused.Add(1)
		s.refuse(r.Context(), in, err)
		httpx.Fail(w, r, err)
		return
	}
	s.stats.accepted.Add(1)
	var err error
	if in.msg.Type == envelope.Request {
		err = s.relay(w, r, in)
	} else {
		err = s.enqueue(w, r, in)
	}
	if err != nil {
		httpx.Fail(w, r, err)
	}
}

// accept runs every check before anything is relayed, in order: size and
// envelope, clock, sender, recipient, RBAC and policy, repeat, redaction.
// Each step records its verdict in in.checks for the audit entry.
func (s *Service) accept(r *http.Request, in *send) error {
	for _, step := range []func(*http.Request, *send) error{
		s.readEnvelope, s.checkSender, s.resolveRecipient, s.authorize, s.checkRepeat, s.redact,
	} {
		if err := step(r, in); err != nil {
			return err
		}
	}
	return nil
}

// readEnvelope reads the body within the agent's max_request_size, decodes
// the envelope, fills in its id and timestamp, and checks the clock.
func (s *Service) readEnvelope(r *http.Request, in *send) error {
	raw, err := httpx.ReadLimited(r, int64(in.ex.Agent.MaxRequestSize))
	if err != nil {
		return err
	}
	in.ex.PayloadSHA256 = sha256Hex(raw)
	m, err := envelope.Decode(raw)
	if err != nil {
		var fe *envelope.FieldError
		if errors.As(err, &fe) {
			return apierror.BadRequest(fe.Field, "Invalid envelope: %s", fe.Error())
		}
		return apierror.BadRequest("", "Invalid envelope: %v", err)
	}
	now := s.now().UTC()
	in.chosenID = m.ID != ""
	m.Fill(now, newID)
	in.msg = m
	in.conf = s.conf.Load()
	if skew := in.conf.cfg.Gateway.Messaging.MaxClockSkew.D(); m.Timestamp.Sub(now) > skew || now.Sub(m.Timestamp) > skew {
		return apierror.BadRequest("timestamp", "Invalid envelope: timestamp %s is more than %s away from the gateway's clock.", m.Timestamp.Format(time.RFC3339), skew)
	}
	return nil
}

// checkSender: an agent may only send as itself.
func (s *Service) checkSender(_ *http.Request, in *send) error {
	if in.msg.Sender.ID != in.ex.Agent.ID {
		in.checks["sender"] = "spoofed"
		return apierror.Forbidden(fmt.Sprintf("The envelope's sender %q is not the authenticated agent %q: an agent may only send as itself.", clip(in.msg.Sender.ID), in.ex.Agent.ID))
	}
	in.checks["sender"] = "pass"
	return nil
}

// authorize asks casbin whether the sender may send this action to the
// recipient, then the Rego hook data.gateway.messages.deny.
func (s *Service) authorize(r *http.Request, in *send) error {
	m := in.msg
	recipientID := ""
	if m.Recipient != nil {
		recipientID = m.Recipient.ID
	}
	az := in.conf.rbac.AuthorizeMessage(in.ex.Agent.ID, recipientID, action(m))
	in.checks["rbac"] = map[string]any{"allowed": az.Allowed, "reason": az.Reason}
	if !az.Allowed {
		return apierror.Forbidden("RBAC: " + az.Reason + ".")
	}
	dec, err := s.policy.MessagesDeny(r.Context(), s.policyInput(in, az))
	in.checks["policy"] = map[string]any{"deny": dec.Deny, "decision_id": dec.DecisionID, "revision": dec.Revision}
	if err != nil {
		return apierror.Upstream(http.StatusGatewayTimeout, "The messages policy did not decide in time.", err)
	}
	if dec.Deny {
		return apierror.Forbidden("Policy: " + joinReasons(dec.Reasons))
	}
	return nil
}

// redact masks the envelope (protocol.redaction.messages), or refuses it
// when a blocking detector matched.
func (s *Service) redact(_ *http.Request, in *send) error {
	red := in.conf.red
	if red == nil {
		in.checks["redaction"] = "not_configured"
		return nil
	}
	counts, blocked, err := redactEnvelope(red, in.msg)
	switch {
	case err != nil:
		return apierror.BadRequest("payload", "The payload could not be redacted: %v.", err)
	case blocked != "":
		in.checks["redaction"] = map[string]any{"verdict": "blocked", "detector": blocked}
		return blockedMessage(blocked)
	}
	in.checks["redaction"] = map[string]any{"verdict": "pass", "counts": counts}
	return nil
}

// checkRepeat refuses a message_id its sender already used in the thread:
// a client retrying a POST whose answer it lost must not have the message
// delivered twice (409 tells it the first one arrived).
func (s *Service) checkRepeat(r *http.Request, in *send) error {
	m := in.msg
	if !in.chosenID {
		return nil
	}
	ctx := r.Context()
	kind, id := m.Key()
	if id == "" {
		return nil
	}
	seen, err := s.history.Seen(ctx, kind, id, m.Sender.ID, m.ID)
	if err != nil {
		// The history being unreachable must not stop traffic: the
		// append after the audit will tell.
		s.log.Warn("message history unavailable: repeat check skipped", "message_id", m.ID, "error", err.Error())
		return nil
	}
	if seen {
		in.checks["repeat"] = "seen"
		return &apierror.Error{Status: http.StatusConflict, Type: apierror.TypeInvalidRequest, Code: "duplicate_message", Param: "message_id",
			Message: fmt.Sprintf("Message %q was already accepted in this %s: it is not sent again.", m.ID, kind)}
	}
	return nil
}

// action is what RBAC and the history call the message's action; an ACK
// carries none and is authorized as "ack".
func action(m *envelope.Message) string {
	if m.Action != "" {
		return m.Action
	}
	return string(m.Type)
}

// resolveRecipient finds the recipient in the registry (configured or
// spawned agents), or every agent that receives messages for a broadcast.
func (s *Service) resolveRecipient(r *http.Request, in *send) error {
	ctx := r.Context()
	m := in.msg
	if m.Recipient == nil {
		all, err := s.reg.Entries(ctx)
		if err != nil && len(all) == 0 {
			return errorf("registry: %w", err)
		}
		for _, e := range all {
			if e.Endpoint != "" && e.AgentName != in.ex.Agent.ID {
				in.targets = append(in.targets, e)
			}
		}
		return nil
	}
	e, ok, err := s.reg.Lookup(ctx, m.Recipient.ID)
	if !ok && err != nil {
		return errorf("registry: %w", err)
	}
	if !ok {
		in.checks["recipient"] = "unknown"
		return &apierror.Error{Status: http.StatusNotFound, Type: apierror.TypeInvalidRequest, Code: "recipient_not_found", Param: recipientField(m),
			Message: fmt.Sprintf("No agent %q is registered: the message has no recipient.", clip(m.Recipient.ID))}
	}
	if e.Endpoint == "" {
		in.checks["recipient"] = "no_endpoint"
		return &apierror.Error{Status: http.StatusUnprocessableEntity, Type: apierror.TypeInvalidRequest, Code: "recipient_unreachable", Param: recipientField(m),
			Message: fmt.Sprintf("Agent %q has no endpoint in agents.yaml: it does not receive messages.", e.AgentName)}
	}
	in.checks["recipient"] = "pass"
	in.recipient = &e
	in.targets = []registry.Entry{e}
	return nil
}

func recipientField(m *envelope.Message) string {
	if m.Format == envelope.SAM {
		return "recipient.agent_id"
	}
	return "receiver_id"
}

// policyInput is data.gateway.messages.deny's input.
func (s *Service) policyInput(in *send, az policy.Authz) map[string]any {
	m := in.msg
	msg := map[string]any{
		"format": string(m.Format), "id": m.ID, "type": string(m.Type), "priority": string(m.Priority),
		"sender": m.Sender.ID, "recipient": nil, "action": action(m),
		"workflow_id": m.WorkflowID, "correlation_id": m.CorrelationID, "task_id": m.TaskID, "in_reply_to": m.InReplyTo,
		"timeout_ms": int64(m.TimeoutMS), "payload_bytes": int64(len(m.Payload)), "payload": nil,
	}
	if m.Recipient != nil {
		msg["recipient"] = m.Recipient.ID
	}
	if len(m.Payload) > 0 {
		var p any
		if json.Unmarshal(m.Payload, &p) == nil {
			msg["payload"] = p
		}
	}
	var recipient any
	if in.recipient != nil {
		recipient = entryInput(*in.recipient)
	}
	agent := in.conf.agentIn[in.ex.Agent.ID]
	if agent == nil {
		agent = policy.AgentInput(in.ex.Agent)
	}
	return map[string]any{"agent": agent, "message": msg, "recipient": recipient, "authz": policy.AuthzInput(az)}
}

func entryInput(e registry.Entry) map[string]any {
	return map[string]any{
		"id": e.AgentName, "type": e.Type, "supported_verbs": policy.StringsInput(e.SupportedVerbs),
		"supported_tools": policy.StringsInput(e.SupportedTools), "tags": policy.StringsInput(e.Tags), "spawned": e.Spawned,
	}
}

// summary is the audit summary of an envelope.
func summary(m *envelope.Message, route string) map[string]any {
	sum := map[string]any{
		"route": route, "format": string(m.Format), "message_id": m.ID, "message_type": string(m.Type),
		"action": action(m), "sender": m.Sender.ID, "priority": string(m.Priority),
	}
	if m.Recipient != nil {
		sum["recipient"] = m.Recipient.ID
	} else {
		sum["recipient"] = nil
	}
	for k, v := range map[string]string{"workflow_id": m.WorkflowID, "correlation_id": m.CorrelationID, "task_id": m.TaskID, "in_reply_to": m.InReplyTo} {
		if v != "" {
			sum[k] = v
		}
	}
	if m.Error != nil {
		sum["error_code"] = m.Error.Code
		sum["severity"] = m.Error.Severity
		if m.Error.Retryable != nil {
			sum["retryable"] = *m.Error.Retryable
		}
	}
	return sum
}

// refuse audits a refused envelope (message.reject). The refusal is what
// the client gets either way, so a failed write is only logged.
func (s *Service) refuse(ctx context.Context, in *send, err error) {
	e := apierror.From(err)
	sum := map[string]any{"route": "/v1/messages", "status": e.Status, "error_code": e.Code, "reason": e.Message, "checks": in.checks}
	if in.msg != nil {
		for k, v := range summary(in.msg, "/v1/messages") {
			sum[k] = v
		}
	}
	_ = s.audit.Write(ctx, s.record(in.ex, KindMessageReject, in.ex.PayloadSHA256, sum))
}

// record builds an audit record for the request's exchange.
func (s *Service) record(ex *scope.Exchange, kind, payloadSHA string, sum map[string]any) audit.Record {
	rec := audit.Record{Kind: kind, PayloadSHA256: payloadSHA, Summary: sum}
	if ex != nil {
		rec.SessionID, rec.RequestID = ex.SessionID, ex.RequestID
		if ex.Agent != nil {
			rec.AgentID = ex.Agent.ID
		}
		if ex.CorrelationID != "" {
			sum["http_correlation_id"] = ex.CorrelationID
		}
	}
	return rec
}

// admit audits the accepted envelope and appends it to the history: the
// message exists for the gateway only once both are done.
//
// The message is stored in its thread first: nothing is audited as
// accepted that was not stored (a history that is down is a 503
// state_unavailable with Retry-After, and no message.request entry). When
// a later step refuses it (the audit write here, the queue in enqueue),
// the returned retract takes it back out of the thread, so that the
// sender's retry of the same message_id is not refused as a repeat of a
// message that never went out.
func (s *Service) admit(ctx context.Context, in *send, relayed []byte) (retract func(), err error) {
	e, threaded := s.entryOf(in.msg, relayed, names(in.targets), "agent", in.ex.PayloadSHA256)
	if threaded {
		if err := s.store(ctx, e); err != nil {
			return nil, err
		}
	}
	retract = func() {
		if !threaded {
			return
		}
		// Even when the client has left: the thread must not keep it.
		if err := s.history.Retract(context.WithoutCancel(ctx), e); err != nil {
			s.log.Error("refused message left in its thread: a retry of it will be refused as a repeat",
				"message_id", e.MessageID, "error", err.Error())
		}
	}
	if err := s.audit.Write(ctx, s.admitted(in, relayed)); err != nil {
		retract()
		return nil, err
	}
	return retract, nil
}

// admitted is the message.request entry of an accepted envelope.
func (s *Service) admitted(in *send, relayed []byte) audit.Record {
	sum := summary(in.msg, "/v1/messages")
	sum["checks"] = in.checks
	sum["relayed_sha256"] = sha256Hex(relayed)
	if in.msg.Recipient == nil {
		sum["broadcast_to"] = names(in.targets)
	}
	return s.record(in.ex, KindMessage, in.ex.PayloadSHA256, sum)
}

// remember appends an envelope to the history of its workflow or
// correlation (a message with neither has no thread to list it under).
func (s *Service) remember(ctx context.Context, m *envelope.Message, relayed []byte, recipients []string, origin, payloadSHA string) error {
	e, threaded := s.entryOf(m, relayed, recipients, origin, payloadSHA)
	if !threaded {
		return nil
	}
	return s.store(ctx, e)
}

// entryOf is the history entry of an envelope, and whether it has a
// thread to be listed under.
func (s *Service) entryOf(m *envelope.Message, relayed []byte, recipients []string, origin, payloadSHA string) (mailbox.Entry, bool) {
	if m.WorkflowID == "" && m.CorrelationID == "" {
		return mailbox.Entry{}, false
	}
	return mailbox.Entry{
		MessageID: m.ID, Type: string(m.Type), Format: string(m.Format), Sender: m.Sender.ID, Recipients: recipients,
		Broadcast: m.Recipient == nil, Action: action(m), WorkflowID: m.WorkflowID, CorrelationID: m.CorrelationID,
		InReplyTo: m.InReplyTo, Origin: origin, At: s.now().UTC(), PayloadSHA256: payloadSHA, Envelope: relayed,
	}, true
}

// store appends e to its threads.
func (s *Service) store(ctx context.Context, e mailbox.Entry) error {
	if err := s.history.Append(ctx, e); err != nil {
		if errors.Is(err, mailbox.ErrFull) {
			return &apierror.Error{Status: http.StatusServiceUnavailable, Type: apierror.TypeServer, Code: "history_full",
				Message: "This workflow's message history is full; start a new workflow.", Err: err}
		}
		return errorf("history: %w", err)
	}
	return nil
}

func names(es []registry.Entry) []string {
	out := make([]string, 0, len(es))
	for _, e := range es {
		out = append(out, e.AgentName)
	}
	return out
}

// enqueue queues a non-REQUEST envelope for each target and answers 202.
func (s *Service) enqueue(w http.ResponseWriter, r *http.Request, in *send) error {
	ctx := r.Context()
	relayed, err := in.msg.Marshal()
	if err != nil {
		return errorf("encode %s: %w", in.msg.ID, err)
	}
	retract, err := s.admit(ctx, in, relayed)
	if err != nil {
		return err
	}
	queued := make([]string, 0, len(in.targets))
	for _, t := range in.targets {
		d := mailbox.Delivery{MessageID: in.msg.ID, Sender: in.msg.Sender.ID, Recipient: t.AgentName,
			Priority: in.msg.Priority.Rank(), Body: relayed, EnqueuedAt: s.now().UTC()}
		if _, err := s.queue.Push(ctx, d); err != nil {
			s.log.Error("message not queued", "message_id", in.msg.ID, "recipient", t.AgentName, "error", err.Error())
			// Refused: the sender retries it, and recipients it reached
			// already get it twice (they dedupe by message_id), which
			// beats a message that never reaches the others.
			retract()
			_ = s.audit.Write(ctx, s.record(in.ex, KindMessageDelivery, "", map[string]any{
				"message_id": in.msg.ID, "recipient": t.AgentName, "status": "not_queued", "reason": err.Error(), "queued": queued}))
			if errors.Is(err, mailbox.ErrFull) {
				return &apierror.Error{Status: http.StatusServiceUnavailable, Type: apierror.TypeServer, Code: "queue_full",
					Message: fmt.Sprintf("The message queue is full: %d of %d recipients were queued. Retry later.", len(queued), len(in.targets)),
					Header:  http.Header{"Retry-After": {"1"}}, Err: err}
			}
			return errorf("queue %s: %w", in.msg.ID, err)
		}
		queued = append(queued, t.AgentName)
	}
	// Escalated once it is accepted: a refused message opens no review
	// its sender's retry would open again.
	esc := s.maybeEscalate(ctx, in.msg, relayed)
	status := "queued"
	if len(in.targets) == 0 {
		// A broadcast nobody receives: accepted and recorded, handed to no one.
		status = "no_recipients"
	}
	body := map[string]any{"status": status, "message_id": in.msg.ID, "recipients": queued}
	if esc != nil {
		body["escalation"] = esc
	}
	httpx.WriteJSON(w, r, http.StatusAccepted, body)
	return nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "..."
	}
	return s
}

func joinReasons(rs []string) string {
	out := ""
	for i, r := range rs {
		if i > 0 {
			out += "; "
		}
		out += r
	}
	return out + "."
}
