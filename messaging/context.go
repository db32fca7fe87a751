package messaging

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sacpgw/gateway/envelope"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/globalctx"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/mailbox"
)

// A relay thread (an ACL workflow_id, a SAM correlation_id) has a Global
// Context as a workflow run does (internal/globalctx): the gateway keeps
// it from the messages it relays. Its first sender is its current agent;
// only the current agent writes entities, and only those agents.yaml says
// it owns (payload.context.entities of its messages); every accepted
// message appends to its history. A handoff (a REQUEST with action
// "handoff") locks the context while the recipient is asked, then makes
// the recipient the current agent when it acknowledges (answers), which
// the sender learns from the answer itself and the X-Handoff header.

// ActionHandoff is the action of a handoff REQUEST.
const ActionHandoff = "handoff"

// The states of a handoff.
const (
	HandoffPending  = "pending"
	HandoffComplete = "complete"
	HandoffFailed   = "failed"
)

// ThreadContext is a relay thread's Global Context, with its last handoff.
type ThreadContext struct {
	globalctx.Context[string]
	Handoff *Handoff `json:"handoff,omitempty"`
}

// Handoff is a transfer of the thread's turn from one agent to another.
type Handoff struct {
	From           string    `json:"from"`
	To             string    `json:"to"`
	MessageID      string    `json:"message_id"`
	State          string    `json:"state"`
	RequestedAt    time.Time `json:"requested_at"`
	AcknowledgedAt time.Time `json:"acknowledged_at,omitzero"`
}

// maxHandoffLock bounds a handoff's lock: past the longest REQUEST
// (metadata.timeout_ms is at most an hour) a pending handoff is one whose
// replica died before it settled, and it must not block the thread for good.
const maxHandoffLock = time.Hour + time.Minute

// locked reports a handoff in progress at now: nobody writes until it
// settles.
func (c *ThreadContext) locked(now time.Time) bool {
	return c.Handoff != nil && c.Handoff.State == HandoffPending && now.Sub(c.Handoff.RequestedAt) < maxHandoffLock
}

// ContextStore keeps the threads' Global Contexts (memory, or Redis shared
// by the replicas).
type ContextStore interface {
	// Get returns the context of thread, nil when it has none.
	Get(ctx context.Context, thread string) (*ThreadContext, error)
	// Update changes the context of thread with fn, atomically; fn gets a
	// new, empty context when the thread has none. An error of fn leaves
	// the context as it was and is returned.
	Update(ctx context.Context, thread string, fn func(*ThreadContext) error) (*ThreadContext, error)
}

// MemoryContexts is a ContextStore in memory (one replica).
type MemoryContexts struct {
	mu sync.Mutex
	m  map[string][]byte
}

// NewMemoryContexts returns an empty store.
func NewMemoryContexts() *MemoryContexts { return &MemoryContexts{m: map[string][]byte{}} }

// Get implements ContextStore.
func (s *MemoryContexts) Get(_ context.Context, thread string) (*ThreadContext, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	raw, ok := s.m[thread]
	if !ok {
		return nil, nil
	}
	return decodeContext(raw)
}

// Update implements ContextStore.
func (s *MemoryContexts) Update(_ context.Context, thread string, fn func(*ThreadContext) error) (*ThreadContext, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	tc := &ThreadContext{}
	if raw, ok := s.m[thread]; ok {
		var err error
		if tc, err = decodeContext(raw); err != nil {
			return nil, err
		}
	}
	if err := fn(tc); err != nil {
		return nil, err
	}
	raw, err := json.Marshal(tc)
	if err != nil {
		return nil, errorf("encode the context of %s: %w", thread, err)
	}
	s.m[thread] = raw
	return tc, nil
}

func decodeContext(raw []byte) (*ThreadContext, error) {
	var tc ThreadContext
	if err := json.Unmarshal(raw, &tc); err != nil {
		return nil, errorf("decode a thread context: %w", err)
	}
	return &tc, nil
}

// threadPlan is what a message does to its thread's context, decided by
// checkContext and carried out once the message is stored.
type threadPlan struct {
	key     string
	writes  map[string]any
	handoff bool
	// settled: the message is on the context (settleContext ran).
	settled bool
}

// threadKey names a message's thread: "workflow:<id>" or "correlation:<id>".
func threadKey(m *envelope.Message) string {
	switch {
	case m.WorkflowID != "":
		return mailbox.KeyWorkflow + ":" + m.WorkflowID
	case m.CorrelationID != "":
		return mailbox.KeyCorrelation + ":" + m.CorrelationID
	}
	return ""
}

// errContext is a message its thread's context refuses.
func errContext(format string, args ...any) error {
	return &apierror.Error{Status: http.StatusConflict, Type: apierror.TypeInvalidRequest, Code: "context_conflict", Param: "payload.context",
		Message: fmt.Sprintf(format, args...)}
}

// checkContext decides what the message does to its thread's Global
// Context: its entity writes (payload.context.entities: owner-only, from
// the current agent, not while a handoff is pending) and, for a handoff,
// takes the context's lock before the recipient is asked.
func (s *Service) checkContext(r *http.Request, in *send) error {
	m := in.msg
	if in.testMode {
		return nil // a dry run changes no thread
	}
	key := threadKey(m)
	handoff := m.Type == envelope.Request && m.Action == ActionHandoff
	if key == "" {
		if handoff {
			return apierror.BadRequest("correlation_id", "A handoff belongs to a thread: give correlation_id (SAM) or workflow_id (ACL).")
		}
		return nil
	}
	sender := in.ex.Agent
	writes, err := globalctx.Writes("agent "+sender.ID, in.ex.Agent.Owns, payloadContext(m))
	if err != nil {
		return apierror.Forbidden("Global Context: " + err.Error() + ".")
	}
	in.thread = &threadPlan{key: key, writes: writes, handoff: handoff}
	if !handoff && len(writes) == 0 {
		return nil
	}
	check := func(tc *ThreadContext) error {
		switch {
		case tc.locked(s.now()):
			return errContext("The Global Context of this thread is locked: the handoff from %s to %s is pending.", tc.Handoff.From, tc.Handoff.To)
		case tc.CurrentAgent != "" && tc.CurrentAgent != sender.ID:
			return errContext("Only the current agent (%s) writes entities or hands off in this thread.", tc.CurrentAgent)
		}
		return nil
	}
	if !handoff {
		tc, err := s.contexts.Get(r.Context(), key)
		if err != nil || tc == nil {
			return err
		}
		return check(tc)
	}
	_, err = s.contexts.Update(r.Context(), key, func(tc *ThreadContext) error {
		if err := check(tc); err != nil {
			return err
		}
		s.open(tc, key, sender.ID)
		tc.Handoff = &Handoff{From: sender.ID, To: m.Recipient.ID, MessageID: m.ID, State: HandoffPending, RequestedAt: s.now().UTC()}
		return nil
	})
	return err
}

// open makes tc a thread's context when it is new: its first sender is its
// current agent.
func (s *Service) open(tc *ThreadContext, key, sender string) {
	if tc.WorkflowID != "" {
		return
	}
	_, id, _ := strings.Cut(key, ":")
	tc.WorkflowID, tc.Status, tc.CurrentAgent = id, "IN_PROGRESS", sender
	tc.Entities, tc.History, tc.Artifacts = map[string]any{}, []globalctx.HistoryEntry{}, []globalctx.Artifact{}
}

// payloadContext is the payload's "context" object, nil when there is none.
func payloadContext(m *envelope.Message) map[string]any {
	var p struct {
		Context map[string]any `json:"context"`
	}
	if len(m.Payload) == 0 || json.Unmarshal(m.Payload, &p) != nil {
		return nil
	}
	return p.Context
}

// settleContext records a stored message on its thread's context: the
// sender's entity writes, its history entry, and for a handoff the
// outcome, reply being the recipient's answer (nil: none came). It reports
// whether a handoff completed.
func (s *Service) settleContext(ctx context.Context, in *send, reply *envelope.Message) bool {
	p := in.thread
	if p == nil || p.settled {
		return false
	}
	p.settled = true
	m, sender, done := in.msg, in.ex.Agent.ID, false
	_, err := s.contexts.Update(context.WithoutCancel(ctx), p.key, func(tc *ThreadContext) error {
		s.open(tc, p.key, sender)
		now := s.now().UTC()
		mine := p.handoff && tc.locked(now) && tc.Handoff.MessageID == m.ID
		if !in.stored {
			if mine {
				tc.Handoff.State = HandoffFailed
			}
			return nil
		}
		// The writes were checked before the message went out; a handoff
		// writes under its own lock ("the sender finalizes its state").
		if len(p.writes) > 0 && (mine || (!tc.locked(now) && tc.CurrentAgent == sender)) {
			tc.Apply(p.writes)
		}
		tc.History = append(tc.History, globalctx.HistoryEntry{Agent: sender, Action: action(m), Timestamp: now})
		if !mine {
			return nil
		}
		if reply == nil || reply.Type == envelope.Error {
			tc.Handoff.State = HandoffFailed
			return nil
		}
		tc.Handoff.State, tc.Handoff.AcknowledgedAt, tc.CurrentAgent = HandoffComplete, now, tc.Handoff.To
		tc.History = append(tc.History, globalctx.HistoryEntry{Agent: tc.Handoff.To, Action: "handoff_acknowledged", Timestamp: now})
		done = true
		return nil
	})
	if err != nil {
		s.log.Error("thread context not updated", "thread", p.key, "message_id", m.ID, "error", err.Error())
		return false
	}
	return done
}

// Context serves GET /relay/context?workflow_id=W (or correlation_id=C):
// the thread's Global Context, to an agent that sent or received one of
// its messages; to any other agent, and for a thread without a context, 404.
func (s *Service) Context(w http.ResponseWriter, r *http.Request) {
	tq, me, ok := s.agentThread(w, r)
	if !ok {
		return
	}
	party := slices.ContainsFunc(tq.entries, func(e mailbox.Entry) bool { return e.Sender == me || slices.Contains(e.Recipients, me) })
	var tc *ThreadContext
	if party {
		var err error
		if tc, err = s.contexts.Get(r.Context(), tq.kind+":"+tq.id); err != nil {
			httpx.Fail(w, r, errorf("thread context: %w", err))
			return
		}
	}
	if tc == nil {
		httpx.Fail(w, r, &apierror.Error{Status: http.StatusNotFound, Type: apierror.TypeInvalidRequest, Code: "not_found", Param: tq.kind + "_id",
			Message: "No Global Context of this " + tq.kind + " for agent " + me + "."})
		return
	}
	httpx.WriteJSON(w, r, http.StatusOK, tc)
}
