package messaging

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
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

// send is one POST /relay/messages on its way through the checks.
type send struct {
	ex        *scope.Exchange // ex.Agent is the sender
	msg       *envelope.Message
	recipient *registry.Entry // nil for a broadcast or a group send
	targets   []registry.Entry
	checks    map[string]any
	conf      *conf
	// chosenID: the sender chose the message_id (the gateway did not).
	chosenID bool
	// sender is the sender's registry entry: its registered type and the
	// roles it may claim.
	sender registry.Entry
	// suspended is the suspension this message made (WAITING_FOR_HUMAN),
	// lifted again if the message is refused after all.
	suspended *mailbox.Suspension
	// escalation is where a person decides about the message's thread.
	escalation *EscalationRef
	// stored: the message is in its thread (and will not be taken back).
	stored bool
	// planVerbs are the verbs of the payload's compact SACP plan by their
	// names in the library (aliases resolved), for the policy; nil when
	// the payload carries no plan with steps.
	planVerbs []string
	// testMode: the payload asks for a dry run (ctx.test_mode); checked
	// and audited, delivered to nobody.
	testMode bool
	// thread is what the message does to its thread's Global Context.
	thread *threadPlan
}

// refusal marks an error found after the checks (the history refusing a
// repeat at the append) as a refusal of the message: audited as
// message.reject and counted as refused, like the checks' refusals.
type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// Send serves POST /relay/messages. The agent is the authenticated one (the
// route runs behind identity and the request rate limit).
func (s *Service) Send(w http.ResponseWriter, r *http.Request) {
	ex := scope.Get(r.Context())
	in := &send{ex: ex, checks: map[string]any{}}
	if err := s.accept(r, in); err != nil {
		s.reject(w, r, in, err)
		return
	}
	if in.testMode {
		s.dryRun(w, r, in)
		return
	}
	esc, err := s.suspendThread(r.Context(), in)
	if err != nil {
		s.settleContext(r.Context(), in, nil) // a handoff's lock is released
		s.reject(w, r, in, err)
		return
	}
	in.escalation = esc
	if in.msg.Type == envelope.Request {
		err = s.relay(w, r, in)
	} else {
		err = s.enqueue(w, r, in)
	}
	if !in.stored {
		// Refused or failed before it went out: nobody waits on it.
		s.unsuspend(r.Context(), in)
	}
	// A handoff that did not go through releases its thread's lock.
	s.settleContext(r.Context(), in, nil)
	if _, late := errors.AsType[*refusal](err); late {
		s.reject(w, r, in, err)
		return
	}
	s.stats.accepted.Add(1)
	if err != nil {
		httpx.Fail(w, r, err)
	}
}

// reject answers a refused envelope, audits it and counts it. A refused
// plan is answered in compact SACP's ERR shape; everything else in
// OpenAI's error shape.
func (s *Service) reject(w http.ResponseWriter, r *http.Request, in *send, err error) {
	s.stats.refused.Add(1)
	s.refuse(r.Context(), in, err)
	if p, ok := errors.AsType[*planRefusal](err); ok {
		id := ""
		if in.msg != nil {
			id = in.msg.ID
		}
		writePlanRefusal(w, r, id, p)
		return
	}
	httpx.Fail(w, r, err)
}

// accept runs every check before anything is relayed, in order: size and
// envelope, clock, sender and its type, recipient (or group) and its type,
// RBAC and policy, repeat, suspended thread, redaction, plan. Each step
// records its verdict in in.checks for the audit entry.
func (s *Service) accept(r *http.Request, in *send) error {
	for _, step := range []func(*http.Request, *send) error{
		s.readEnvelope, s.checkSender, s.resolveRecipient, s.authorize, s.checkRepeat, s.checkSuspended, s.redact, s.checkPlan, s.checkTestMode, s.checkContext,
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

// checkSender: an agent may only send as itself, and may claim no other
// type (sender_type, SAM sender.role) than the one it is registered with or
// a role it declares (agents.yaml roles): recipients and policies read the
// type to decide what a message may ask.
func (s *Service) checkSender(r *http.Request, in *send) error {
	m := in.msg
	if m.Sender.ID != in.ex.Agent.ID {
		in.checks["sender"] = "spoofed"
		return apierror.Forbidden(fmt.Sprintf("The envelope's sender %q is not the authenticated agent %q: an agent may only send as itself.", clip(m.Sender.ID), in.ex.Agent.ID))
	}
	in.sender = registry.Entry{AgentName: in.ex.Agent.ID, Type: in.ex.Agent.Type, Roles: in.ex.Agent.Roles}
	if e, ok, _ := s.reg.Lookup(r.Context(), in.ex.Agent.ID); ok {
		in.sender = e
	}
	if role := m.Sender.Role; role != "" && !in.sender.MayClaim(role) {
		in.checks["sender"] = "role_spoofed"
		e := apierror.Forbidden(fmt.Sprintf("The envelope's %s %q is not the registered type %s of agent %q%s: an agent may not claim another role.",
			senderRoleField(m), clip(role), typeName(in.sender.Type), in.ex.Agent.ID, orRoles(in.sender.Roles)))
		e.Param = senderRoleField(m)
		return e
	}
	in.checks["sender"] = "pass"
	return nil
}

// orRoles names the roles an agent declares, if any, after its type.
func orRoles(roles []string) string {
	if len(roles) == 0 {
		return ""
	}
	q := make([]string, len(roles))
	for i, r := range roles {
		q[i] = fmt.Sprintf("%q", r)
	}
	return " nor one of its roles " + strings.Join(q, ", ")
}

// typeName quotes a registered type, or says there is none.
func typeName(t string) string {
	if t == "" {
		return "(none)"
	}
	return fmt.Sprintf("%q", t)
}

func senderRoleField(m *envelope.Message) string {
	if m.Format == envelope.SAM {
		return "sender.role"
	}
	return "sender_type"
}

func recipientRoleField(m *envelope.Message) string {
	if m.Format == envelope.SAM {
		return "recipient.role"
	}
	return "receiver_type"
}

// authorize asks casbin whether the sender may send this action to the
// recipient, then the Rego hook data.gateway.messages.deny. A group send
// asks both for each agent of the type and goes to those allowed; it is
// refused only when none is.
func (s *Service) authorize(r *http.Request, in *send) error {
	if carriesPlan(in.msg.Payload) {
		// The policy sees the verbs of any plan that has steps, valid or
		// not as a message (checkPlan refuses an invalid one after it).
		if steps, err := planSteps(in.msg.Payload); err == nil {
			lib := s.library(r.Context())
			for _, st := range steps {
				if v := canonicalVerb(lib, st.verb); !slices.Contains(in.planVerbs, v) {
					in.planVerbs = append(in.planVerbs, v)
				}
			}
		}
	}
	m := in.msg
	if m.GroupType != "" {
		return s.authorizeGroup(r, in)
	}
	recipientID := ""
	if m.Recipient != nil {
		recipientID = m.Recipient.ID
	}
	az := s.authorizeSender(in, recipientID, action(m))
	in.checks["rbac"] = map[string]any{"allowed": az.Allowed, "reason": az.Reason}
	if !az.Allowed {
		return apierror.Forbidden("RBAC: " + az.Reason + ".")
	}
	dec, err := s.policy.MessagesDeny(r.Context(), s.policyInput(in, in.recipient, az))
	in.checks["policy"] = map[string]any{"deny": dec.Deny, "decision_id": dec.DecisionID, "revision": dec.Revision}
	if err != nil {
		return apierror.Upstream(http.StatusGatewayTimeout, "The messages policy did not decide in time.", err)
	}
	if dec.Deny {
		return apierror.Forbidden("Policy: " + joinReasons(dec.Reasons))
	}
	return nil
}

// authorizeSender is the RBAC verdict on the sender sending action to
// recipient ("" for a broadcast). A configured agent has its messages rules
// (casbin); an agent spawned at run time has no rules of its own: it may
// send to the agent that spawned it, and to nobody else.
func (s *Service) authorizeSender(in *send, recipient, action string) policy.Authz {
	a := in.ex.Agent
	if a.SpawnedBy == "" {
		return in.conf.rbac.AuthorizeMessage(a.ID, recipient, action)
	}
	if recipient != "" && recipient == a.SpawnedBy {
		return policy.Authz{Allowed: true, Reason: fmt.Sprintf("spawned agent %q may send to %q, which spawned it", a.ID, recipient)}
	}
	return policy.Authz{Reason: fmt.Sprintf("spawned agent %q may send only to %q, which spawned it", a.ID, a.SpawnedBy)}
}

// authorizeGroup keeps the agents of a group send that RBAC and the policy
// let the sender reach; a policy that cannot decide for one refuses the
// whole send (fail closed).
func (s *Service) authorizeGroup(r *http.Request, in *send) error {
	m := in.msg
	var (
		allowed  []registry.Entry
		refused  = map[string]any{}
		policies = map[string]any{}
		reason   string
	)
	for _, t := range in.targets {
		az := s.authorizeSender(in, t.AgentName, action(m))
		if !az.Allowed {
			refused[t.AgentName] = "RBAC: " + az.Reason
			if reason == "" {
				reason = "RBAC: " + az.Reason
			}
			continue
		}
		dec, err := s.policy.MessagesDeny(r.Context(), s.policyInput(in, &t, az))
		policies[t.AgentName] = map[string]any{"deny": dec.Deny, "decision_id": dec.DecisionID, "revision": dec.Revision}
		if err != nil {
			in.checks["rbac"] = map[string]any{"allowed": names(allowed), "refused": refused}
			in.checks["policy"] = policies
			return apierror.Upstream(http.StatusGatewayTimeout, "The messages policy did not decide in time.", err)
		}
		if dec.Deny {
			refused[t.AgentName] = "Policy: " + joinReasons(dec.Reasons)
			if reason == "" {
				reason = "Policy: " + joinReasons(dec.Reasons)
			}
			continue
		}
		allowed = append(allowed, t)
	}
	in.checks["rbac"] = map[string]any{"allowed": names(allowed), "refused": refused}
	in.checks["policy"] = policies
	if len(allowed) == 0 {
		return apierror.Forbidden(fmt.Sprintf("None of the %d agents of type %q may receive this message from %s (%s).",
			len(in.targets), m.GroupType, in.ex.Agent.ID, trimDot(reason)))
	}
	in.targets = allowed
	return nil
}

func trimDot(s string) string {
	if len(s) > 0 && s[len(s)-1] == '.' {
		return s[:len(s)-1]
	}
	return s
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
// delivered twice (409 tells it the first one arrived). It is the early,
// cheap answer; the history's append decides (repeatError), atomically, so
// that two identical messages racing on two replicas cannot both pass.
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
		return repeatError(m, nil)
	}
	return nil
}

// repeatError is the 409 of a message_id already in the thread.
func repeatError(m *envelope.Message, cause error) error {
	kind, _ := m.Key()
	return &apierror.Error{Status: http.StatusConflict, Type: apierror.TypeInvalidRequest, Code: "duplicate_message", Param: "message_id",
		Message: fmt.Sprintf("Message %q was already accepted in this %s: it is not sent again.", m.ID, kind), Err: cause}
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
// spawned agents), every agent that receives messages for a broadcast, or
// every agent of the type for a group send; the sender is never its own
// recipient. A receiver_type given beside a receiver id must be that
// agent's registered type.
func (s *Service) resolveRecipient(r *http.Request, in *send) error {
	ctx := r.Context()
	m := in.msg
	if m.Recipient == nil {
		all, err := s.reg.Entries(ctx)
		if err != nil && len(all) == 0 {
			return errorf("registry: %w", err)
		}
		for _, e := range all {
			if e.Endpoint != "" && e.AgentName != in.ex.Agent.ID && (m.GroupType == "" || e.Type == m.GroupType) {
				in.targets = append(in.targets, e)
			}
		}
		if m.GroupType != "" && len(in.targets) == 0 {
			// Unlike a broadcast, a group send names whom it is for: that
			// nobody of the type receives it is the sender's to know.
			in.checks["recipient"] = "no_group_members"
			return &apierror.Error{Status: http.StatusNotFound, Type: apierror.TypeInvalidRequest, Code: "recipient_not_found", Param: recipientRoleField(m),
				Message: fmt.Sprintf("No agent of type %q other than the sender receives messages: the group send reaches no one.", clip(m.GroupType))}
		}
		if m.GroupType != "" {
			in.checks["recipient"] = map[string]any{"group": m.GroupType, "members": names(in.targets)}
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
	if role := m.Recipient.Role; role != "" && !e.MayClaim(role) {
		in.checks["recipient"] = "type_mismatch"
		fe := apierror.Forbidden(fmt.Sprintf("The envelope's %s %q is not the registered type %s of agent %q%s.",
			recipientRoleField(m), clip(role), typeName(e.Type), e.AgentName, orRoles(e.Roles)))
		fe.Param = recipientRoleField(m)
		return fe
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

// policyInput is data.gateway.messages.deny's input for one recipient (nil
// for a broadcast); a group send asks once per agent of the type, with
// message.group naming the type.
func (s *Service) policyInput(in *send, to *registry.Entry, az policy.Authz) map[string]any {
	m := in.msg
	msg := map[string]any{
		"format": string(m.Format), "id": m.ID, "type": string(m.Type), "priority": string(m.Priority),
		"sender": m.Sender.ID, "recipient": nil, "group": nil, "action": action(m),
		"workflow_id": m.WorkflowID, "correlation_id": m.CorrelationID, "task_id": m.TaskID, "in_reply_to": m.InReplyTo,
		"timeout_ms": int64(m.TimeoutMS), "payload_bytes": int64(len(m.Payload)), "payload": nil,
		"plan_verbs": policy.StringsInput(in.planVerbs),
	}
	if m.Recipient != nil {
		msg["recipient"] = m.Recipient.ID
	}
	if m.GroupType != "" {
		msg["group"] = m.GroupType
		msg["recipient"] = to.AgentName
	}
	if len(m.Payload) > 0 {
		var p any
		if json.Unmarshal(m.Payload, &p) == nil {
			msg["payload"] = p
		}
	}
	var recipient any
	if to != nil {
		recipient = entryInput(*to)
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
func summary(m *envelope.Message, route string) *audit.Object {
	sum := &audit.Object{}
	addSummary(sum, m, route)
	return sum
}

// addSummary adds an envelope's members to sum.
func addSummary(sum *audit.Object, m *envelope.Message, route string) {
	sum.Str("route", route)
	sum.Str("format", string(m.Format))
	sum.Str("message_id", m.ID)
	sum.Str("message_type", string(m.Type))
	sum.Any("action", action(m))
	sum.Str("sender", m.Sender.ID)
	sum.Str("priority", string(m.Priority))
	if m.Recipient != nil {
		sum.Any("recipient", m.Recipient.ID)
	} else {
		sum.Any("recipient", nil)
	}
	if m.GroupType != "" {
		sum.Any("group", m.GroupType)
	}
	for k, v := range map[string]string{"workflow_id": m.WorkflowID, "correlation_id": m.CorrelationID, "task_id": m.TaskID, "in_reply_to": m.InReplyTo} {
		if v != "" {
			sum.Str(k, v)
		}
	}
	if m.Error != nil {
		sum.Any("error_code", m.Error.Code)
		sum.Any("severity", m.Error.Severity)
		if m.Error.Retryable != nil {
			sum.Any("retryable", *m.Error.Retryable)
		}
	}
}

// refuse audits a refused envelope (message.reject). The refusal is what
// the client gets either way, so a failed write is only logged.
func (s *Service) refuse(ctx context.Context, in *send, err error) {
	e := apierror.From(err)
	sum := audit.Members("route", Route, "status", e.Status, "error_code", e.Code, "reason", e.Message, "checks", in.checks)
	if in.msg != nil {
		addSummary(sum, in.msg, Route)
	}
	_ = s.audit.Write(ctx, s.record(in.ex, KindMessageReject, in.ex.PayloadSHA256, sum))
}

// record builds an audit record for the request's exchange.
func (s *Service) record(ex *scope.Exchange, kind, payloadSHA string, sum *audit.Object) audit.Record {
	rec := audit.Record{Kind: kind, PayloadSHA256: payloadSHA, Object: sum}
	if ex != nil {
		rec.SessionID, rec.RequestID = ex.SessionID, ex.RequestID
		if ex.Agent != nil {
			rec.AgentID = ex.Agent.ID
		}
		if ex.CorrelationID != "" {
			sum.Any("http_correlation_id", ex.CorrelationID)
		}
	}
	return rec
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
