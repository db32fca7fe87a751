package approval

import (
	"crypto/subtle"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/door"
)

// The review site around the decision page: the queue of pending
// escalations, sign-out and the operator page. They authenticate by the
// review session like the decision page (never by a bearer token: a
// browser has none to send, which is why /admin/escalations, the JSON API,
// is no page for people).

// SiteRoutes are the review site's pages beyond Routes: GET /review/queue,
// POST /review/logout, the front page GET / with GET /review leading to
// the queue (home.go) and, when ops is not nil, GET /review/ops (ops.go).
// The shell mounts them like Routes' review pages, without agent
// identification. They are apart from Routes because the operator page
// needs what only the wiring has (limits, policies, the audit trail).
func (s *Service) SiteRoutes(ops OpsSource) []door.Route {
	rs := []door.Route{
		{Method: http.MethodGet, Path: "/review/queue", Handler: endpoint(s.reviewQueue), Access: door.People},
		{Method: http.MethodPost, Path: "/review/logout", Handler: endpoint(s.reviewLogout), Access: door.People},
	}
	rs = append(rs, s.homeRoutes(ops != nil)...)
	if ops != nil {
		rs = append(rs, door.Route{Method: http.MethodGet, Path: "/review/ops", Handler: endpoint(func(w http.ResponseWriter, r *http.Request) error {
			return s.reviewOps(w, r, ops)
		}), Access: door.People})
	}
	return rs
}

// navBar is the head of every signed-in page: who is signed in, the site's
// links, and the sign-out form with the session's CSRF token.
type navBar struct {
	Who  door.Person
	Role string
	CSRF string
}

func navOf(sess *session) navBar {
	return navBar{Who: sess.who, Role: roleOf(sess.who), CSRF: sess.csrf}
}

// pageSession is the session of a review page's request. Without one it
// sends the browser to the sign-in form, which brings it back to path
// afterwards, and returns nil: the request has its answer. A nil session
// with a nil error means just that.
func (s *Service) pageSession(w http.ResponseWriter, r *http.Request, path string) (*session, error) {
	sess, err := s.session(r)
	if err != nil || sess != nil {
		return sess, err
	}
	http.Redirect(w, r, "/review/login?next="+url.QueryEscape(path), http.StatusSeeOther)
	return nil, nil
}

type queuePage struct {
	Nav   navBar
	Items []queueRow
}

type queueRow struct {
	EscalationItem
	// Waiting is how long the escalation has waited; ExpiresIn how long
	// it has left, in words.
	Waiting, ExpiresIn string
}

// reviewQueue serves GET /review/queue: the escalations waiting for a
// person, oldest first, each linking to its decision page.
func (s *Service) reviewQueue(w http.ResponseWriter, r *http.Request) error {
	sess, err := s.pageSession(w, r, "/review/queue")
	if sess == nil {
		return err
	}
	return s.renderQueue(w, r, sess)
}

func (s *Service) renderQueue(w http.ResponseWriter, r *http.Request, sess *session) error {
	items, err := s.pending(r.Context(), sess.who)
	if err != nil {
		return err
	}
	return render(w, http.StatusOK, "queue", queuePage{Nav: navOf(sess), Items: queueRows(items, s.now())})
}

func queueRows(items []EscalationItem, now time.Time) []queueRow {
	rows := make([]queueRow, 0, len(items))
	for _, it := range items {
		row := queueRow{EscalationItem: it}
		if it.Escalation != nil {
			row.Waiting, row.ExpiresIn = span(now.Sub(it.Escalation.At)), until(it.ExpiresAt.Sub(now))
		}
		rows = append(rows, row)
	}
	return rows
}

// reviewLogout serves POST /review/logout: the session ends in the store
// (on every replica at once) and the browser forgets its cookie. Like the
// decision form it needs the session's CSRF token and the page's origin,
// so another site cannot sign a reviewer out. A person who signed in with
// the organisation's provider is sent on to its logout
// (end_session_endpoint), when it has one, which brings them back to the
// sign-in page.
func (s *Service) reviewLogout(w http.ResponseWriter, r *http.Request) error {
	if !sameOrigin(r) {
		return forbiddenCSRF("Cross-origin sign-out refused.")
	}
	sess, err := s.session(r)
	if err != nil {
		return err
	}
	if sess != nil {
		r.Body = http.MaxBytesReader(w, r.Body, 8<<10)
		if err := r.ParseForm(); err != nil {
			return apierror.BadRequest("", "The form could not be read.")
		}
		token := r.PostForm.Get("csrf")
		if token == "" || subtle.ConstantTimeCompare([]byte(token), []byte(sess.csrf)) != 1 {
			return forbiddenCSRF("Missing or invalid CSRF token: reload the page and sign out again.")
		}
		c, _ := r.Cookie(cookieName) // present: s.session found the session by it
		if err := s.store.DeleteSession(r.Context(), c.Value); err != nil {
			s.log.Error("review session not deleted", "reviewer", sess.who.Name, "error", err.Error())
			return errSessionsUnavailable
		}
		s.log.Info("reviewer signed out", "reviewer", sess.who.Name, "role", roleOf(sess.who))
	}
	// Without a session there is nothing to end: the cookie is cleared all
	// the same, and the browser lands on the sign-in form either way.
	http.SetCookie(w, &http.Cookie{
		Name: cookieName, Value: "", Path: "/review/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.secure(r),
	})
	if sess != nil && sess.who.Via == viaOIDC {
		if to, ok := s.providerLogout(r); ok {
			http.Redirect(w, r, to, http.StatusSeeOther)
			return nil
		}
	}
	http.Redirect(w, r, "/review/login", http.StatusSeeOther)
	return nil
}

// refView is a reference as the review page shows it: its id, and its
// title when the catalogue holds it.
type refView struct {
	ID, Title string
	Known     bool
}

func refsOf(cat *Catalogue, ids []string) []refView {
	out := make([]refView, 0, len(ids))
	for _, id := range ids {
		v := refView{ID: id}
		if spec, ok := cat.Get(id); ok {
			v.Title, v.Known = spec.Title, true
		}
		out = append(out, v)
	}
	return out
}

// currentOf is what a modify or delete would change: the catalogue's
// specification with the request's target_id. Targets given only by
// target_path are not looked up: catalogue paths are relative to the
// catalogue, not to the repository the agent writes to (see targetFact).
func currentOf(cat *Catalogue, req *AgentRequest) (*Spec, string) {
	if req.Action != ActionModify && req.Action != ActionDelete {
		return nil, ""
	}
	if req.TargetID == "" {
		return nil, "The request names no target_id, so the current content cannot be looked up in the catalogue."
	}
	if spec, ok := cat.Get(req.TargetID); ok {
		return spec, ""
	}
	return nil, "The catalogue holds no specification " + quoteID(req.TargetID) + ": there is no current content to compare with."
}

// outcomes says what approving and rejecting do to rec, beside the
// buttons, so that nobody has to guess which state a click leads to.
func outcomes(rec *Record) (approve, reject string) {
	kind := ""
	if rec.Escalation != nil {
		kind = rec.Escalation.Kind
	}
	switch {
	case rec.Request.RequestType == TypeWorkflow:
		return "your comment goes to the waiting run as the person's answer, and the run resumes",
			"the run fails"
	case kind == escalationKindDeviation || kind == escalationKindReport:
		return "the change as made is accepted (COMPLETED)", "the change is refused (REJECTED); the agent is told"
	case rec.Request.RequestType == TypeApproval:
		return "the agent may make the change (APPROVED) and reports it when done", "the agent may not make it (REJECTED)"
	}
	return "what was asked goes ahead (APPROVED)", "it does not (REJECTED)"
}

// until says how long is left before a deadline d away, in words.
func until(d time.Duration) string {
	if d < 0 {
		return "overdue by " + span(-d)
	}
	return "in " + span(d)
}

// span writes a duration for people, to the minute and in its two largest
// units: "2 d 3 h", "1 d", "5 h 12 min", "3 min", "less than a minute".
func span(d time.Duration) string {
	d = d.Truncate(time.Minute)
	days, hours, mins := int(d/(24*time.Hour)), int(d%(24*time.Hour)/time.Hour), int(d%time.Hour/time.Minute)
	switch {
	case days > 0 && hours > 0:
		return fmt.Sprintf("%d d %d h", days, hours)
	case days > 0:
		return fmt.Sprintf("%d d", days)
	case hours > 0 && mins > 0:
		return fmt.Sprintf("%d h %d min", hours, mins)
	case hours > 0:
		return fmt.Sprintf("%d h", hours)
	case mins > 0:
		return fmt.Sprintf("%d min", mins)
	}
	return "less than a minute"
}
