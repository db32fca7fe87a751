package messaging

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/envelope"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/escalation"
	"github.com/sacpgw/gateway/mailbox"
)

// A message that says WAITING_FOR_HUMAN suspends its thread (the human in
// the loop of the agent communication patterns): a person is asked through
// the Escalator, and until they decide no new REQUEST is relayed in that
// thread. Their decision resumes it and goes to the waiting agent as the
// gateway's RESPONSE. The suspension lives in the History's backend, so
// every replica refuses the same REQUESTs.

// StatusWaitingForHuman is the status that suspends a thread: ACL's status
// field, or a "status" member of the payload (SAM has no status field of
// its own), in any ASCII case.
const StatusWaitingForHuman = "WAITING_FOR_HUMAN"

// waitingForHuman reports whether m says its sender waits for a person.
// Every payload member named status (in any case) counts: a reader that
// folds case must not see a suspension this check missed.
func waitingForHuman(m *envelope.Message) bool {
	if asciiEqualFold(m.Status, StatusWaitingForHuman) {
		return true
	}
	if len(m.Payload) == 0 {
		return false
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(m.Payload, &top) != nil {
		return false
	}
	for k, v := range top {
		var s string
		if asciiEqualFold(k, "status") && json.Unmarshal(v, &s) == nil && asciiEqualFold(s, StatusWaitingForHuman) {
			return true
		}
	}
	return false
}

// threadField is the envelope field that names m's thread.
func threadField(m *envelope.Message) string {
	if m.Format == envelope.SAM {
		return "correlation_id"
	}
	return "workflow_id"
}

// checkSuspended is the accept step for suspended threads: a REQUEST in a
// thread that waits for a person is refused (409 thread_suspended, with
// the escalation); a WAITING_FOR_HUMAN message without a thread is refused
// (nothing to suspend). A history that cannot say refuses too: the check
// fails closed.
func (s *Service) checkSuspended(r *http.Request, in *send) error {
	m := in.msg
	kind, id := m.Key()
	if id == "" {
		if waitingForHuman(m) {
			return apierror.BadRequest(threadField(m), "A %s message needs a %s: without a thread there is nothing to suspend.", StatusWaitingForHuman, threadField(m))
		}
		return nil
	}
	if m.Type != envelope.Request {
		return nil
	}
	sus, ok, err := s.history.Suspended(r.Context(), kind, id)
	if err != nil {
		in.checks["suspension"] = "unavailable"
		return apierror.StateUnavailable(errorf("suspension of %s %s: %w", kind, id, err))
	}
	if !ok {
		return nil
	}
	in.checks["suspension"] = map[string]any{"suspended": true, "escalation_id": sus.EscalationID}
	return &apierror.Error{Status: http.StatusConflict, Type: apierror.TypeInvalidRequest, Code: "thread_suspended", Param: threadField(m),
		Header: http.Header{"X-Escalation-Id": {sus.EscalationID}},
		Message: fmt.Sprintf("This %s is suspended: %s is waiting for a person (escalation %s, opened for message %s). No REQUEST is relayed in it until the person decides.",
			kind, sus.Sender, sus.EscalationID, sus.MessageID)}
}

// suspendedThread is the content of a suspension's escalation: the message
// that said WAITING_FOR_HUMAN and the thread it suspended.
type suspendedThread struct {
	WaitingForHuman json.RawMessage `json:"waiting_for_human"`
	Thread          threadRef       `json:"thread"`
}

type threadRef struct {
	Kind string `json:"kind"`
	ID   string `json:"id"`
}

// suspendThread suspends the thread of a WAITING_FOR_HUMAN message before
// it is relayed: it opens the escalation and records the suspension. A
// thread suspended already keeps its escalation (none is opened twice).
// When no person can be asked, or the suspension cannot be recorded, the
// message is refused: a thread nobody could resume, or one that is not
// suspended although its agent waits, is worse than a retry.
func (s *Service) suspendThread(ctx context.Context, in *send) (*EscalationRef, error) {
	m := in.msg
	if !waitingForHuman(m) {
		return nil, nil
	}
	kind, id := m.Key()
	cur, ok, err := s.history.Suspended(ctx, kind, id)
	if err != nil {
		return nil, apierror.StateUnavailable(errorf("suspension of %s %s: %w", kind, id, err))
	}
	if ok {
		in.checks["suspension"] = map[string]any{"suspended": "already", "escalation_id": cur.EscalationID}
		return &EscalationRef{RequestID: cur.EscalationID, Reason: "the " + kind + " was already waiting for a person"}, nil
	}
	relayed, err := m.Marshal()
	if err != nil {
		return nil, errorf("encode %s: %w", m.ID, err)
	}
	content, err := json.MarshalIndent(suspendedThread{WaitingForHuman: relayed, Thread: threadRef{Kind: kind, ID: id}}, "", "  ")
	if err != nil {
		return nil, errorf("encode suspension of %s: %w", m.ID, err)
	}
	reason := fmt.Sprintf("%s is waiting for a person in %s %s (message %s)", m.Sender.ID, kind, id, m.ID)
	ref, err := s.openEscalation(ctx, m, m.Sender.ID, reason, content)
	if err != nil {
		in.checks["suspension"] = "escalation_unavailable"
		return nil, &apierror.Error{Status: http.StatusServiceUnavailable, Type: apierror.TypeServer, Code: "escalation_unavailable",
			Message: "The " + kind + " could not be suspended: no person could be asked to decide. The message was not sent; retry later.",
			Header:  http.Header{"Retry-After": {"1"}}, Err: err}
	}
	sus := mailbox.Suspension{Kind: kind, ID: id, EscalationID: ref.RequestID, MessageID: m.ID, Sender: m.Sender.ID, At: s.now().UTC()}
	got, created, err := s.history.Suspend(ctx, sus)
	if err != nil {
		in.checks["suspension"] = "unavailable"
		// The escalation stays open; its decision finds no suspension of
		// its own and only answers the agent.
		return nil, apierror.StateUnavailable(errorf("suspend %s %s: %w", kind, id, err))
	}
	if !created {
		// Another replica suspended the thread a moment earlier: its
		// escalation decides; this one only answers the agent.
		s.log.Warn("thread suspended concurrently: a second escalation was opened", "thread", kind+":"+id,
			"escalation_id", ref.RequestID, "suspended_by", got.EscalationID)
		in.checks["suspension"] = map[string]any{"suspended": "already", "escalation_id": got.EscalationID}
		return &EscalationRef{RequestID: got.EscalationID, Reason: "the " + kind + " was already waiting for a person"}, nil
	}
	in.suspended = &sus
	in.checks["suspension"] = map[string]any{"suspended": true, "escalation_id": ref.RequestID}
	return ref, nil
}

// unsuspend lifts the suspension in made, when its message was refused
// after all (it never went out, so nobody waits on it).
func (s *Service) unsuspend(ctx context.Context, in *send) {
	sus := in.suspended
	if sus == nil {
		return
	}
	in.suspended = nil
	if _, err := s.history.Resume(context.WithoutCancel(ctx), sus.Kind, sus.ID, sus.EscalationID); err != nil {
		s.log.Error("suspension of a refused message not lifted: the thread stays suspended until its escalation is decided",
			"thread", sus.Kind+":"+sus.ID, "escalation_id", sus.EscalationID, "error", err.Error())
	}
}

// suspensionOf reads a suspension's escalation content; ok is false for
// any other content.
func suspensionOf(content []byte) (*envelope.Message, threadRef, bool, error) {
	var st suspendedThread
	dec := json.NewDecoder(bytes.NewReader(content))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&st); err != nil || len(st.WaitingForHuman) == 0 {
		return nil, threadRef{}, false, nil
	}
	m, err := envelope.Decode(st.WaitingForHuman)
	if err != nil {
		return nil, threadRef{}, true, fmt.Errorf("suspending message: %w", err)
	}
	if kind, id := m.Key(); kind != st.Thread.Kind || id != st.Thread.ID {
		return nil, threadRef{}, true, errors.New("the suspended thread is not the message's")
	}
	return m, st.Thread, true, nil
}

// resume acts on the decision about a suspended thread: the thread is
// resumed (when this escalation suspended it) and the person's decision
// goes to the waiting agent as the gateway's RESPONSE to its message,
// recorded in the thread and queued to the agent's endpoint.
func (s *Service) resume(ctx context.Context, rec escalation.Decided, m *envelope.Message, th threadRef) error {
	if rec.AgentID != "" && rec.AgentID != m.Sender.ID {
		return errorf("resolve %s: the escalation's agent %q is not the waiting agent %q", rec.ID, rec.AgentID, m.Sender.ID)
	}
	resumed, err := s.history.Resume(ctx, th.Kind, th.ID, rec.ID)
	if err != nil {
		return errorf("resume %s %s: %w", th.Kind, th.ID, err)
	}
	payload, _ := json.Marshal(map[string]any{
		"action": "human_decision", "decision": rec.Decision, "reviewer": rec.Reviewer, "comment": rec.Comment,
		"escalation_id": rec.ID, "state": rec.State, "thread_resumed": resumed,
	})
	to := envelope.Party{ID: m.Sender.ID}
	resp := envelope.NewResponse(m.Format, envelope.Party{ID: GatewayID, Role: "gateway"}, &to, m.ID,
		m.WorkflowID, m.CorrelationID, "human_decision", payload)
	resp.Fill(s.now().UTC(), newID)
	out, err := resp.Marshal()
	if err != nil {
		return errorf("encode the decision on %s: %w", rec.ID, err)
	}
	sum := summary(resp, "review")
	sum.Str("origin", "gateway")
	sum.Any("escalation_id", rec.ID)
	sum.Any("reviewer", rec.Reviewer)
	sum.Any("decision", rec.Decision)
	sum.Bool("thread_resumed", resumed)
	if err := s.audit.Write(ctx, audit.Record{Kind: KindMessage, AgentID: m.Sender.ID, RequestID: resp.ID, PayloadSHA256: sha256Hex(out), Object: sum}); err != nil {
		return err
	}
	if err := s.remember(ctx, resp, out, []string{m.Sender.ID}, "gateway", sha256Hex(out)); err != nil {
		return err
	}
	e, ok, _ := s.reg.Lookup(ctx, m.Sender.ID)
	if !ok || e.Endpoint == "" {
		return nil
	}
	_, err = s.queue.Push(ctx, mailbox.Delivery{MessageID: resp.ID, Sender: GatewayID, Recipient: m.Sender.ID,
		Priority: envelope.High.Rank(), Body: out, EnqueuedAt: s.now().UTC()})
	return err
}
