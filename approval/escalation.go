package approval

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/people"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/policy"
)

// principal is a person authenticated by an admin or reviewer token.
type principal struct {
	Name  string
	Admin bool
}

// role is how a principal appears in history and audit entries.
func (p principal) role() string {
	if p.Admin {
		return "admin"
	}
	return "reviewer"
}

type credential struct {
	hash [sha256.Size]byte
	who  principal
}

// credentials returns the admin's and reviewers' token hashes, decoded.
// The config loader has already checked them (64 hex digits); one that
// does not decode is skipped rather than matching a zero hash.
func credentials(cfg *config.Config) []credential {
	var out []credential
	add := func(hexHash string, p principal) {
		b, err := hex.DecodeString(hexHash)
		if err != nil || len(b) != sha256.Size {
			return
		}
		c := credential{who: p}
		copy(c.hash[:], b)
		out = append(out, c)
	}
	add(cfg.Gateway.Admin.TokenSHA256, principal{Name: "admin", Admin: true})
	for _, r := range cfg.Gateway.Admin.Reviewers {
		add(r.TokenSHA256, principal{Name: r.Name})
	}
	return out
}

// authenticate finds the person a token belongs to. Every hash is compared
// in constant time and the loop never exits early, so timing tells nothing
// about which hash, or how much of one, matched. isAgent reports an agent's
// token, which is a valid identity with no right here (403, not 401).
func (s *Service) authenticate(token string) (who principal, ok, isAgent bool) {
	h := sha256.Sum256([]byte(token))
	for _, c := range s.cur().creds {
		if subtle.ConstantTimeCompare(h[:], c.hash[:]) == 1 {
			who, ok = c.who, true
		}
	}
	for _, a := range s.cur().cfg.Agents {
		if a.TokenSHA256 != "" && subtle.ConstantTimeCompare(h[:], a.TokenHash[:]) == 1 {
			isAgent = true
		}
	}
	return who, ok, isAgent
}

// adminAuth authenticates the bearer token of an /admin request. A
// refusal is audited as auth.failure (never the token) and returned as the
// error to send; when the audit entry cannot be written, that error is
// returned instead, so no refusal goes unrecorded.
func (s *Service) adminAuth(r *http.Request) (principal, error) {
	who, err := s.bearerPrincipal(r)
	if err != nil {
		if aerr := s.auditAuthFailure(r, err); aerr != nil {
			return principal{}, aerr
		}
		return principal{}, err
	}
	return who, nil
}

// adminEndpoint is an endpoint of the /admin API: fn runs for the admin or
// reviewer behind the request's bearer token; a refused token is audited
// and answered before fn.
func (s *Service) adminEndpoint(fn func(w http.ResponseWriter, r *http.Request, who principal) error) endpoint {
	return func(w http.ResponseWriter, r *http.Request) error {
		who, err := s.adminAuth(r)
		if err != nil {
			return err
		}
		return fn(w, r, who)
	}
}

// bearerPrincipal is the admin or reviewer behind r's bearer token.
func (s *Service) bearerPrincipal(r *http.Request) (principal, error) {
	auth := r.Header.Get("Authorization")
	token, found := strings.CutPrefix(auth, "Bearer ")
	if !found || token == "" {
		return principal{}, apierror.Unauthorized("An admin or reviewer bearer token is required.")
	}
	who, ok, isAgent := s.authenticate(token)
	switch {
	case ok:
		return who, nil
	case isAgent:
		return principal{}, apierror.Forbidden("Agent tokens cannot list or decide escalations: a person must (admin or reviewer token).")
	}
	return principal{}, apierror.Unauthorized("The token is not an admin or reviewer token.")
}

// auditAuthFailure records a refused admin or reviewer authentication
// (never the token).
func (s *Service) auditAuthFailure(r *http.Request, err error) error {
	e := apierror.From(err)
	rid := ""
	if ex := scope.Lookup(r.Context()); ex != nil {
		rid = ex.RequestID
	}
	sum := &audit.Object{}
	sum.Str("route", r.URL.Path)
	sum.Str("method", r.Method)
	sum.Int("status", int64(e.Status))
	sum.Str("reason", e.Message)
	sum.Str("remote", door.RemoteIP(r))
	return s.record(r.Context(), audit.Record{Kind: audit.KindAuthFailure, RequestID: rid, Object: sum})
}

// EscalationItem is one entry of GET /admin/escalations.
type EscalationItem struct {
	RequestID     string       `json:"request_id"`
	AgentID       string       `json:"agent_id"`
	Request       AgentRequest `json:"request"`
	ContentSHA256 string       `json:"content_sha256"`
	Escalation    *Escalation  `json:"escalation"`
	Decision      *Decision    `json:"decision,omitempty"`
	ExpiresAt     time.Time    `json:"expires_at"`
	ReviewURL     string       `json:"review_url"`
}

// EscalationList is the answer of GET /admin/escalations.
type EscalationList struct {
	RequestID        string           `json:"request_id"`
	ProcessingTimeMS int64            `json:"processing_time_ms"`
	Count            int              `json:"count"`
	Escalations      []EscalationItem `json:"escalations"`
}

// Escalations serves GET /admin/escalations (admin or reviewer token): the
// requests waiting for a person, oldest first.
func (s *Service) Escalations() http.Handler { return s.adminEndpoint(s.escalations) }

func (s *Service) escalations(w http.ResponseWriter, r *http.Request, who principal) error {
	start := time.Now()
	items, err := s.pending(r.Context(), who.person())
	if err != nil {
		return err
	}
	rid := ""
	if ex := scope.Lookup(r.Context()); ex != nil {
		rid = ex.RequestID
	}
	return writeJSON(w, http.StatusOK, &EscalationList{RequestID: rid, ProcessingTimeMS: time.Since(start).Milliseconds(), Count: len(items), Escalations: items})
}

// pending are the escalations waiting for a person that who may see:
// every one for an admin or reviewer, their teams' agents' for a team's
// reviewer or owner.
func (s *Service) pending(ctx context.Context, who door.Person) ([]EscalationItem, error) {
	recs, err := s.store.Escalated(ctx)
	if err != nil {
		return nil, fmt.Errorf("list escalations: %w", err)
	}
	timeout := s.cur().cfg.Protocol.Timeouts.Escalation.D()
	items := make([]EscalationItem, 0, len(recs))
	for _, rec := range recs {
		if !who.ReviewsTeam(s.teamOf(rec.AgentID)) {
			continue
		}
		it := EscalationItem{RequestID: rec.ID, AgentID: rec.AgentID, Request: rec.Request, ContentSHA256: rec.ContentSHA256,
			Escalation: rec.Escalation, Decision: rec.Decision, ReviewURL: s.reviewURL(rec.ID)}
		if rec.Escalation != nil {
			it.ExpiresAt = rec.Escalation.At.Add(timeout)
		}
		items = append(items, it)
	}
	return items, nil
}

// Decide serves POST /admin/escalations/{id}/decision with a
// DecisionRequest. A reviewer decides under their own name (a different
// "reviewer" is refused); the admin token may name the person it acts for.
func (s *Service) Decide() http.Handler { return s.adminEndpoint(s.decide) }

func (s *Service) decide(w http.ResponseWriter, r *http.Request, who principal) error {
	start := time.Now()
	body, err := readBody(w, r, 16<<10)
	if err != nil {
		return err
	}
	var d DecisionRequest
	if err := decodeStrict(body, &d); err != nil {
		return err
	}
	if d.Decision != reviewDecisionApprove && d.Decision != reviewDecisionReject {
		return apierror.BadRequest("decision", "decision must be \"approve\" or \"reject\"; got %q.", d.Decision)
	}
	if err := checkComment(d.Comment); err != nil {
		return err
	}
	name := who.Name
	switch {
	case !who.Admin && d.Reviewer != "" && d.Reviewer != who.Name:
		return apierror.Forbidden(fmt.Sprintf("reviewer %s does not match the token, which belongs to reviewer %s.", quoteID(d.Reviewer), who.Name))
	case who.Admin && d.Reviewer != "":
		if err := checkName(d.Reviewer); err != nil {
			return err
		}
		name = d.Reviewer
	}
	if _, err := s.visible(r.Context(), who.person(), r.PathValue("id")); err != nil {
		return err
	}
	rec, err := s.resolve(r.Context(), r.PathValue("id"), d.Decision, actor{By: who.role() + ":" + name}, d.Comment, "api")
	if err != nil {
		return err
	}
	return writeJSON(w, http.StatusOK, statusOf(rec, start))
}

func checkComment(c string) error {
	if len(c) > maxComment {
		return apierror.BadRequest("comment", "comment is limited to %d bytes.", maxComment)
	}
	if !utf8.ValidString(c) {
		return apierror.BadRequest("comment", "comment is not valid UTF-8.")
	}
	return nil
}

func checkName(n string) error {
	if len(n) > 128 || strings.ContainsFunc(n, func(r rune) bool { return r < 0x20 || r == 0x7f }) {
		return apierror.BadRequest("reviewer", "reviewer must be a name of at most 128 printable characters.")
	}
	return nil
}

// actor is who decides: By as history and audit entries name them
// ("reviewer:NAME", "admin:NAME", "team_reviewer:NAME", "system:expiry"),
// and, for a person signed in with the organisation's provider, the
// subject and e-mail its ID token gave.
type actor struct {
	By, Subject, Email string
}

// actorOf is p deciding.
func actorOf(p door.Person) actor {
	return actor{By: roleOf(p) + ":" + p.Name, Subject: p.Subject, Email: p.Email}
}

// roleOf is how p appears in history and audit entries: its widest role.
func roleOf(p door.Person) string {
	return people.Held{Admin: p.Admin, Reviewer: p.Reviewer, TeamOwner: p.TeamOwner, TeamReviewer: p.TeamReviewer}.Role()
}

// teamOf is the team of agent ("" for none, or an agent no longer
// configured: admins and reviewers only see its escalations).
func (s *Service) teamOf(agent string) string {
	if a := s.cur().cfg.Agents[agent]; a != nil {
		return a.Team
	}
	return ""
}

// visible loads request id for who: another team's is 404, as an unknown
// one, so that its existence leaks nothing.
func (s *Service) visible(ctx context.Context, who door.Person, id string) (*Record, error) {
	rec, err := s.store.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("load request %s: %w", id, err)
	}
	if !who.ReviewsTeam(s.teamOf(rec.AgentID)) {
		return nil, notFound(id)
	}
	return rec, nil
}

// resolve applies a person's (or the expiry's) decision to an escalation.
// who is who decided; via says through which door ("api", "review_page",
// "expiry").
//
// The decision is audited before it takes effect (fail closed: no entry,
// no change), then applied only if the request is still ESCALATED; if it
// changed in between, a second entry says the first did not apply.
func (s *Service) resolve(ctx context.Context, id, decision string, who actor, comment, via string) (*Record, error) {
	by := who.By
	rec, err := s.store.Get(ctx, id)
	if errors.Is(err, ErrNotFound) {
		return nil, notFound(id)
	}
	if err != nil {
		return nil, fmt.Errorf("load request %s: %w", id, err)
	}
	if rec.State != StateEscalated || rec.Escalation == nil {
		return nil, conflict(fmt.Sprintf("Request %s is %s, not ESCALATED: there is nothing to decide.", quoteID(id), rec.State))
	}
	esc := rec.Escalation
	to := StateRejected
	if decision == reviewDecisionApprove {
		// Approving a deviation (or an escalated REPORT) accepts the
		// change as made, which was already applied: the request is done. Approving a policy
		// escalation authorises the change, which the agent then reports.
		to = StateApproved
		if esc.Kind == escalationKindDeviation || esc.Kind == escalationKindReport {
			to = StateCompleted
		}
	}
	now := s.now().UTC()
	sum := audit.Members(
		"reviewer", by, "decision", decision, "comment", comment, "via", via,
		"escalation_kind", esc.Kind, "escalation_reason", esc.Reason, "escalated_at", esc.At.Format(time.RFC3339Nano),
		"from", string(rec.State), "to", string(to), "content_sha256", rec.ContentSHA256)
	if esc.ReportedSHA256 != "" {
		sum.Any("reported_sha256", esc.ReportedSHA256)
	}
	if who.Subject != "" {
		sum.Str("reviewer_subject", who.Subject)
		sum.Str("reviewer_email", who.Email)
	}
	entry := audit.Record{Kind: audit.KindEscalationDecision, AgentID: rec.AgentID, SessionID: rec.Request.SessionID, RequestID: id, Object: sum}
	if err := s.record(ctx, entry); err != nil {
		return nil, err
	}
	stored, err := s.update(ctx, id, func(r *Record) error {
		if r.State != StateEscalated || r.Escalation == nil {
			return errStateChanged
		}
		r.Escalation.Review = &Review{Decision: decision, Reviewer: by, Subject: who.Subject, Email: who.Email, Comment: comment, At: now}
		if r.Response != nil {
			// The stored response is what a polling agent reads: it
			// now carries the person's verdict.
			resp := *r.Response
			resp.Timestamp, resp.State = now, to
			resp.Status, resp.Feedback = StatusRejected, "Rejected by "+by+"."
			// The escalation's advice (wait for a reviewer) is done with.
			resp.Suggestions = []string{}
			if to != StateRejected {
				resp.Status, resp.Feedback = StatusApproved, "Approved by "+by+"."
			}
			if to == StateApproved {
				// A person authorised a CREATE: it gets its id now, the
				// same one the policy's approval would have given.
				resp.AssignedID = optional(assignedFor(r.ID, &r.Request))
			}
			if comment != "" {
				resp.Feedback += " " + comment
			}
			r.Response = &resp
		}
		r.move(to, now, by, clip(comment, 200))
		r.History[len(r.History)-1].Subject, r.History[len(r.History)-1].Email = who.Subject, who.Email
		return nil
	})
	if errors.Is(err, errStateChanged) {
		_ = s.record(ctx, audit.Record{Kind: audit.KindEscalationDecision, AgentID: rec.AgentID, RequestID: id,
			Object: audit.Members("reviewer", by, "decision", decision, "applied", false, "reason", "the request was decided concurrently")})
		return nil, conflict("Request " + quoteID(id) + " was decided by someone else in the meantime.")
	}
	if err != nil {
		return nil, fmt.Errorf("store decision on %s: %w", id, err)
	}
	outcome := escalationApproved
	switch {
	case via == "expiry":
		outcome = escalationExpired
	case to == StateRejected:
		outcome = escalationRejected
	}
	s.metrics.ApprovalEscalation(outcome)
	s.afterResolve(ctx, stored)
	return stored, nil
}

// Outcomes of an escalation, for the escalations counter.
const (
	escalationApproved = "approved"
	escalationRejected = "rejected"
	escalationExpired  = "expired"
)

// validity is timeouts.approval_validity; the config loader defaults it
// to 24h, and a configuration built otherwise (tests, tools) gets the same.
func (s *Service) validity() time.Duration {
	if d := s.cur().cfg.Protocol.Timeouts.ApprovalValidity.D(); d > 0 {
		return d
	}
	return 24 * time.Hour
}

// approvedAt is when rec entered its current APPROVED state: the first
// entry of the run of APPROVED entries that ends its history. A REPORT of
// an unfinished change appends an APPROVED entry (a note) but does not
// renew the approval, so validity counts from the approval itself.
func approvedAt(rec *Record) time.Time {
	at := rec.UpdatedAt
	for i := len(rec.History) - 1; i >= 0 && rec.History[i].State == StateApproved; i-- {
		at = rec.History[i].At
	}
	return at
}

// ExpireApprovals moves every APPROVED request that was not REPORTed done
// within timeouts.approval_validity of its approval to EXPIRED (by
// "system:expiry") and returns how many it expired. Like an escalation's
// expiry, each is audited (agent.decision, step "expiry") before it takes
// effect and applies only to a request still APPROVED. Failures are
// logged; the next run retries them.
func (s *Service) ExpireApprovals(ctx context.Context) int {
	validity := s.validity()
	deadline := s.now().Add(-validity)
	recs, err := s.store.ApprovedBefore(ctx, deadline)
	if err != nil {
		s.log.Error("approval expiry: list approvals", "error", err.Error())
		return 0
	}
	n := 0
	for _, rec := range recs {
		// The index and the record are read apart: check again.
		if rec.State != StateApproved || !approvedAt(rec).Before(deadline) {
			continue
		}
		if err := s.expireApproval(ctx, rec, deadline, validity); err != nil {
			s.log.Warn("approval expiry", "request_id", rec.ID, "error", err.Error())
			continue
		}
		s.log.Info("approval expired", "request_id", rec.ID, "agent_id", rec.AgentID)
		n++
	}
	return n
}

// expireApproval expires rec, an APPROVED request approved before
// deadline: audited first, then applied if it is still so.
func (s *Service) expireApproval(ctx context.Context, rec *Record, deadline time.Time, validity time.Duration) error {
	since := approvedAt(rec)
	now := s.now().UTC()
	note := fmt.Sprintf("Not REPORTed within %s of its approval: expired.", validity)
	sum := audit.Members("step", "expiry", "by", byExpiry, "from", string(StateApproved), "to", string(StateExpired),
		"approved_at", since.Format(time.RFC3339Nano), "approval_validity_ms", validity.Milliseconds(),
		"request_type", rec.Request.RequestType, "action", rec.Request.Action, "target_type", rec.Request.TargetType,
		"content_sha256", rec.ContentSHA256)
	if err := s.record(ctx, audit.Record{Kind: audit.KindAgentDecision, AgentID: rec.AgentID, SessionID: rec.Request.SessionID, RequestID: rec.ID, Object: sum}); err != nil {
		return err
	}
	_, err := s.update(ctx, rec.ID, func(r *Record) error {
		if r.State != StateApproved || !approvedAt(r).Before(deadline) {
			return errStateChanged
		}
		if r.Response != nil {
			// What a polling agent reads: the approval is withdrawn, and why.
			resp := *r.Response
			sugg := "Submit a new APPROVAL for the change; REPORT within " + validity.String() + " of its approval."
			resp.Timestamp, resp.State, resp.Status = now, StateExpired, StatusRejected
			resp.Feedback = "The approval expired: the change was not REPORTed done within " + validity.String() + " of its approval."
			resp.Violations = append(append([]policy.Violation{}, resp.Violations...), policy.Violation{Rule: violationExpired,
				Description: "approved at " + since.UTC().Format(time.RFC3339) + " and not REPORTed within timeouts.approval_validity", Suggestion: sugg})
			resp.Suggestions = append(append([]string{}, resp.Suggestions...), sugg)
			r.Response = &resp
		}
		r.move(StateExpired, now, byExpiry, note)
		return nil
	})
	if errors.Is(err, errStateChanged) {
		// A REPORT got there first: the entry above did not apply.
		s.superseded(ctx, rec.AgentID, rec.ID, "expiry")
		return err
	}
	return err
}

// ExpireEscalations rejects every escalation older than
// timeouts.escalation (by "system:expiry") and returns how many it
// rejected. Failures are logged; the next run retries them.
func (s *Service) ExpireEscalations(ctx context.Context) int {
	recs, err := s.store.Escalated(ctx)
	if err != nil {
		s.log.Error("escalation expiry: list escalations", "error", err.Error())
		return 0
	}
	timeout := s.cur().cfg.Protocol.Timeouts.Escalation.D()
	deadline := s.now().Add(-timeout)
	n := 0
	for _, rec := range recs {
		if rec.Escalation == nil || !rec.Escalation.At.Before(deadline) {
			continue
		}
		_, err := s.resolve(ctx, rec.ID, reviewDecisionReject, actor{By: byExpiry}, fmt.Sprintf("No decision within %s: rejected by expiry.", timeout), "expiry")
		if err != nil {
			s.log.Warn("escalation expiry", "request_id", rec.ID, "error", err.Error())
			continue
		}
		s.log.Info("escalation expired", "request_id", rec.ID, "agent_id", rec.AgentID)
		n++
	}
	return n
}

// Run expires escalations and approvals, and drops expired review
// sessions and old records, until ctx is done; then it ends the event
// streams and waits for the notifications in flight. The lead starts it
// once per process; with several replicas each may run it, because an
// expiry only applies to a request still ESCALATED (APPROVED).
func (s *Service) Run(ctx context.Context) {
	every := min(s.cur().cfg.Protocol.Timeouts.Escalation.D(), s.validity()) / 24
	every = min(max(every, time.Second), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			s.stopOnce.Do(func() { close(s.stop) })
			s.notifying.Wait()
			return
		case <-t.C:
		}
		s.pruneSessions(ctx)
		// With a shared store only the replica holding the lease expires
		// escalations and approvals, so each expiry is decided and audited
		// once.
		if l, ok := s.store.(interface {
			Lease(ctx context.Context, name string, ttl time.Duration) (bool, error)
		}); ok {
			if held, err := l.Lease(ctx, "escalation-expiry", every); err != nil || !held {
				continue
			}
		}
		s.ExpireEscalations(ctx)
		s.ExpireApprovals(ctx)
		if p, ok := s.store.(Pruner); ok {
			if n, err := p.Prune(ctx, s.now().Add(-s.retention)); err != nil {
				s.log.Warn("approval store prune", "error", err.Error())
			} else if n > 0 {
				s.log.Info("approval store pruned", "records", n)
			}
		}
	}
}

// notify posts the escalation to the webhook in the background. It never
// blocks a request: at most cap(notifySlots) posts are in flight, and an
// escalation beyond that is logged and not posted (it is in the queue and
// the audit trail either way). The text names the agent, the change and
// the reason, never the content, which may be confidential.
func (s *Service) notify(rec *Record) {
	if s.cur().webhook == "" || rec.Escalation == nil {
		return
	}
	select {
	case s.notifySlots <- struct{}{}:
	default:
		s.log.Warn("escalation webhook skipped: too many notifications in flight", "request_id", rec.ID)
		return
	}
	req := rec.Request
	target := req.TargetType
	if req.TargetPath != "" {
		target += " " + req.TargetPath
	}
	text := fmt.Sprintf("Escalation (%s): agent %s asks to %s %s. Reason: %s Review: %s",
		rec.Escalation.Kind, slackEscape(rec.AgentID), slackEscape(req.Action), slackEscape(target),
		slackEscape(rec.Escalation.Reason), s.reviewURL(rec.ID))
	body, _ := json.Marshal(map[string]string{"text": text})
	s.notifying.Add(1)
	go func() {
		defer s.notifying.Done()
		defer func() { <-s.notifySlots }()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		hr, err := http.NewRequestWithContext(ctx, http.MethodPost, s.cur().webhook, bytes.NewReader(body))
		if err != nil {
			s.log.Warn("escalation webhook", "request_id", rec.ID, "error", err.Error())
			return
		}
		hr.Header.Set("Content-Type", "application/json")
		res, err := s.client.Do(hr)
		if err != nil {
			// A Slack webhook URL is a credential: log the cause without it.
			if ue, ok := errors.AsType[*url.Error](err); ok {
				err = ue.Err
			}
			s.log.Warn("escalation webhook", "request_id", rec.ID, "error", err.Error())
			return
		}
		_ = res.Body.Close()
		if res.StatusCode/100 != 2 {
			s.log.Warn("escalation webhook refused", "request_id", rec.ID, "status", res.StatusCode)
		}
	}()
}

// slackEscape escapes the three characters Slack's mrkdwn treats as markup,
// so an agent's text cannot forge links or mentions in the notification.
func slackEscape(s string) string {
	return strings.NewReplacer("&", "&amp;", "<", "&lt;", ">", "&gt;").Replace(s)
}

// SignedIn is the person behind r for the doors that serve people (the
// admin API and console): a page session's cookie, else an admin or
// reviewer bearer token. A refused token is audited as auth.failure; an
// agent's token is 403.
func (s *Service) SignedIn(r *http.Request) (door.Person, error) {
	if r.Header.Get("Authorization") == "" {
		sess, err := s.session(r)
		if err != nil {
			return door.Person{}, err
		}
		if sess != nil {
			p := sess.who
			p.CSRF = sess.csrf
			return p, nil
		}
	}
	who, err := s.adminAuth(r)
	if err != nil {
		return door.Person{}, err
	}
	return who.person(), nil
}

// person is p as the door frame names people.
func (p principal) person() door.Person {
	return door.Person{Name: p.Name, Admin: p.Admin, Reviewer: !p.Admin, Via: "token"}
}

var _ door.PeopleAuth = (*Service)(nil)
