package messaging

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/envelope"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/mailbox"
	"github.com/sacpgw/gateway/registry"
)

// outgoing is one delivery of a queued message: to whom, the bytes it
// gets, and the delivery's id (a UUIDv4 the gateway makes).
type outgoing struct {
	to         registry.Entry
	body       []byte
	deliveryID string
}

// outgoings are the deliveries of in's message, one per target. A group
// send's envelope is addressed to each recipient (its receiver id and
// type), so that each agent gets a message of its own, answerable like a
// direct one; a broadcast's is the same for everyone.
func outgoings(in *send, relayed []byte) ([]outgoing, error) {
	out := make([]outgoing, 0, len(in.targets))
	for _, t := range in.targets {
		body := relayed
		if in.msg.GroupType != "" {
			c := *in.msg
			c.Recipient, c.GroupType = &envelope.Party{ID: t.AgentName, Role: in.msg.GroupType}, ""
			b, err := c.Marshal()
			if err != nil {
				return nil, errorf("encode %s for %s: %w", in.msg.ID, t.AgentName, err)
			}
			body = b
		}
		out = append(out, outgoing{to: t, body: body, deliveryID: newID()})
	}
	return out, nil
}

// entries are the history entries of in's message: one per delivery for a
// group send (each with what its recipient got), otherwise one (with the
// delivery's id when there is exactly one). None when the message has no
// thread.
func (s *Service) entries(in *send, relayed []byte, outs []outgoing) []mailbox.Entry {
	m := in.msg
	if m.GroupType == "" {
		e, ok := s.entryOf(m, relayed, names(in.targets), "agent", in.ex.PayloadSHA256)
		if !ok {
			return nil
		}
		if m.Recipient != nil && len(outs) == 1 {
			e.DeliveryID = outs[0].deliveryID
		}
		return []mailbox.Entry{e}
	}
	es := make([]mailbox.Entry, 0, len(outs))
	for _, o := range outs {
		e, ok := s.entryOf(m, o.body, []string{o.to.AgentName}, "agent", in.ex.PayloadSHA256)
		if !ok {
			return nil
		}
		e.Broadcast, e.Group, e.DeliveryID = false, m.GroupType, o.deliveryID
		es = append(es, e)
	}
	return es
}

// admit audits the accepted envelope and appends it to the history: the
// message exists for the gateway only once both are done.
//
// The message is stored in its thread first: nothing is audited as
// accepted that was not stored (a history that is down is a 503
// state_unavailable with Retry-After, and no message.request entry). The
// append is also where a repeated message_id is refused for good (a
// refusal, 409). When a later step refuses it (the audit write here, the
// queue in enqueue), the returned retract takes it back out of the thread,
// so that the sender's retry of the same message_id is not refused as a
// repeat of a message that never went out.
func (s *Service) admit(ctx context.Context, in *send, relayed []byte, outs []outgoing) (retract func(), err error) {
	es := s.entries(in, relayed, outs)
	if err := s.storeAgent(ctx, in, es); err != nil {
		return nil, err
	}
	retract = func() {
		if len(es) == 0 {
			return
		}
		in.stored = false
		// Even when the client has left: the thread must not keep it.
		if err := s.history.Retract(context.WithoutCancel(ctx), es...); err != nil {
			s.log.Error("refused message left in its thread: a retry of it will be refused as a repeat",
				"message_id", in.msg.ID, "error", err.Error())
		}
	}
	if err := s.audit.Write(ctx, s.admitted(in, relayed, outs)); err != nil {
		retract()
		return nil, err
	}
	return retract, nil
}

// storeAgent appends an agent's message to its thread; a message_id the
// thread holds already is refused there, atomically with the append.
func (s *Service) storeAgent(ctx context.Context, in *send, es []mailbox.Entry) error {
	if len(es) == 0 {
		return nil
	}
	if err := s.store(ctx, es...); err != nil {
		if errors.Is(err, mailbox.ErrDuplicate) {
			in.checks["repeat"] = "seen_at_append"
			return &refusal{repeatError(in.msg, err)}
		}
		return err
	}
	in.stored = true
	return nil
}

// admitted is the message.request entry of an accepted envelope.
func (s *Service) admitted(in *send, relayed []byte, outs []outgoing) audit.Record {
	m := in.msg
	sum := summary(m, Route)
	sum.Any("checks", in.checks)
	sum.Any("relayed_sha256", sha256Hex(relayed))
	switch {
	case m.GroupType != "":
		sum.Any("group_to", names(in.targets))
	case m.Recipient == nil:
		sum.Any("broadcast_to", names(in.targets))
	}
	if len(outs) > 0 {
		ds := make([]any, 0, len(outs))
		for _, o := range outs {
			ds = append(ds, map[string]any{"recipient": o.to.AgentName, "delivery_id": o.deliveryID, "relayed_sha256": sha256Hex(o.body)})
		}
		sum.Any("deliveries", ds)
	}
	if in.escalation != nil {
		sum.Any("thread_escalation_id", in.escalation.RequestID)
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
		Broadcast: m.Recipient == nil, Group: m.GroupType, Action: action(m), WorkflowID: m.WorkflowID, CorrelationID: m.CorrelationID,
		InReplyTo: m.InReplyTo, Origin: origin, At: s.now().UTC(), PayloadSHA256: payloadSHA, Envelope: relayed,
	}, true
}

// store appends the entries of one message to their threads.
func (s *Service) store(ctx context.Context, es ...mailbox.Entry) error {
	if err := s.history.Append(ctx, es...); err != nil {
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

// QueuedDelivery is one queued hand-over, as the answer to a queued message
// lists it.
type QueuedDelivery struct {
	Recipient  string `json:"recipient"`
	DeliveryID string `json:"delivery_id"`
}

// enqueue queues a non-REQUEST envelope for each target and answers 202
// with the recipients and each delivery's id.
func (s *Service) enqueue(w http.ResponseWriter, r *http.Request, in *send) error {
	ctx := r.Context()
	relayed, err := in.msg.Marshal()
	if err != nil {
		return errorf("encode %s: %w", in.msg.ID, err)
	}
	outs, err := outgoings(in, relayed)
	if err != nil {
		return err
	}
	retract, err := s.admit(ctx, in, relayed, outs)
	if err != nil {
		return err
	}
	queued := make([]string, 0, len(outs))
	deliveries := make([]QueuedDelivery, 0, len(outs))
	for _, o := range outs {
		now := s.now().UTC()
		d := mailbox.Delivery{DeliveryID: o.deliveryID, MessageID: in.msg.ID, Sender: in.msg.Sender.ID, Recipient: o.to.AgentName,
			Priority: in.msg.Priority.Rank(), Body: o.body, EnqueuedAt: now}
		if ttl := in.msg.TTLMS; ttl > 0 {
			d.ExpiresAt = now.Add(time.Duration(ttl) * time.Millisecond)
		}
		if _, err := s.queue.Push(ctx, d); err != nil {
			s.log.Error("message not queued", "message_id", in.msg.ID, "recipient", o.to.AgentName, "error", err.Error())
			// Refused: the sender retries it, and recipients it reached
			// already get it twice (they dedupe by message_id), which
			// beats a message that never reaches the others.
			retract()
			_ = s.audit.Write(ctx, s.record(in.ex, KindMessageDelivery, "", audit.Members(
				"message_id", in.msg.ID, "recipient", o.to.AgentName, "delivery_id", o.deliveryID, "status", "not_queued", "reason", err.Error(), "queued", queued)))
			if errors.Is(err, mailbox.ErrFull) {
				return &apierror.Error{Status: http.StatusServiceUnavailable, Type: apierror.TypeServer, Code: "queue_full",
					Message: fmt.Sprintf("The message queue is full: %d of %d recipients were queued. Retry later.", len(queued), len(outs)),
					Header:  http.Header{"Retry-After": {"1"}}, Err: err}
			}
			return errorf("queue %s: %w", in.msg.ID, err)
		}
		queued = append(queued, o.to.AgentName)
		deliveries = append(deliveries, QueuedDelivery{Recipient: o.to.AgentName, DeliveryID: o.deliveryID})
	}
	// Escalated once it is accepted: a refused message opens no review
	// its sender's retry would open again.
	esc := s.maybeEscalate(ctx, in.msg, relayed)
	status := "queued"
	if len(in.targets) == 0 {
		// A broadcast nobody receives: accepted and recorded, handed to no one.
		status = "no_recipients"
	}
	body := map[string]any{"status": status, "message_id": in.msg.ID, "recipients": queued, "deliveries": deliveries}
	if in.msg.GroupType != "" {
		body["group"] = in.msg.GroupType
	}
	if esc != nil {
		body["escalation"] = esc
	}
	if in.escalation != nil {
		// The thread now waits for a person: the sender learns where.
		body["thread_suspended"] = in.escalation
	}
	s.settleContext(ctx, in, nil)
	httpx.WriteJSON(w, r, http.StatusAccepted, body)
	return nil
}
