package approval

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/sacpgw/gateway/internal/escalation"
	"github.com/sacpgw/gateway/policy"
)

// Request types of escalations that other parts of the gateway open on the
// same human review (docs/agent-messaging.md): a SPAWN_AGENT message the
// spawn policy escalated, and an agent-to-agent ERROR that needs a person
// (the error propagation and human in the loop of the agent communication
// patterns). The approval protocol itself never produces them, and a REPORT
// cannot complete them.
const (
	TypeSpawn   = escalation.TypeSpawn
	TypeMessage = escalation.TypeMessage
	// TypeWorkflow is a workflow run waiting for a person's answer.
	TypeWorkflow = escalation.TypeWorkflow
	// TypeMCP is an MCP tool call the policy escalated: the decision binds
	// the call's exact arguments.
	TypeMCP = escalation.TypeMCP
	// TypeA2AInput is an A2A task asking for input: the approving
	// person's comment is the task's next message.
	TypeA2AInput = escalation.TypeA2AInput
	// TypeMCPTool is an MCP tool whose definition changed: approved, the
	// gateway serves the new definition.
	TypeMCPTool = escalation.TypeMCPTool
)

// Resolver acts on a person's (or the expiry's) decision on an external
// escalation.
type Resolver = escalation.Resolver

// ExternalRequest is an escalation opened by another component.
type ExternalRequest = escalation.Request

// resolvers maps a request type to its Resolver; set while wiring.
type resolvers struct {
	mu sync.RWMutex
	m  map[string]Resolver
}

// Handle registers fn for decisions on external escalations of
// requestType. Call it while wiring, before serving.
func (s *Service) Handle(requestType string, fn Resolver) {
	s.ext.mu.Lock()
	defer s.ext.mu.Unlock()
	if s.ext.m == nil {
		s.ext.m = map[string]Resolver{}
	}
	s.ext.m[requestType] = fn
}

func (s *Service) resolver(requestType string) Resolver {
	s.ext.mu.RLock()
	defer s.ext.mu.RUnlock()
	return s.ext.m[requestType]
}

// Escalate opens an escalation for a person: a record in state ESCALATED,
// listed at /admin/escalations, decided on /review/{id} or through the API,
// expired after timeouts.escalation, and announced on the webhook. The
// caller audits its own decision to escalate; the person's decision is
// audited as escalation.decision like any other. The waiting agent may
// poll GET /agent/status/{request_id}. req.Graph, the gateway's drawing, is
// kept with the escalation and shown on the review page once checked.
func (s *Service) Escalate(ctx context.Context, req ExternalRequest) (*Record, error) {
	if req.Type != TypeSpawn && req.Type != TypeMessage && req.Type != TypeWorkflow && req.Type != TypeMCP && req.Type != TypeA2AInput && req.Type != TypeMCPTool {
		return nil, fmt.Errorf("approval: escalate: unknown type %q", req.Type)
	}
	if req.AgentID == "" {
		return nil, errors.New("approval: escalate: no agent")
	}
	now := s.now().UTC()
	id := newID()
	sum := sha256.Sum256([]byte(req.Content))
	digest := hex.EncodeToString(sum[:])
	reason := req.Reason
	if reason == "" {
		reason = "A person must decide."
	}
	resp := &LibrarianResponse{
		RequestID: id, Timestamp: now, Status: StatusEscalated, Feedback: "Escalated for a human decision: " + reason,
		Violations: []policy.Violation{}, Suggestions: []string{}, Constraints: []string{},
		ContentSHA256: digest, State: StateEscalated, DecisionID: req.DecisionID,
	}
	s.escalationFields(resp, id, reason)
	rec := &Record{
		ID: id, AgentID: req.AgentID, State: StatePending,
		Request: AgentRequest{
			AgentID: req.AgentID, SessionID: req.SessionID, Timestamp: &now,
			RequestType: req.Type, Action: req.Action, Content: req.Content, Rationale: reason,
		},
		ContentSHA256: digest,
		Decision:      &Decision{ID: req.DecisionID, Revision: req.Revision, Status: StatusEscalated, Violations: []policy.Violation{}},
		Response:      resp,
		Escalation:    &Escalation{Kind: externalKind(req.Type), Reason: reason, At: now, Graph: req.Graph},
		CreatedAt:     now, UpdatedAt: now,
		History: []Transition{{State: StatePending, At: now, By: "agent:" + req.AgentID}},
	}
	rec.move(StateEscalated, now, byPolicy, "")
	if err := s.store.Create(ctx, rec); err != nil {
		return nil, fmt.Errorf("approval: escalate %s: %w", req.Type, err)
	}
	s.changed(rec)
	s.notify(rec)
	return rec, nil
}

// Open is Escalate for the other front doors (escalation.Opener).
func (s *Service) Open(ctx context.Context, req escalation.Request) (escalation.Opened, error) {
	rec, err := s.Escalate(ctx, req)
	if err != nil {
		return escalation.Opened{}, err
	}
	o := escalation.Opened{ID: rec.ID}
	if rec.Response != nil && rec.Response.HumanReviewURL != nil {
		o.ReviewURL = *rec.Response.HumanReviewURL
	}
	return o, nil
}

var _ escalation.Opener = (*Service)(nil)

// decided is what a Resolver is told of a decided record.
func decided(rec *Record) escalation.Decided {
	d := escalation.Decided{ID: rec.ID, Type: rec.Request.RequestType, AgentID: rec.AgentID,
		Approved: rec.State == StateApproved, State: string(rec.State), Content: rec.Request.Content}
	if rec.Escalation != nil && rec.Escalation.Review != nil {
		rv := rec.Escalation.Review
		d.Reviewer, d.Decision, d.Comment = rv.Reviewer, rv.Decision, rv.Comment
	}
	return d
}

func externalKind(requestType string) string {
	switch requestType {
	case TypeSpawn:
		return "spawn"
	case TypeWorkflow:
		return "workflow"
	case TypeMCP:
		return "tool call (MCP)"
	case TypeA2AInput:
		return "input for an A2A task"
	case TypeMCPTool:
		return "tool definition (MCP)"
	}
	return "message"
}

// afterResolve runs the Resolver of an external escalation. Its failure is
// logged: the decision itself stands and is audited already.
func (s *Service) afterResolve(ctx context.Context, rec *Record) {
	fn := s.resolver(rec.Request.RequestType)
	if fn == nil {
		return
	}
	if err := fn(ctx, decided(rec)); err != nil {
		s.log.Error("acting on an escalation decision failed", "request_id", rec.ID, "type", rec.Request.RequestType, "error", err.Error())
	}
}

// Person authenticates an admin or reviewer bearer token for another
// component's /admin route (the same tokens, compared the same way, as
// /admin/escalations). A refusal is audited as auth.failure and returned
// as the error to send; who is "admin:<name>" or "reviewer:<name>".
func (s *Service) Person(r *http.Request) (who string, err error) {
	p, err := s.adminAuth(r)
	if err != nil {
		return "", err
	}
	return p.role() + ":" + p.Name, nil
}
