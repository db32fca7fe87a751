package approval

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/policy"
)

// Submit serves POST /agent/request: an AgentRequest in, a
// LibrarianResponse out.
//
// The steps, in order: the per-agent rate (a malformed request spends it
// too, or hammering with garbage would be free); the body through its size
// bound; strict decoding; agent_id against the authenticated agent; the
// agent.request audit entry (written for every request that got this far,
// valid or not, with the SHA-256 of the exact body); then the decision.
func (s *Service) Submit() http.Handler { return endpoint(s.submit) }

func (s *Service) submit(w http.ResponseWriter, r *http.Request) error {
	start := time.Now()
	ex := scope.Get(r.Context())
	agent := ex.Agent
	if err := s.allow(w, r, ex); err != nil {
		return err
	}
	body, err := readBody(w, r, s.bodyLimit(agent))
	if err != nil {
		if aerr := s.auditReceipt(r, ex, "", nil, nil, err); aerr != nil {
			return aerr
		}
		return err
	}
	req, err := DecodeAgentRequest(body)
	if err == nil && req.AgentID != agent.ID {
		// Acting as another agent is a policy violation, not a malformed
		// request: 403, and the attempt is in the audit trail.
		err = apierror.Forbidden(fmt.Sprintf("agent_id %s does not match the authenticated agent %s: an agent may act only as itself.", quoteID(req.AgentID), agent.ID))
	}
	id := ""
	if err == nil {
		id = newID()
		if req.RequestType == TypeReport {
			id = req.RequestID
		}
	}
	if aerr := s.auditReceipt(r, ex, id, body, req, err); aerr != nil {
		return aerr
	}
	if err != nil {
		return err
	}
	var resp *LibrarianResponse
	if req.RequestType == TypeReport {
		resp, err = s.report(r.Context(), ex, req, start)
	} else {
		_, resp, err = s.process(r.Context(), ex, id, req, start, r.URL.Path, defaultQueryLimit)
	}
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, resp)
}

// bodyLimit bounds a request body: the protocol's content size plus
// overhead (see bodyOverhead), and never more than the agent's own
// max_request_size.
func (s *Service) bodyLimit(a *roster.Agent) int64 {
	n := 2*int64(s.cur().cfg.Protocol.Limits.MaxContentSize) + bodyOverhead
	if a.MaxRequestSize > 0 && int64(a.MaxRequestSize) < n {
		n = int64(a.MaxRequestSize)
	}
	return n
}

// allow applies the per-agent rate of POST /agent/request, setting OpenAI's
// x-ratelimit-* headers, and audits a refusal.
func (s *Service) allow(w http.ResponseWriter, r *http.Request, ex *scope.Exchange) error {
	res, err := s.limiter.Allow(r.Context(), "approval:"+ex.Agent.ID, s.cur().rate, 1)
	if err != nil {
		return fmt.Errorf("approval rate limiter: %w", err)
	}
	h := w.Header()
	door.SetLimitHeaders(h, "requests", res)
	if res.Allowed {
		return nil
	}
	rec := audit.Record{Kind: audit.KindRateLimitReject, AgentID: ex.Agent.ID, SessionID: ex.SessionID, RequestID: ex.RequestID,
		Object: audit.Members("route", r.URL.Path, "dimension", "approval_requests", "limit", s.cur().rate.N, "period_s", s.cur().rate.Period.Seconds())}
	if err := s.record(r.Context(), rec); err != nil {
		return err
	}
	return apierror.RateLimited(fmt.Sprintf("Rate limit reached for agent %s on /agent/request: %d per %s. Retry after %s.",
		ex.Agent.ID, s.cur().rate.N, s.cur().rate.Period, door.RoundUp(res.RetryAfter)), door.RetryAfter(h, res))
}

// auditReceipt writes the agent.request entry. body is nil when it could
// not be read; req is nil when it could not be decoded; refusal is the
// error the agent is about to get, if any.
func (s *Service) auditReceipt(r *http.Request, ex *scope.Exchange, id string, body []byte, req *AgentRequest, refusal error) error {
	sum := audit.Members("route", r.URL.Path, "http_request_id", ex.RequestID, "bytes", len(body))
	rec := audit.Record{Kind: audit.KindAgentRequest, AgentID: ex.Agent.ID, SessionID: ex.SessionID, RequestID: id, Object: sum}
	if id == "" {
		rec.RequestID = ex.RequestID
	}
	if body != nil {
		rec.PayloadSHA256 = sha256Hex(body)
	}
	if req != nil {
		if req.SessionID != "" {
			rec.SessionID = req.SessionID
		}
		sum.Any("request_type", req.RequestType)
		sum.Any("action", req.Action)
		sum.Any("target_type", req.TargetType)
		sum.Any("target_path", req.TargetPath)
		sum.Any("claimed_agent_id", req.AgentID)
		sum.Any("content_sha256", sha256Hex([]byte(req.Content)))
		sum.Any("content_bytes", len(req.Content))
		sum.Any("references", strs(req.References))
		sum.Any("deviations", len(req.Deviations))
		if req.RequestType == TypeReport {
			sum.Any("report_for", req.RequestID)
		}
	}
	if ex.CorrelationID != "" {
		sum.Any("correlation_id", ex.CorrelationID)
	}
	if refusal != nil {
		e := apierror.From(refusal)
		sum.Str("verdict", "refused")
		sum.Any("status", e.Status)
		sum.Any("error_code", e.Code)
		sum.Any("error", e.Message)
	} else {
		sum.Str("verdict", "accepted")
	}
	return s.record(r.Context(), rec)
}

// evaluate looks up the facts of req (whose request id is id) and asks the
// policy, both bounded by timeouts.validation. The client's cancellation is
// detached: the record must end in the policy's verdict, not in whatever a
// hang-up left behind. Facts that cannot be looked up reject the request
// without asking the policy (fail closed): a policy told nothing about the
// target must not approve a change to it.
func (s *Service) evaluate(ctx context.Context, agent *roster.Agent, id string, req *AgentRequest, az Authz) (policy.ApprovalDecision, string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), s.cur().cfg.Protocol.Timeouts.Validation.D())
	defer cancel()
	f, err := s.facts(ctx, id, req)
	if err != nil {
		dec := factsUnavailable()
		s.metrics.PolicyDecision(metricsPoint, dec.Status)
		return dec, "facts: " + err.Error()
	}
	start := time.Now()
	dec, err := s.decider.Approval(ctx, s.input(agent, req, az, f))
	s.metrics.ApprovalValidation(time.Since(start))
	dec, cause := failClosed(dec, err, az)
	s.metrics.PolicyDecision(metricsPoint, dec.Status)
	return dec, cause
}

// factsUnavailable is the rejection of a request whose facts could not be
// looked up. Its confidence is 0, as for every decision the policy did not
// make.
func factsUnavailable() policy.ApprovalDecision {
	sugg := "Retry later; if it persists, tell the gateway's operators (the state backend may be unavailable)."
	return policy.ApprovalDecision{
		Status: StatusRejected, FailClosed: true,
		Feedback:    "The gateway could not establish the facts the policy decides on, so the request is denied (fail closed).",
		Violations:  []policy.Violation{{Rule: violationFacts, Description: "the target's existence or the references could not be looked up", Suggestion: sugg}},
		Suggestions: []string{sugg},
	}
}

// failClosed turns whatever the policy returned into a decision the service
// can act on, denying when in doubt: an error, a decision the engine marked
// FailClosed, an unknown status, or an approval the RBAC verdict does not
// allow (belt and braces: the policy should already reject those) all
// become rejections that say why. The second result is the failure's text,
// for the audit entry.
func failClosed(dec policy.ApprovalDecision, err error, az Authz) (policy.ApprovalDecision, string) {
	if err != nil || dec.FailClosed {
		cause := dec.Error
		if err != nil {
			cause = err.Error()
		}
		if cause == "" {
			cause = "policy failed closed"
		}
		// The engine's own fail-closed rejection names the precise cause
		// (policy.error, policy.undefined, policy.malformed): keep it.
		if dec.Status == StatusRejected && len(dec.Violations) > 0 {
			return dec, cause
		}
		// Confidence 0, as in the engine's own fail-closed rejection:
		// confidence is the policy's, and the policy said nothing.
		return policy.ApprovalDecision{
			Status: StatusRejected, Confidence: 0, DecisionID: dec.DecisionID, Revision: dec.Revision, FailClosed: true,
			Feedback:    "The policy could not be evaluated, so the request is denied (fail closed).",
			Violations:  []policy.Violation{{Rule: violationPolicyError, Description: "policy evaluation failed or returned no decision", Suggestion: "Retry later; if it persists, tell the gateway's operators."}},
			Suggestions: []string{"Retry later; if it persists, tell the gateway's operators."},
		}, cause
	}
	switch dec.Status {
	case StatusApproved, StatusRejected, StatusEscalated, StatusClarificationNeeded:
	default:
		dec.Violations = append(dec.Violations, policy.Violation{Rule: violationPolicyStatus,
			Description: fmt.Sprintf("the policy returned the unknown status %q", dec.Status)})
		dec.Status = StatusRejected
		dec.Feedback = "The policy returned no usable decision, so the request is denied (fail closed)."
	}
	if !az.Allowed && (dec.Status == StatusApproved || dec.Status == StatusEscalated) {
		dec.Violations = append(dec.Violations, policy.Violation{Rule: violationAuthz, Description: "not authorized: " + az.Reason,
			Suggestion: "Ask for an action and target type your registry entry allows."})
		dec.Status = StatusRejected
		dec.Feedback = "The agent is not authorized for this action and target (" + az.Reason + ")."
	}
	return dec, ""
}

// stateFor maps a decision to the request's state. Only an APPROVAL
// authorises anything, so only an APPROVAL can be APPROVED or ESCALATED:
// a VALIDATE is a dry run whose verdict is its answer (COMPLETED), and a
// QUERY is answered (COMPLETED) or refused (REJECTED). clarification_needed
// ends an APPROVAL as REJECTED: the agent resubmits with what was asked.
func stateFor(requestType, status string) State {
	switch requestType {
	case TypeApproval:
		switch status {
		case StatusApproved:
			return StateApproved
		case StatusEscalated:
			return StateEscalated
		}
		return StateRejected
	case TypeQuery:
		if status == StatusApproved {
			return StateCompleted
		}
		return StateRejected
	}
	return StateCompleted
}

// process runs an APPROVAL, VALIDATE or QUERY through the policy and stores
// its record: PENDING and VALIDATING are stored first (so a status poll
// during the decision sees VALIDATING), the final state only once the
// decision is in the audit trail, so nothing is ever APPROVED unaudited.
func (s *Service) process(ctx context.Context, ex *scope.Exchange, id string, req *AgentRequest, start time.Time, route string, queryLimit int) (*Record, *LibrarianResponse, error) {
	agent := ex.Agent
	now := s.now().UTC()
	rec := &Record{ID: id, AgentID: agent.ID, Request: *req, ContentSHA256: sha256Hex([]byte(req.Content)), CreatedAt: now}
	rec.move(StatePending, now, agent.ID, "")
	rec.move(StateValidating, now, byGateway, "")
	if err := s.store.Create(ctx, rec); err != nil {
		return nil, nil, fmt.Errorf("store request %s: %w", id, err)
	}
	s.changed(rec)

	az := s.cur().authz.Authorize(agent.ID, policy.ActionFor(req.RequestType, req.Action), req.TargetType)
	dec, evalErr := s.evaluate(ctx, agent, id, req, az)
	if evalErr != "" {
		s.log.Error("approval policy failed; request denied", "request_id", id, "agent_id", agent.ID, "error", evalErr)
	}
	state := stateFor(req.RequestType, dec.Status)
	if dec.Feedback == "" {
		dec.Feedback = defaultFeedback(dec)
	}
	now = s.now().UTC()
	resp := s.response(id, now, dec, state, rec.ContentSHA256)
	var esc *Escalation
	switch {
	case state == StateApproved:
		loc := dec.ApprovedLocation
		if loc == "" {
			loc = req.TargetPath
		}
		resp.ApprovedLocation = optional(loc)
		// The gateway's id for what a CREATE creates; a modify or delete
		// acts on an existing target and is assigned nothing.
		resp.AssignedID = optional(assignedFor(id, req))
	case state == StateEscalated:
		reason := dec.EscalationReason
		if reason == "" {
			reason = "The policy requires a human decision."
		}
		esc = &Escalation{Kind: escalationKindPolicy, Reason: reason, At: now}
		s.escalationFields(resp, id, reason)
	case dec.Status == StatusEscalated:
		// A VALIDATE that a real APPROVAL would escalate: say why, but
		// queue nothing for people.
		resp.EscalationReason = optional(dec.EscalationReason)
	}
	if req.RequestType == TypeQuery && state == StateCompleted {
		s.answerQuery(resp, req.Content, queryLimit)
	}
	resp.ProcessingTimeMS = time.Since(start).Milliseconds()

	decided := &Decision{ID: dec.DecisionID, Revision: dec.Revision, Status: dec.Status, Violations: resp.Violations, Error: evalErr}
	sum := decisionSummary(req, decided, az, state, rec.ContentSHA256)
	sum.Any("route", route)
	sum.Any("confidence", dec.Confidence)
	if resp.AssignedID != nil {
		sum.Any("assigned_id", *resp.AssignedID)
	}
	if esc != nil {
		sum.Any("escalation_reason", esc.Reason)
	}
	if err := s.record(ctx, audit.Record{Kind: audit.KindAgentDecision, AgentID: agent.ID, SessionID: sessionOf(ex, req), RequestID: id, Object: sum}); err != nil {
		s.abandon(ctx, id, "the decision could not be audited")
		return nil, nil, err
	}
	stored, err := s.update(ctx, id, func(r *Record) error {
		r.Decision, r.Response, r.Escalation = decided, resp, esc
		r.move(state, now, byPolicy, "")
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("store decision of %s: %w", id, err)
	}
	if state == StateEscalated {
		s.notify(stored)
	}
	return stored, resp, nil
}

// defaultFeedback explains a decision whose policy gave no feedback: the
// approval protocol makes feedback the explanation every response carries.
func defaultFeedback(dec policy.ApprovalDecision) string {
	switch dec.Status {
	case StatusApproved:
		return "Approved: the request complies with the policy."
	case StatusEscalated:
		if dec.EscalationReason != "" {
			return "Escalated for a human decision: " + dec.EscalationReason
		}
		return "Escalated for a human decision."
	case StatusClarificationNeeded:
		return "The policy needs clarification before it can decide; see the suggestions."
	}
	return fmt.Sprintf("Rejected with %d violation(s); see violations and suggestions.", len(dec.Violations))
}

// abandon rejects a request whose decision could not be audited (fail
// closed), so it does not stay VALIDATING forever. Best effort: the agent
// gets a 503 either way.
func (s *Service) abandon(ctx context.Context, id, why string) {
	_, err := s.update(context.WithoutCancel(ctx), id, func(r *Record) error {
		if r.State.Terminal() {
			return errNoChange
		}
		r.move(StateRejected, s.now().UTC(), byAuditFailure, why)
		return nil
	})
	if err != nil && !errors.Is(err, errNoChange) {
		s.log.Error("request left in its state after an audit failure", "request_id", id, "error", err.Error())
	}
}

var errNoChange = errors.New("no change")

// response builds the parts of a LibrarianResponse every request has.
func (s *Service) response(id string, now time.Time, dec policy.ApprovalDecision, state State, digest string) *LibrarianResponse {
	return &LibrarianResponse{
		RequestID: id, Timestamp: now, Status: dec.Status, Confidence: dec.Confidence, Feedback: dec.Feedback,
		Violations: nonNil(dec.Violations), Suggestions: nonNil(dec.Suggestions), Constraints: nonNil(dec.Constraints),
		ContentSHA256: digest, State: state, DecisionID: dec.DecisionID,
	}
}

// escalationFields fills the approval protocol's escalation fields. The
// estimate is the deadline: a request not decided within timeouts.escalation is
// rejected.
func (s *Service) escalationFields(resp *LibrarianResponse, id, reason string) {
	resp.EscalationReason = optional(reason)
	resp.HumanReviewURL = optional(s.reviewURL(id))
	mins := int(math.Ceil(s.cur().cfg.Protocol.Timeouts.Escalation.D().Minutes()))
	resp.EstimatedReviewTime = &mins
}

// answerQuery fills context and relevant_nodes from the catalogue.
func (s *Service) answerQuery(resp *LibrarianResponse, query string, limit int) {
	matches := s.cur().cat.Search(query, limit)
	nodes := make([]NodeSummary, 0, len(matches))
	specs := make([]any, 0, len(matches))
	for _, m := range matches {
		nodes = append(nodes, NodeSummary{ID: m.Spec.ID, Title: m.Spec.Title, Type: m.Spec.Type, Tags: nonNil(m.Spec.Tags), Path: m.Spec.Path, Score: m.Score})
		body, truncated := m.Spec.Body, false
		if len(body) > maxSpecBody {
			body, truncated = truncateUTF8(body, maxSpecBody), true
		}
		specs = append(specs, map[string]any{"id": m.Spec.ID, "title": m.Spec.Title, "body": body, "truncated": truncated})
	}
	resp.RelevantNodes = nodes
	resp.Context = map[string]any{"query": query, "matches": len(matches), "catalogue_size": s.cur().cat.Len(), "specifications": specs}
	if resp.Feedback == "" {
		resp.Feedback = fmt.Sprintf("%d specification(s) match the query.", len(matches))
	}
}

// defaultQueryLimit is how many specifications a QUERY returns.
const defaultQueryLimit = 5

// maxSpecBody bounds each specification's text in an answer.
const maxSpecBody = 8 << 10

func truncateUTF8(s string, n int) string {
	for n > 0 && n < len(s) && s[n]&0xC0 == 0x80 {
		n--
	}
	return s[:n]
}

func decisionSummary(req *AgentRequest, d *Decision, az Authz, state State, digest string) *audit.Object {
	sum := audit.Members(
		"decision_id", d.ID,
		"policy_revision", d.Revision,
		"status", d.Status,
		"state", string(state),
		"violations", violationsSummary(d.Violations),
		"request_type", req.RequestType,
		"action", req.Action,
		"target_type", req.TargetType,
		"authz", map[string]any{"allowed": az.Allowed, "reason": az.Reason},
		"content_sha256", digest)
	if d.Error != "" {
		sum.Any("error", d.Error)
	}
	return sum
}

func sessionOf(ex *scope.Exchange, req *AgentRequest) string {
	if req != nil && req.SessionID != "" {
		return req.SessionID
	}
	return ex.SessionID
}

func optional(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}

func nonNil[T any](v []T) []T {
	if v == nil {
		return []T{}
	}
	return v
}

// report handles a REPORT: the completion (or not) of an APPROVED request,
// checked against the approved content's digest.
func (s *Service) report(ctx context.Context, ex *scope.Exchange, req *AgentRequest, start time.Time) (*LibrarianResponse, error) {
	agent := ex.Agent
	orig, err := s.store.Get(ctx, req.RequestID)
	if errors.Is(err, ErrNotFound) || (err == nil && orig.AgentID != agent.ID) {
		return nil, notFound(req.RequestID)
	}
	if err != nil {
		return nil, fmt.Errorf("load request %s: %w", req.RequestID, err)
	}
	if orig.State == StateExpired {
		return nil, s.refuseExpired(ctx, ex, req, orig)
	}
	inheritTarget(req, orig)
	az := s.cur().authz.Authorize(agent.ID, policy.ActionFor(req.RequestType, req.Action), req.TargetType)
	dec, evalErr := s.evaluate(ctx, agent, orig.ID, req, az)
	now := s.now().UTC()
	completed := req.Completed == nil || *req.Completed
	claimed := ""
	if req.ChangesMade != nil {
		claimed = req.ChangesMade.ContentSHA256
	}
	deviation := completed && claimed != "" && claimed != orig.ContentSHA256

	dec, to, note, outcome := judgeReport(dec, orig, req, completed, deviation, claimed)
	resp := s.response(orig.ID, now, dec, to, orig.ContentSHA256)
	esc := s.reportAnswer(resp, orig, dec, req, outcome, claimed, now)
	resp.ProcessingTimeMS = time.Since(start).Milliseconds()

	decided := &Decision{ID: dec.DecisionID, Revision: dec.Revision, Status: dec.Status, Violations: resp.Violations, Error: evalErr}
	sum := decisionSummary(req, decided, az, to, orig.ContentSHA256)
	sum.Str("route", "/agent/request")
	sum.Any("report_outcome", outcome)
	sum.Any("reported_sha256", claimed)
	sum.Any("deviation", outcome == "deviation")
	if err := s.record(ctx, audit.Record{Kind: audit.KindAgentDecision, AgentID: agent.ID, SessionID: sessionOf(ex, req), RequestID: orig.ID, Object: sum}); err != nil {
		return nil, err
	}
	if outcome == "rejected" {
		return resp, nil
	}
	if err := s.storeReport(ctx, agent.ID, orig.ID, resp, esc, to, note, outcome, now); err != nil {
		return nil, err
	}
	return resp, nil
}

// inheritTarget fills in what a REPORT does not restate from the request
// it reports on: a REPORT is about the approved change, so RBAC and the
// policy judge the same action and target.
func inheritTarget(req *AgentRequest, orig *Record) {
	if req.Action == "" {
		req.Action = orig.Request.Action
	}
	if req.TargetType == "" {
		req.TargetType = orig.Request.TargetType
	}
	if req.TargetPath == "" {
		req.TargetPath = orig.Request.TargetPath
	}
	if req.TargetID == "" {
		req.TargetID = orig.Request.TargetID
	}
}

// judgeReport is what the REPORT does to the request, if the policy
// accepts it: the decision (rejected when the request cannot be reported
// on), the state the request moves to, the history note and the outcome
// (rejected, deviation, not_completed, escalated or completed).
func judgeReport(dec policy.ApprovalDecision, orig *Record, req *AgentRequest, completed, deviation bool, claimed string) (_ policy.ApprovalDecision, to State, note, outcome string) {
	to, note, outcome = orig.State, "", "rejected"
	if dec.Status == StatusApproved || dec.Status == StatusEscalated {
		switch {
		case orig.Request.RequestType != TypeApproval:
			dec = reject(dec, violationReportType, fmt.Sprintf("request %s is a %s; only an APPROVAL can be reported on", orig.ID, orig.Request.RequestType),
				"Report on the request_id of an approved APPROVAL.")
		case orig.State != StateApproved:
			dec = reject(dec, violationReportState, fmt.Sprintf("request %s is %s; only an APPROVED request can be reported on", orig.ID, orig.State),
				"Poll /agent/status/"+orig.ID+" and report once it is APPROVED.")
		case deviation:
			to, outcome = StateEscalated, "deviation"
			note = "REPORT claims content_sha256 " + claimed + ", approved " + orig.ContentSHA256
		case !completed:
			outcome, note = "not_completed", "REPORT: not completed"
			if req.ChangesMade != nil && req.ChangesMade.Summary != "" {
				note += ": " + clip(req.ChangesMade.Summary, 200)
			}
		case dec.Status == StatusEscalated:
			// The policy wants a person to look at what was done (e.g.
			// deviations it allows but escalates): the change is made, so
			// it is queued like a deviation.
			to, outcome, note = StateEscalated, "escalated", "the policy escalated the REPORT"
		default:
			to, outcome = StateCompleted, "completed"
		}
	}
	return dec, to, note, outcome
}

// reportAnswer completes the answer to a REPORT for its outcome, and
// returns the escalation it opens (nil: none).
func (s *Service) reportAnswer(resp *LibrarianResponse, orig *Record, dec policy.ApprovalDecision, req *AgentRequest, outcome, claimed string, now time.Time) *Escalation {
	var esc *Escalation
	switch outcome {
	case "deviation":
		reason := fmt.Sprintf("Deviation: the REPORT claims content with SHA-256 %s, but the approval covers %s.", claimed, orig.ContentSHA256)
		esc = &Escalation{Kind: escalationKindDeviation, Reason: reason, At: now, ReportedSHA256: claimed, Report: req}
		resp.Status = StatusEscalated
		resp.Feedback = "The reported change differs from the approved content; a person must accept or reject it."
		resp.Violations = append(resp.Violations, policy.Violation{Rule: "report.deviation", Description: reason,
			Suggestion: "Apply exactly the approved content, or submit a new APPROVAL for the changed content."})
		s.escalationFields(resp, orig.ID, reason)
	case "escalated":
		reason := dec.EscalationReason
		if reason == "" {
			reason = "The policy requires a human decision on the reported change."
		}
		esc = &Escalation{Kind: escalationKindReport, Reason: reason, At: now, ReportedSHA256: claimed, Report: req}
		s.escalationFields(resp, orig.ID, reason)
	case "completed":
		resp.Feedback = "Completion recorded; the request is COMPLETED."
		if orig.Response != nil {
			resp.ApprovedLocation, resp.AssignedID = orig.Response.ApprovedLocation, orig.Response.AssignedID
		}
	case "not_completed":
		resp.Feedback = "Report recorded; the request stays APPROVED until a REPORT with completed: true."
	}
	return esc
}

// storeReport moves the request as the REPORT's outcome says, unless
// another REPORT, a person or the expiry got there first.
func (s *Service) storeReport(ctx context.Context, agentID, id string, resp *LibrarianResponse, esc *Escalation, to State, note, outcome string, now time.Time) error {
	stored, err := s.update(ctx, id, func(r *Record) error {
		if r.State == StateExpired {
			return errExpired
		}
		if r.State != StateApproved {
			return errStateChanged
		}
		switch outcome {
		case "not_completed":
			r.History = append(r.History, Transition{State: r.State, At: now, By: agentID, Note: note})
			r.UpdatedAt = now
			return nil
		case "deviation", "escalated":
			r.Escalation = esc
		}
		r.Response = resp
		r.move(to, now, agentID, note)
		return nil
	})
	if errors.Is(err, errStateChanged) || errors.Is(err, errExpired) {
		// Another REPORT (or a person, or the expiry) got there first; the
		// entry above described a change that did not happen, so say so.
		s.superseded(ctx, agentID, id, "report")
		if errors.Is(err, errExpired) {
			return conflict("Request " + quoteID(id) + " EXPIRED while the REPORT was processed: its approval no longer covers the change. Submit a new APPROVAL.")
		}
		return conflict("Request " + quoteID(id) + " changed state while the REPORT was processed; poll its status.")
	}
	if err != nil {
		return fmt.Errorf("store report on %s: %w", id, err)
	}
	if esc != nil {
		s.notify(stored)
	}
	return nil
}

var (
	errStateChanged = errors.New("state changed concurrently")
	errExpired      = errors.New("approval expired")
)

// refuseExpired answers a REPORT on an EXPIRED request: 409, because the
// approval it reports on no longer exists, and the REPORT changes nothing.
// The refusal is audited like any decision on the request, so the trail
// shows the late REPORT.
func (s *Service) refuseExpired(ctx context.Context, ex *scope.Exchange, req *AgentRequest, orig *Record) error {
	at := orig.UpdatedAt
	validity := s.validity()
	sum := audit.Members("route", "/agent/request", "request_type", req.RequestType, "state", string(orig.State),
		"report_outcome", "expired", "applied", false, "expired_at", at.Format(time.RFC3339Nano))
	if err := s.record(ctx, audit.Record{Kind: audit.KindAgentDecision, AgentID: orig.AgentID, SessionID: sessionOf(ex, req), RequestID: orig.ID, Object: sum}); err != nil {
		return err
	}
	return conflict(fmt.Sprintf("Request %s is EXPIRED (since %s): it was not REPORTed within timeouts.approval_validity (%s) of its approval, "+
		"so the approval no longer covers the change. Submit a new APPROVAL for it.", quoteID(orig.ID), at.UTC().Format(time.RFC3339), validity))
}

// superseded records that an audited step did not take effect because the
// record changed in between (optimistic concurrency lost the race).
func (s *Service) superseded(ctx context.Context, agentID, id, step string) {
	_ = s.record(ctx, audit.Record{Kind: audit.KindAgentDecision, AgentID: agentID, RequestID: id,
		Object: audit.Members("applied", false, "step", step, "reason", "the request changed state concurrently")})
}

func reject(dec policy.ApprovalDecision, rule, desc, suggestion string) policy.ApprovalDecision {
	dec.Status = StatusRejected
	dec.Feedback = desc
	dec.Violations = append(append([]policy.Violation(nil), dec.Violations...), policy.Violation{Rule: rule, Description: desc, Suggestion: suggestion})
	dec.Suggestions = append(append([]string(nil), dec.Suggestions...), suggestion)
	return dec
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return truncateUTF8(s, n) + "…"
}
