package messaging

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/envelope"
	"github.com/sacpgw/gateway/internal/egress"
	"github.com/sacpgw/gateway/internal/escalation"
	"github.com/sacpgw/gateway/mailbox"
)

// KindMessageEscalation: a message handed to a person (the human in the
// loop of the agent communication patterns; docs/agent-messaging.md, Errors
// and the human in the loop).
const KindMessageEscalation = "message.escalation"

// EscalationRef tells the client where a person now decides.
type EscalationRef struct {
	RequestID      string `json:"request_id"`
	HumanReviewURL string `json:"human_review_url,omitempty"`
	Reason         string `json:"reason"`
}

// maybeEscalate opens an escalation for an ERROR that is fatal, not retryable,
// or the max_retry_attempts-th ERROR of its sender in the thread (the error
// propagation of the agent communication patterns: "if retry_limit not reached,
// re-instantiate; if fatal, route to human-in-the-loop"). relayed is the
// envelope as recorded; the message has been admitted already. A failure to
// escalate is logged and audited as missing, never fails the message itself.
func (s *Service) maybeEscalate(ctx context.Context, m *envelope.Message, relayed []byte) *EscalationRef {
	if m.Type != envelope.Error {
		return nil
	}
	var reason string
	switch {
	case m.Error != nil && m.Error.Fatal():
		reason = fmt.Sprintf("%s reported a %s error %s: %s", m.Sender.ID, strings.ToUpper(m.Error.Severity), m.Error.Code, clipN(m.Error.Message, 200))
	case m.Error != nil && m.Error.Retryable != nil && !*m.Error.Retryable:
		reason = fmt.Sprintf("%s reported error %s, which is not retryable: %s", m.Sender.ID, m.Error.Code, clipN(m.Error.Message, 200))
	default:
		attempts := s.conf.Load().attempts
		n := s.countErrors(ctx, m)
		if n < attempts {
			return nil
		}
		code := ""
		if m.Error != nil {
			code = m.Error.Code
		}
		reason = fmt.Sprintf("%s reported its %d. error %s in this thread; max_retry_attempts is %d", m.Sender.ID, n, code, attempts)
	}
	waiting := m.Sender.ID
	if m.Recipient != nil {
		waiting = m.Recipient.ID
	}
	return s.escalate(ctx, m, waiting, reason, relayed)
}

// countErrors counts the ERRORs the sender of m has in m's thread, m
// included.
func (s *Service) countErrors(ctx context.Context, m *envelope.Message) int {
	kind, id := mailbox.KeyWorkflow, m.WorkflowID
	if id == "" {
		kind, id = mailbox.KeyCorrelation, m.CorrelationID
	}
	if id == "" {
		return 1
	}
	entries, err := s.history.List(ctx, kind, id, 0)
	if err != nil {
		s.log.Warn("message history unavailable: counting this ERROR alone", "message_id", m.ID, "error", err.Error())
		return 1
	}
	n := 0
	for _, e := range entries {
		if e.Type == string(envelope.Error) && e.Sender == m.Sender.ID {
			n++
		}
	}
	return max(n, 1)
}

// escalate opens the review and audits that it did. A review that could
// not be opened is logged and audited as missing: the message it is about
// stands.
func (s *Service) escalate(ctx context.Context, m *envelope.Message, waiting, reason string, content []byte) *EscalationRef {
	ref, err := s.openEscalation(ctx, m, waiting, reason, content)
	if err != nil {
		return nil
	}
	return ref
}

// openEscalation opens the review and audits the outcome (message.escalation,
// opened or not); it returns the error for callers that must not go on
// without a person (a suspended thread).
func (s *Service) openEscalation(ctx context.Context, m *envelope.Message, waiting, reason string, content []byte) (*EscalationRef, error) {
	rec, err := s.escalator.Open(ctx, escalation.Request{
		Type: escalation.TypeMessage, AgentID: waiting, Action: action(m), Content: string(content), Reason: reason,
	})
	sum := audit.Members("message_id", m.ID, "reason", reason, "waiting_agent", waiting)
	if err != nil {
		s.log.Error("escalation not opened", "message_id", m.ID, "error", err.Error())
		sum.Bool("opened", false)
		_ = s.audit.Write(ctx, audit.Record{Kind: KindMessageEscalation, AgentID: waiting, RequestID: m.ID, PayloadSHA256: sha256Hex(content), Object: sum})
		return nil, errorf("escalate %s: %w", m.ID, err)
	}
	s.stats.escalated.Add(1)
	sum.Bool("opened", true)
	sum.Str("escalation_id", rec.ID)
	_ = s.audit.Write(ctx, audit.Record{Kind: KindMessageEscalation, AgentID: waiting, RequestID: m.ID, PayloadSHA256: sha256Hex(content), Object: sum})
	return &EscalationRef{RequestID: rec.ID, Reason: reason, HumanReviewURL: rec.ReviewURL}, nil
}

// failedDelivery is the content a reviewer sees for a delivery that
// failed: the message and the gateway's ERROR about it.
type failedDelivery struct {
	Message json.RawMessage `json:"message"`
	Error   json.RawMessage `json:"error"`
}

// failureKind names a delivery failure for the audit trail in a fixed
// vocabulary (never the recipient's words).
func failureKind(err error) string {
	var ae *attemptError
	switch {
	case errors.Is(err, egress.ErrDestination):
		return "destination_not_allowed"
	case errors.Is(err, context.DeadlineExceeded):
		return "timeout"
	case errors.Is(err, errRecipientGone):
		return "recipient_gone"
	case errors.As(err, &ae):
		return ae.kind()
	}
	return "failed"
}

// deliveryError records that m could not be handed to recipient: the
// gateway's ERROR envelope (to m's sender, replying to m) is audited and
// appended to the history, and a person is asked to decide. A message the
// gateway or a reviewer wrote gets no ERROR about itself (no loops).
//
// reason is what the sender reads (the same sentence for every kind of
// failure, so the gateway is no port scanner); cause, the real failure,
// goes to the log and the audit entry only.
func (s *Service) deliveryError(ctx context.Context, m *envelope.Message, relayed []byte, recipient, code, reason string, cause error, attempts int, latency time.Duration) ([]byte, *EscalationRef, error) {
	s.log.Warn("message not delivered", "message_id", m.ID, "recipient", recipient, "attempts", attempts, "error", cause.Error())
	sum := audit.Members("message_id", m.ID, "recipient", recipient, "status", "failed", "attempts", attempts,
		"latency_ms", latency.Milliseconds(), "error_code", code, "reason", reason, "cause", failureKind(cause))
	if err := s.audit.Write(ctx, audit.Record{Kind: KindMessageDelivery, AgentID: m.Sender.ID, RequestID: m.ID, PayloadSHA256: sha256Hex(relayed), Object: sum}); err != nil {
		return nil, nil, err
	}
	if m.Sender.ID == GatewayID || m.Sender.ID == HumanID {
		return nil, nil, nil
	}
	to := m.Sender
	e := envelope.NewError(m.Format, envelope.Party{ID: GatewayID, Role: "gateway"}, &to, m.ID, m.WorkflowID, m.CorrelationID,
		code, reason, false, "ERROR")
	e.Fill(s.now().UTC(), newID)
	out, err := e.Marshal()
	if err != nil {
		return nil, nil, errorf("encode delivery error: %w", err)
	}
	// The gateway's ERROR is a message of the thread like any other: it is
	// audited with its hash before it is recorded.
	esum := summary(e, "gateway")
	esum.Str("origin", "gateway")
	if err := s.audit.Write(ctx, audit.Record{Kind: KindMessage, AgentID: m.Sender.ID, RequestID: e.ID, PayloadSHA256: sha256Hex(out), Object: esum}); err != nil {
		return nil, nil, err
	}
	if err := s.remember(ctx, e, out, []string{m.Sender.ID}, "gateway", sha256Hex(out)); err != nil {
		s.log.Error("delivery error not recorded in the history", "message_id", m.ID, "error", err.Error())
	}
	content, _ := json.MarshalIndent(failedDelivery{Message: relayed, Error: out}, "", "  ")
	esc := s.escalate(ctx, e, m.Sender.ID, fmt.Sprintf("delivery of %s to %s failed after %d attempt(s)", m.ID, recipient, attempts), content)
	return out, esc, nil
}

// Resolve is the approval service's Resolver for TypeMessage escalations: the
// reviewer's decision goes back to the waiting agent as a RESPONSE (as the
// human in the loop pattern injects it), recorded in the thread and queued to
// the agent when it has an endpoint. The decision on a suspended thread
// (WAITING_FOR_HUMAN) also resumes the thread, and its RESPONSE is the
// gateway's, in reply to the message that suspended it.
func (s *Service) Resolve(ctx context.Context, rec escalation.Decided) error {
	if rec.Decision == "" {
		return errors.New("messaging: resolve: no review on the decision")
	}
	if m, th, ok, err := suspensionOf([]byte(rec.Content)); ok {
		if err != nil {
			return errorf("resolve %s: %w", rec.ID, err)
		}
		return s.resume(ctx, rec, m, th)
	}
	errEnv, err := errorEnvelope([]byte(rec.Content))
	if err != nil {
		return errorf("resolve %s: %w", rec.ID, err)
	}
	payload, _ := json.Marshal(map[string]any{
		"action": "human_decision", "decision": rec.Decision, "reviewer": rec.Reviewer, "comment": rec.Comment,
		"escalation_id": rec.ID, "state": rec.State,
	})
	to := envelope.Party{ID: rec.AgentID}
	resp := envelope.NewResponse(errEnv.Format, envelope.Party{ID: HumanID, Role: "reviewer"}, &to, errEnv.ID,
		errEnv.WorkflowID, errEnv.CorrelationID, "human_decision", payload)
	resp.Fill(s.now().UTC(), newID)
	out, err := resp.Marshal()
	if err != nil {
		return errorf("encode human response: %w", err)
	}
	sum := summary(resp, "review")
	sum.Str("origin", "human")
	sum.Any("escalation_id", rec.ID)
	sum.Any("reviewer", rec.Reviewer)
	sum.Any("decision", rec.Decision)
	if err := s.audit.Write(ctx, audit.Record{Kind: KindMessage, AgentID: rec.AgentID, RequestID: resp.ID, PayloadSHA256: sha256Hex(out), Object: sum}); err != nil {
		return err
	}
	if err := s.remember(ctx, resp, out, []string{rec.AgentID}, "human", sha256Hex(out)); err != nil {
		return err
	}
	e, ok, _ := s.reg.Lookup(ctx, rec.AgentID)
	if !ok || e.Endpoint == "" {
		return nil
	}
	_, err = s.queue.Push(ctx, mailbox.Delivery{MessageID: resp.ID, Sender: HumanID, Recipient: rec.AgentID,
		Priority: envelope.High.Rank(), Body: out, EnqueuedAt: s.now().UTC()})
	return err
}

// errorEnvelope finds the ERROR an escalation is about in its content.
func errorEnvelope(content []byte) (*envelope.Message, error) {
	if m, err := envelope.Decode(content); err == nil {
		return m, nil
	}
	var fd failedDelivery
	if err := json.Unmarshal(content, &fd); err != nil || len(fd.Error) == 0 {
		return nil, errors.New("content is neither an envelope nor a failed delivery")
	}
	return envelope.Decode(fd.Error)
}

func clipN(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
