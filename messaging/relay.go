package messaging

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sacpgw/gateway/envelope"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/egress"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/tracing"
	"github.com/sacpgw/gateway/mailbox"
)

// maxAnswer bounds a recipient's answer to a REQUEST.
const maxAnswer = 4 << 20

// attemptError is one failed hand-over; retry says whether another attempt
// may succeed (a refused connection, a 5xx, a timeout) or not (a 4xx, an
// answer that is not an envelope).
type attemptError struct {
	msg   string
	retry bool
	err   error
	// why is the failure's kind for the audit trail: unreachable,
	// bad_status, redirect_refused, bad_answer.
	why string
	// timeout: the attempt's context ended. Whether another attempt may
	// follow is the caller's to say (handOver): it may when only the
	// attempt's own deadline passed.
	timeout bool
}

func (e *attemptError) kind() string {
	if e.why == "" {
		return "bad_answer"
	}
	return e.why
}

func (e *attemptError) Unwrap() error { return e.err }

func (e *attemptError) Error() string {
	if e.err != nil {
		return e.msg + ": " + e.err.Error()
	}
	return e.msg
}

// post hands body to endpoint once and returns the answer's status and
// bytes. Nothing of the sender's credentials goes along: the recipient
// learns who sent it from the envelope and X-Gateway-Sender.
func (s *Service) post(ctx context.Context, endpoint, sender, requestID string, body []byte) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, bytes.NewReader(body))
	if err != nil {
		return 0, nil, &attemptError{msg: "bad endpoint", err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Gateway-Sender", sender)
	if requestID != "" {
		req.Header.Set("X-Request-Id", requestID)
	}
	tracing.Inject(ctx, req.Header)
	resp, err := s.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return 0, nil, &attemptError{msg: "timed out", timeout: true, err: ctx.Err()}
		}
		return 0, nil, &attemptError{msg: "unreachable", retry: !errors.Is(err, egress.ErrDestination), err: err, why: "unreachable"}
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer+1))
	switch {
	case err != nil:
		return resp.StatusCode, nil, &attemptError{msg: "answer cut short", retry: true, err: err}
	case len(answer) > maxAnswer:
		return resp.StatusCode, nil, &attemptError{msg: fmt.Sprintf("answer over %d bytes", maxAnswer)}
	case resp.StatusCode >= 500:
		return resp.StatusCode, answer, &attemptError{msg: fmt.Sprintf("answered %d", resp.StatusCode), retry: true, why: "bad_status"}
	case resp.StatusCode >= 400:
		return resp.StatusCode, answer, &attemptError{msg: fmt.Sprintf("refused with %d", resp.StatusCode), why: "bad_status"}
	case resp.StatusCode >= 300:
		return resp.StatusCode, answer, &attemptError{msg: fmt.Sprintf("redirected with %d", resp.StatusCode), why: "redirect_refused"}
	}
	return resp.StatusCode, answer, nil
}

// handOver posts body with retries: up to max_retry_attempts attempts, backing
// off from messaging.retry_backoff, each within perAttempt, all within
// ctx. It returns the answer of the first success, the number of attempts
// made, and the last failure.
func (s *Service) handOver(ctx context.Context, endpoint, sender, requestID string, body []byte, perAttempt time.Duration) ([]byte, int, error) {
	c := s.conf.Load()
	backoff := c.cfg.Gateway.Messaging.RetryBackoff.D()
	var last error
	for n := 1; n <= c.attempts; n++ {
		actx, cancel := context.WithTimeout(ctx, perAttempt)
		_, answer, err := s.post(actx, endpoint, sender, requestID, body)
		cancel()
		if err == nil {
			return answer, n, nil
		}
		last = err
		var ae *attemptError
		// A timed-out attempt is one failed attempt, as a 5xx is, when
		// only its own deadline (perAttempt) passed; when ctx ended too
		// there is no time left for another.
		retry := errors.As(err, &ae) && (ae.retry || ae.timeout && ctx.Err() == nil)
		if !retry || n == c.attempts {
			return nil, n, err
		}
		select {
		case <-ctx.Done():
			return nil, n, err
		case <-time.After(backoff):
		}
		backoff *= 2
	}
	return nil, c.attempts, last
}

// relay delivers a REQUEST and answers with the recipient's RESPONSE
// (or ERROR, or ACK), checked like any envelope.
func (s *Service) relay(w http.ResponseWriter, r *http.Request, in *send) error {
	ctx := r.Context()
	m := in.msg
	relayed, err := m.Marshal()
	if err != nil {
		return errorf("encode %s: %w", m.ID, err)
	}
	// The request's entry is made durable while the recipient works (as
	// the proxy does for model calls); its answer is released only once
	// the entry is, so with fail_mode closed no unaudited exchange
	// completes.
	// Stored first: nothing is audited as accepted that was not stored,
	// and a repeated message_id is refused here for good.
	if err := s.storeAgent(ctx, in, s.entries(in, relayed, nil)); err != nil {
		return err
	}
	waitAdmitted := s.audit.Start(ctx, s.admitted(in, relayed, nil))
	esc := s.maybeEscalate(ctx, m, relayed)
	timeout := s.timeout(m.TimeoutMS)
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	start := s.now()
	answer, attempts, err := s.handOver(dctx, in.recipient.Endpoint, m.Sender.ID, in.ex.RequestID, relayed, timeout)
	var reply *envelope.Message
	if err == nil {
		reply, err = s.checkReply(m, in.recipient.AgentName, answer)
	}
	if err == nil {
		err = s.checkAnswer(ctx, in, reply)
	}
	latency := s.now().Sub(start)
	if aerr := waitAdmitted(); aerr != nil {
		return aerr
	}
	var (
		out      []byte
		entry    mailbox.Entry
		threaded bool
	)
	if err == nil {
		if out, err = reply.Marshal(); err != nil {
			return errorf("encode reply to %s: %w", m.ID, err)
		}
		// Stored before it is audited or released: a reply repeating a
		// message_id of the recipient's in this thread is refused like
		// any repeat (the requester gets the gateway's ERROR).
		if entry, threaded = s.entryOf(reply, out, []string{m.Sender.ID}, "agent", sha256Hex(answer)); threaded {
			if serr := s.store(ctx, entry); errors.Is(serr, mailbox.ErrDuplicate) {
				err = &attemptError{msg: fmt.Sprintf("answer repeats message_id %q, already in this thread", clip(reply.ID)), err: serr}
			} else if serr != nil {
				return serr
			}
		}
	}
	if err != nil {
		return s.failed(w, r, in, relayed, attempts, latency, err)
	}
	s.stats.delivered.Add(1)
	sum := summary(reply, Route)
	sum.Any("attempts", attempts)
	sum.Int("latency_ms", latency.Milliseconds())
	sum.Str("request_message_id", m.ID)
	rec := s.record(in.ex, KindMessageResponse, sha256Hex(answer), sum)
	rec.AgentID = in.recipient.AgentName
	if err := s.audit.Write(ctx, rec); err != nil {
		// Not released: the thread must not list it either.
		if threaded {
			if rerr := s.history.Retract(context.WithoutCancel(ctx), entry); rerr != nil {
				s.log.Error("unaudited reply left in its thread", "message_id", reply.ID, "error", rerr.Error())
			}
		}
		return err
	}
	if e := s.maybeEscalate(ctx, reply, out); e != nil && esc == nil {
		esc = e
	}
	if esc == nil {
		esc = in.escalation
	}
	if esc != nil {
		w.Header().Set("X-Escalation-Id", esc.RequestID)
	}
	if s.settleContext(ctx, in, reply) {
		// The handoff's "complete" notice to its sender.
		w.Header().Set("X-Handoff", HandoffComplete)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(out)
	return nil
}

// checkAnswer holds a recipient's answer to what the requester's envelope
// was held to: the types it claims (its sender's must be the recipient's
// registered type or one of its roles, its recipient's the requester's) and its plan, if it
// carries one (the library, and the requester's verbs and tools: the
// answer is relayed to the requester as any message is).
func (s *Service) checkAnswer(ctx context.Context, in *send, reply *envelope.Message) error {
	if role := reply.Sender.Role; role != "" && !in.recipient.MayClaim(role) {
		return &attemptError{msg: fmt.Sprintf("answer claims %s %q, not the registered type %s of %q%s", senderRoleField(reply), clip(role), typeName(in.recipient.Type), in.recipient.AgentName, orRoles(in.recipient.Roles))}
	}
	if reply.Recipient != nil && reply.Recipient.Role != "" && !in.sender.MayClaim(reply.Recipient.Role) {
		return &attemptError{msg: fmt.Sprintf("answer names %s %q, not the registered type %s of the requester %q%s", recipientRoleField(reply), clip(reply.Recipient.Role), typeName(in.sender.Type), in.msg.Sender.ID, orRoles(in.sender.Roles))}
	}
	if !carriesPlan(reply.Payload) {
		return nil
	}
	lib := s.library(ctx)
	steps, p := checkPayloadPlan(lib, reply.Payload)
	if p != nil {
		return &attemptError{msg: fmt.Sprintf("answer carries an invalid plan (%s: %s)", p.code, p.reason)}
	}
	requester, ok, _ := s.reg.Lookup(ctx, in.msg.Sender.ID)
	if !ok {
		return &attemptError{msg: "answer carries a plan for a requester the registry does not know"}
	}
	if p := runnableBy(lib, requester, steps); p != nil {
		return &attemptError{msg: fmt.Sprintf("answer carries a plan the requester cannot run (%s: %s)", p.code, p.reason)}
	}
	return nil
}

// checkReply decodes a recipient's answer. An empty answer is an
// acknowledgement; anything else must be an envelope from the recipient
// to the sender replying to the request.
func (s *Service) checkReply(req *envelope.Message, recipient string, answer []byte) (*envelope.Message, error) {
	if len(bytes.TrimSpace(answer)) == 0 {
		to := req.Sender
		ack := envelope.NewResponse(req.Format, envelope.Party{ID: recipient}, &to, req.ID, req.WorkflowID, req.CorrelationID, "", nil)
		ack.Type = envelope.Ack
		if ack.Format == envelope.ACL {
			ack.Status = "received"
		}
		ack.Fill(s.now().UTC(), newID)
		return ack, nil
	}
	reply, err := envelope.Decode(answer)
	if err != nil {
		return nil, &attemptError{msg: "answer is not a valid envelope", err: err}
	}
	reply.Fill(s.now().UTC(), newID)
	if _, blocked, err := redactEnvelope(s.conf.Load().red, reply); err != nil || blocked != "" {
		if err != nil {
			return nil, &attemptError{msg: "answer could not be redacted", err: err}
		}
		return nil, &attemptError{msg: "answer carries " + blocked + " data, which this gateway does not relay"}
	}
	switch {
	case reply.Type != envelope.Response && reply.Type != envelope.Error && reply.Type != envelope.Ack:
		return nil, &attemptError{msg: fmt.Sprintf("answer is a %s, not a response, error or ack", reply.Type)}
	case reply.Sender.ID != recipient:
		return nil, &attemptError{msg: fmt.Sprintf("answer claims sender %q, not the recipient %q", clip(reply.Sender.ID), recipient)}
	case reply.Recipient != nil && reply.Recipient.ID != req.Sender.ID:
		return nil, &attemptError{msg: fmt.Sprintf("answer is addressed to %q, not to the requester %q", clip(reply.Recipient.ID), req.Sender.ID)}
	case reply.InReplyTo != "" && reply.InReplyTo != req.ID:
		return nil, &attemptError{msg: fmt.Sprintf("answer replies to %q, not to %q", clip(reply.InReplyTo), req.ID)}
	}
	// The thread is the request's: a reply cannot move itself into
	// another workflow's history.
	if reply.Recipient == nil {
		to := req.Sender
		reply.Recipient = &to
	}
	if reply.InReplyTo == "" && reply.Format == envelope.ACL {
		reply.InReplyTo = req.ID
	}
	reply.WorkflowID, reply.CorrelationID = req.WorkflowID, req.CorrelationID
	if reply.Format == envelope.ACL {
		reply.CorrelationID = ""
	} else {
		reply.WorkflowID = ""
	}
	return reply, nil
}

// failed answers a REQUEST that could not be delivered: the gateway's
// ERROR envelope goes to the history, a person is asked to look, and the
// client gets 502/504 in OpenAI's error shape with the envelope beside it.
func (s *Service) failed(w http.ResponseWriter, r *http.Request, in *send, relayed []byte, attempts int, latency time.Duration, cause error) error {
	ctx := r.Context()
	m := in.msg
	s.stats.failed.Add(1)
	timedOut := errors.Is(cause, context.DeadlineExceeded)
	status, code := http.StatusBadGateway, "DELIVERY_FAILED"
	if timedOut {
		status, code = http.StatusGatewayTimeout, "TIMEOUT"
	}
	// One sentence whatever went wrong: the recipient's answer, its status
	// or a connection error would let a caller probe what is behind an
	// endpoint. The cause is in the log and the audit entry.
	reason := fmt.Sprintf("The gateway could not deliver %s to %s.", m.ID, in.recipient.AgentName)
	if timedOut {
		reason = fmt.Sprintf("%s did not answer %s within its timeout.", in.recipient.AgentName, m.ID)
	}
	errBytes, esc, err := s.deliveryError(ctx, m, relayed, in.recipient.AgentName, code, reason, cause, attempts, latency)
	if err != nil {
		return err
	}
	body := map[string]any{
		"error":    map[string]any{"message": reason, "type": apierror.TypeUpstream, "code": "upstream_error", "param": nil},
		"envelope": json.RawMessage(errBytes),
	}
	if esc != nil {
		body["escalation"] = esc
	}
	httpx.WriteJSON(w, r, status, body)
	if ex := in.ex; ex != nil {
		ex.Status, ex.ErrCode = status, "upstream_error"
	}
	return nil
}
