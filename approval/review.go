package approval

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	_ "embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/pagekit"
	"github.com/sacpgw/gateway/internal/textdiff"
)

// The review pages are server-rendered HTML without JavaScript. A reviewer
// signs in with their token once; the browser then holds only an opaque,
// random session id in an HttpOnly, SameSite=Lax cookie (Secure when the
// gateway is reached over TLS), never the token. Every form that changes
// state carries a CSRF token bound to the session, and POSTs from another
// origin are refused outright. Sessions live in the Store (Redis with
// several replicas), so a reviewer behind a load balancer stays signed in
// whichever replica answers.

// cookieName is the review session cookie.
const cookieName = "gw_review"

//go:embed review.html
var reviewHTML string

// opsHTML is the operator page (ops.go); it shares the review pages'
// style and navigation.
//
//go:embed ops.html
var opsHTML string

// homeHTML is the front page (home.go), in the review pages' style.
//
//go:embed home.html
var homeHTML string

var pages = template.Must(template.Must(template.Must(pagekit.WithStyle(template.New("review").Funcs(template.FuncMap{
	"short": func(s string) string {
		if len(s) > 12 {
			return s[:12]
		}
		return s
	},
	"ts":    func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05 UTC") },
	"lower": strings.ToLower,
})).Parse(reviewHTML)).Parse(opsHTML)).Parse(homeHTML))

func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	return hex.EncodeToString(b[:])
}

// session is a signed-in person as the pages use it.
type session struct {
	who  door.Person
	csrf string
}

// startSession stores rs, a new session lasting ttl, and returns its id
// (the cookie). The id is 256 random bits; the store refusing it as taken
// is all but impossible, and is retried rather than trusted.
func (s *Service) startSession(ctx context.Context, rs *ReviewSession, ttl time.Duration) (string, error) {
	for range 3 {
		id := randomToken()
		rs.CSRF, rs.Expires = randomToken(), s.now().Add(ttl)
		err := s.store.CreateSession(ctx, id, rs, ttl)
		if errors.Is(err, ErrExists) {
			continue
		}
		if err != nil {
			s.log.Error("review session not stored", "error", err.Error())
			return "", errSessionsUnavailable
		}
		return id, nil
	}
	return "", errors.New("start review session: no free session id")
}

// session returns the request's review session; nil when there is none,
// it ended, or its person is no longer configured (a reviewer removed
// from gateway.yaml, or a provider's group no longer mapped to any role,
// loses their sessions with the next request, not 8 hours later). A store
// that cannot answer is an error (503), not a signed-out reviewer: nothing
// is shown or decided without knowing who asks.
func (s *Service) session(r *http.Request) (*session, error) {
	c, err := r.Cookie(cookieName)
	if err != nil || c.Value == "" {
		return nil, nil
	}
	rs, err := s.store.Session(r.Context(), c.Value)
	if errors.Is(err, ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		s.log.Error("review session unreadable", "error", err.Error())
		return nil, errSessionsUnavailable
	}
	who, ok := s.personOf(rs)
	if !s.now().Before(rs.Expires) || !ok {
		// Best effort: the store forgets it by its ttl anyway.
		_ = s.store.DeleteSession(r.Context(), c.Value)
		return nil, nil
	}
	return &session{who: who, csrf: rs.CSRF}, nil
}

// errSessionsUnavailable is the answer while the session store is down.
var errSessionsUnavailable = &apierror.Error{Status: http.StatusServiceUnavailable, Type: apierror.TypeServer, Code: "session_unavailable",
	Message: "Review sessions cannot be read or stored right now; retry later."}

// personOf is the person of a stored session under the configuration
// serving now; false when it no longer names one: a token's person who is
// no longer configured (or token sign-in was turned off), or a provider's
// person whose groups hold no role any more (or the provider was taken
// off).
func (s *Service) personOf(rs *ReviewSession) (door.Person, bool) {
	set := s.cur()
	if rs.Via == viaOIDC {
		if set.rp == nil {
			return door.Person{}, false
		}
		h := set.rp.Config().RolesFor(rs.Groups)
		if !h.Any() {
			return door.Person{}, false
		}
		return door.Person{Name: rs.Name, Subject: rs.Subject, Email: rs.Email, Groups: rs.Groups, Admin: h.Admin, Reviewer: h.Reviewer,
			TeamOwner: h.TeamOwner, TeamReviewer: h.TeamReviewer, Via: viaOIDC}, true
	}
	who := principal{Name: rs.Name, Admin: rs.Admin}
	if !set.tokens || !s.configured(who) {
		return door.Person{}, false
	}
	return who.person(), true
}

// configured reports whether who is still the admin or a reviewer.
func (s *Service) configured(who principal) bool {
	for _, c := range s.cur().creds {
		if c.who == who {
			return true
		}
	}
	return false
}

// pruneSessions drops ended sessions from a store that does not expire
// them itself (the memory store).
func (s *Service) pruneSessions(ctx context.Context) {
	p, ok := s.store.(interface {
		PruneSessions(ctx context.Context, now time.Time) (int, error)
	})
	if !ok {
		return
	}
	if _, err := p.PruneSessions(ctx, s.now()); err != nil {
		s.log.Warn("review sessions prune", "error", err.Error())
	}
}

// secure reports whether cookies must be Secure: the request came over TLS,
// or the gateway's external URL is https (TLS ends at a proxy in front).
func (s *Service) secure(r *http.Request) bool {
	return r.TLS != nil || strings.HasPrefix(s.cur().baseURL, "https://")
}

// sameOrigin is httpx.SameOrigin: every people's door checks one rule.
func sameOrigin(r *http.Request) bool { return httpx.SameOrigin(r) }

func forbiddenCSRF(msg string) error {
	return &apierror.Error{Status: http.StatusForbidden, Type: apierror.TypePermission, Code: "csrf_failed", Message: msg}
}

// safeNext accepts only a path into the review pages as a redirect target,
// so the login form cannot be used as an open redirect.
func safeNext(next string) string {
	if strings.HasPrefix(next, "/review/") && !strings.HasPrefix(next, "//") && !strings.ContainsAny(next, "\\\r\n") {
		if u, err := url.Parse(next); err == nil && u.Host == "" && u.Scheme == "" {
			return u.Path
		}
	}
	return "/review/login"
}

// render writes a review page (pagekit.Render: no caching, no framing,
// no scripts). An inline workflow drawing's colours are SVG presentation
// attributes; style attributes and <style> elements are refused in it
// anyway (checkGraph).
func render(w http.ResponseWriter, status int, name string, data any) error {
	return pagekit.Render(w, status, pages, name, data)
}

type loginPage struct {
	Next  string
	Error string
	// Tokens offers the token form; OIDC the organisation's sign-in.
	Tokens, OIDC bool
}

// loginPageFor is the sign-in form as the configuration offers it.
func (s *Service) loginPageFor(next, errMsg string) loginPage {
	set := s.cur()
	return loginPage{Next: next, Error: errMsg, Tokens: set.tokens, OIDC: set.rp != nil}
}

// ReviewLogin serves GET and POST /review/login. GET shows the sign-in
// form, or, when signed in, the queue of pending escalations (as
// /review/queue does: the address a reviewer was given keeps working);
// POST checks the token and starts a session.
func (s *Service) ReviewLogin() http.Handler { return endpoint(s.reviewLogin) }

func (s *Service) reviewLogin(w http.ResponseWriter, r *http.Request) error {
	if r.Method == http.MethodGet {
		sess, err := s.session(r)
		if err != nil {
			return err
		}
		if sess != nil {
			return s.renderQueue(w, r, sess)
		}
		return render(w, http.StatusOK, "login", s.loginPageFor(safeNext(r.URL.Query().Get("next")), ""))
	}
	if r.Method != http.MethodPost {
		return &apierror.Error{Status: http.StatusMethodNotAllowed, Type: apierror.TypeInvalidRequest, Code: "method_not_allowed", Message: "Use GET or POST."}
	}
	if !sameOrigin(r) {
		return forbiddenCSRF("Cross-origin sign-in refused.")
	}
	r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
	if err := r.ParseForm(); err != nil {
		return apierror.BadRequest("", "The form could not be read.")
	}
	next := safeNext(r.PostForm.Get("next"))
	if !s.cur().tokens {
		if err := s.auditAuthFailure(r, apierror.Forbidden("review sign-in with a token, which people.token_sign_in turned off")); err != nil {
			return err
		}
		return render(w, http.StatusForbidden, "login", s.loginPageFor(next, "Signing in with a token is turned off here: sign in with your organisation's account."))
	}
	who, ok, _ := s.authenticate(r.PostForm.Get("token"))
	if !ok {
		if err := s.auditAuthFailure(r, apierror.Unauthorized("review sign-in with an unknown token")); err != nil {
			return err
		}
		return render(w, http.StatusUnauthorized, "login", s.loginPageFor(next, "That token is not a reviewer's or the admin's."))
	}
	id, err := s.startSession(r.Context(), &ReviewSession{Name: who.Name, Admin: who.Admin}, s.sessionTTL)
	if err != nil {
		return err
	}
	s.setSessionCookie(w, r, id, s.sessionTTL)
	s.log.Info("reviewer signed in", "reviewer", who.Name, "role", who.role())
	http.Redirect(w, r, next, http.StatusSeeOther)
	return nil
}

// setSessionCookie hands the browser session id for ttl.
func (s *Service) setSessionCookie(w http.ResponseWriter, r *http.Request, id string, ttl time.Duration) {
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: id, Path: "/review/",
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.secure(r),
		MaxAge: int(ttl.Seconds()),
	})
}

type reviewPage struct {
	Nav navBar
	Rec *Record
	// Headline is what is asked, in words, as the page's heading (the
	// request id is shown small beside it: nobody decides by an id).
	Headline  string
	ExpiresAt time.Time
	// ExpiresIn is the time left before the escalation expires (rejected
	// by expiry), in words: "in 5 h 12 min", "overdue by 3 min".
	ExpiresIn string
	// Refs are the request's references with their catalogue titles.
	Refs []refView
	// Current is what a modify or delete would change, from the
	// catalogue; CurrentNote says why it is not shown when the request
	// names a target the catalogue does not hold.
	Current     *Spec
	CurrentNote string
	// Diff is a modify's change to Current, marked (<del>, <ins>).
	Diff template.HTML
	Open bool
	// Approve and Reject say what each button does to this request.
	Approve, Reject string
	// WorkflowPause is a workflow run waiting for a person's answer (the
	// comment); Workflow is its content, when it could be read.
	WorkflowPause bool
	Workflow      *workflowReview
	// Run is where the workflow run stands as the workflows API says it
	// (WAITING_FOR_HUMAN while the escalation is open), and what the
	// decision did to it.
	Run runStatus
	// MCP is a tool call's summary (review_mcp.go); MCPUnreadable says an
	// MCP_TOOL_CALL's content could not be read strictly, so only the raw
	// content is shown.
	MCP           *mcpReview
	MCPUnreadable bool
	// Definition is a changed MCP tool definition's comparison
	// (review_mcptool.go).
	Definition *definitionReview
	// Graph is the escalation's drawing, checked (graphHTML); GraphNote
	// replaces it when the check refused it.
	Graph     template.HTML
	GraphNote string
}

// ReviewPage serves GET /review/{id}: the request, the policy's verdict and
// the escalation, with approve/reject buttons while it is ESCALATED.
// Without a session it redirects to the sign-in form.
func (s *Service) ReviewPage() http.Handler { return endpoint(s.reviewPage) }

func (s *Service) reviewPage(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	sess, err := s.pageSession(w, r, "/review/"+id)
	if sess == nil {
		return err
	}
	rec, err := s.visible(r.Context(), sess.who, id)
	if err != nil {
		return err
	}
	cat := s.cur().cat
	page := reviewPage{Nav: navOf(sess), Rec: rec, Refs: refsOf(cat, rec.Request.References), Open: rec.State == StateEscalated && rec.Escalation != nil}
	page.Current, page.CurrentNote = currentOf(cat, &rec.Request)
	if page.Current != nil && rec.Request.Action == ActionModify {
		page.Diff = textdiff.HTML(page.Current.Body, rec.Request.Content)
	}
	page.Approve, page.Reject = outcomes(rec)
	if rec.Escalation != nil {
		page.ExpiresAt = rec.Escalation.At.Add(s.cur().cfg.Protocol.Timeouts.Escalation.D())
		page.ExpiresIn = until(page.ExpiresAt.Sub(s.now()))
		if rec.Escalation.Graph != "" {
			g, err := graphHTML(rec.Escalation.Graph)
			if err != nil {
				page.GraphNote = "The drawing stored with this escalation is not shown: it is not the kind of SVG the gateway draws (" + err.Error() + ")."
				s.log.Warn("review page: escalation drawing refused", "request_id", rec.ID, "error", err.Error())
			}
			page.Graph = g
		}
	}
	if rec.Request.RequestType == TypeWorkflow {
		page.WorkflowPause = true
		page.Workflow = parseWorkflowContent(rec.Request.Content)
		page.Run = runStatusOf(rec)
	}
	if rec.Request.RequestType == TypeMCP {
		m, err := parseMCPContent(rec.Request.Content)
		if err != nil {
			page.MCPUnreadable = true
			s.log.Warn("review page: MCP tool call content unreadable", "request_id", rec.ID, "error", err.Error())
		} else {
			m.Grant = mcpGrant(rec, s.cur().cfg.Protocol.Timeouts.Escalation.D())
			page.MCP = m
			page.Approve, page.Reject = mcpOutcomes()
			if approve, reject, held := m.heldNow(rec, s.now()); held {
				page.Approve, page.Reject = approve, reject
			}
		}
	}
	if rec.Request.RequestType == TypeMCPTool {
		if v, err := parseDefinitionContent(rec.Request.Content); err == nil {
			page.Definition = v
		} else {
			s.log.Warn("review page: MCP tool definition content unreadable", "request_id", rec.ID, "error", err.Error())
		}
	}
	page.Headline = headline(rec, page.Workflow)
	return render(w, http.StatusOK, "review", page)
}

// headline says what a request asks, for the page's heading: who asks to
// do what, or, for a workflow run, who waits (or waited) for a person.
func headline(rec *Record, wf *workflowReview) string {
	r := &rec.Request
	if wf != nil {
		if rec.State == StateEscalated {
			return fmt.Sprintf("Workflow %s: %s waits for a person's answer at node %s", wf.Workflow, wf.Agent, wf.Node)
		}
		return fmt.Sprintf("Workflow %s: %s asked a person at node %s", wf.Workflow, wf.Agent, wf.Node)
	}
	what := r.Action
	if what == "" {
		what = r.RequestType
	}
	parts := []string{rec.AgentID, "asks to", what}
	for _, p := range []string{r.TargetType, r.TargetPath} {
		if p != "" {
			parts = append(parts, p)
		}
	}
	if r.TargetID != "" {
		parts = append(parts, "("+r.TargetID+")")
	}
	return strings.Join(parts, " ")
}

// runStatus is a workflow run's status as the workflows API names it, and
// a note on how it got there.
type runStatus struct {
	Status, Note string
}

// runStatusOf says where the run of a WORKFLOW_PAUSE stands, from its
// escalation: the engine suspends the run (WAITING_FOR_HUMAN) while the
// escalation is open, resumes it (IN_PROGRESS) on an approval and fails
// it on a rejection or expiry. After the decision the run goes on on its
// own: the note says where to follow it.
func runStatusOf(rec *Record) runStatus {
	switch {
	case rec.State == StateEscalated:
		return runStatus{"WAITING_FOR_HUMAN", "suspended until a person answers here"}
	case rec.State == StateApproved:
		return runStatus{"IN_PROGRESS", "resumed with the person's answer when it was approved; GET /workflows/{name}/runs/{id} follows it from there"}
	case rec.State.Terminal():
		return runStatus{"FAILED", "the run failed when its review was " + strings.ToLower(string(rec.State))}
	}
	return runStatus{Status: string(rec.State)}
}

// ReviewSubmit serves POST /review/{id}: the reviewer's decision from the
// page's form (fields csrf, decision, comment). Then it shows the page
// again, with the new state (post/redirect/get).
func (s *Service) ReviewSubmit() http.Handler { return endpoint(s.reviewSubmit) }

func (s *Service) reviewSubmit(w http.ResponseWriter, r *http.Request) error {
	id := r.PathValue("id")
	if !sameOrigin(r) {
		return forbiddenCSRF("Cross-origin form submission refused.")
	}
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	if sess == nil {
		err := apierror.Unauthorized("Sign in at /review/login first.")
		if aerr := s.auditAuthFailure(r, err); aerr != nil {
			return aerr
		}
		return err
	}
	r.Body = http.MaxBytesReader(w, r.Body, 2*maxComment+1024)
	if err := r.ParseForm(); err != nil {
		return apierror.BadRequest("", "The form could not be read.")
	}
	token := r.PostForm.Get("csrf")
	if token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(sess.csrf)) != 1 {
		return forbiddenCSRF("Missing or invalid CSRF token: reload the review page and try again.")
	}
	decision := r.PostForm.Get("decision")
	if decision != reviewDecisionApprove && decision != reviewDecisionReject {
		return apierror.BadRequest("decision", "decision must be approve or reject.")
	}
	comment := strings.TrimSpace(r.PostForm.Get("comment"))
	if err := checkComment(comment); err != nil {
		return err
	}
	if _, err := s.visible(r.Context(), sess.who, id); err != nil {
		return err
	}
	if _, err := s.resolve(r.Context(), id, decision, actorOf(sess.who), comment, "review_page"); err != nil {
		return err
	}
	http.Redirect(w, r, "/review/"+url.PathEscape(id), http.StatusSeeOther)
	return nil
}
