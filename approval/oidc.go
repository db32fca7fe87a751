package approval

import (
	"context"
	"errors"
	"net/http"
	"time"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/people"
)

// Signing in with the organisation's OpenID Connect provider
// (people.oidc): GET /review/oidc/login sends the browser to the provider
// with a fresh state, nonce and PKCE challenge, whose secrets the browser
// keeps in a short-lived HttpOnly cookie of its own (never in the URL);
// GET /review/oidc/callback checks the provider's answer against them,
// verifies the ID token and starts a review session like a token sign-in
// does, which ends when the ID token expires (or sooner, at the sessions'
// own bound) or at sign-out. The person's roles come from the groups
// claim, mapped by people.oidc.roles again on every request.

const (
	// flowCookie holds a sign-in's state, nonce and PKCE verifier
	// between leaving for the provider and coming back.
	flowCookie = "gw_oidc"
	flowPath   = "/review/oidc/"
	flowTTL    = 10 * time.Minute
	// viaOIDC marks a session (and a door.Person) of a provider sign-in.
	viaOIDC = "oidc"
	// oidcDeadline bounds the calls to the provider one sign-in makes.
	oidcDeadline = 15 * time.Second
)

// errNoOIDC is the sign-in routes' answer when people.oidc is not set.
var errNoOIDC = &apierror.Error{Status: http.StatusNotFound, Type: apierror.TypeInvalidRequest, Code: "not_found",
	Message: "Signing in with an identity provider is not configured here (people.oidc)."}

// oidcLogin serves GET /review/oidc/login?next=PATH.
func (s *Service) oidcLogin(w http.ResponseWriter, r *http.Request) error {
	rp := s.cur().rp
	if rp == nil {
		return errNoOIDC
	}
	f := people.NewFlow(safeNext(r.URL.Query().Get("next")))
	ctx, cancel := context.WithTimeout(r.Context(), oidcDeadline)
	defer cancel()
	to, err := rp.AuthURL(ctx, f, s.externalURL(r, rp.Config().RedirectURL, people.CallbackPath))
	if err != nil {
		s.log.Error("identity provider unavailable", "issuer", rp.Config().Issuer, "error", err.Error())
		return render(w, http.StatusBadGateway, "login", s.loginPageFor(f.Next, "The organisation's sign-in cannot be reached right now; try again shortly."))
	}
	http.SetCookie(w, &http.Cookie{Name: flowCookie, Value: f.Encode(), Path: flowPath, MaxAge: int(flowTTL.Seconds()),
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.secure(r)})
	http.Redirect(w, r, to, http.StatusSeeOther)
	return nil
}

// oidcCallback serves GET /review/oidc/callback: the provider's answer.
// The flow cookie is spent whatever the outcome, so an answer is taken
// once.
func (s *Service) oidcCallback(w http.ResponseWriter, r *http.Request) error {
	rp := s.cur().rp
	if rp == nil {
		return errNoOIDC
	}
	http.SetCookie(w, &http.Cookie{Name: flowCookie, Value: "", Path: flowPath, MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteLaxMode, Secure: s.secure(r)})
	c, err := r.Cookie(flowCookie)
	if err != nil {
		return s.refuseSignIn(w, r, "/review/login", "no sign-in was started in this browser (or it took longer than 10 minutes)")
	}
	f, err := people.DecodeFlow(c.Value)
	if err != nil {
		return s.refuseSignIn(w, r, "/review/login", err.Error())
	}
	f.Next = safeNext(f.Next)
	ctx, cancel := context.WithTimeout(r.Context(), oidcDeadline)
	defer cancel()
	id, err := rp.Finish(ctx, f, s.externalURL(r, rp.Config().RedirectURL, people.CallbackPath), r.URL.Query())
	switch {
	case errors.Is(err, people.ErrRefused):
		return s.refuseSignIn(w, r, f.Next, err.Error())
	case err != nil:
		s.log.Error("identity provider unavailable", "issuer", rp.Config().Issuer, "error", err.Error())
		return render(w, http.StatusBadGateway, "login", s.loginPageFor(f.Next, "The organisation's sign-in cannot be reached right now; try again shortly."))
	}
	held := rp.Config().RolesFor(id.Groups)
	if !held.Any() {
		return s.refuseSignIn(w, r, f.Next, "the person is in no group that holds a role here")
	}
	ttl := min(id.Expiry.Sub(s.now()), s.sessionTTL)
	if ttl <= 0 {
		return s.refuseSignIn(w, r, f.Next, "the ID token has expired")
	}
	name := id.Email
	if name == "" {
		name = id.Subject
	}
	rs := &ReviewSession{Name: name, Admin: held.Admin, Via: viaOIDC, Subject: id.Subject, Email: id.Email, Groups: id.Groups,
		Reviewer: held.Reviewer, TeamOwner: held.TeamOwner, TeamReviewer: held.TeamReviewer}
	sid, err := s.startSession(r.Context(), rs, ttl)
	if err != nil {
		return err
	}
	s.setSessionCookie(w, r, sid, ttl)
	s.log.Info("person signed in", "person", name, "subject", id.Subject, "roles", held.String())
	http.Redirect(w, r, f.Next, http.StatusSeeOther)
	return nil
}

// refuseSignIn audits a refused provider sign-in (why, never a token or
// code) and shows the sign-in page again with a 403.
func (s *Service) refuseSignIn(w http.ResponseWriter, r *http.Request, next, why string) error {
	if err := s.auditAuthFailure(r, apierror.Forbidden("review sign-in with the identity provider refused: "+why)); err != nil {
		return err
	}
	return render(w, http.StatusForbidden, "login", s.loginPageFor(next, "Sign-in refused: "+why+"."))
}

// externalURL is path on the gateway as the browser reaches it: the
// configured URL when there is one, else approval.base_url + path, else
// the request's own scheme and host + path.
func (s *Service) externalURL(r *http.Request, configured, path string) string {
	if configured != "" {
		return configured
	}
	if base := s.cur().baseURL; base != "" {
		return base + path
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + path
}

// providerLogout is where a signed-out person of the provider goes: its
// end_session_endpoint, coming back to the sign-in page; false when the
// provider has none.
func (s *Service) providerLogout(r *http.Request) (string, bool) {
	rp := s.cur().rp
	if rp == nil {
		return "", false
	}
	ctx, cancel := context.WithTimeout(r.Context(), oidcDeadline)
	defer cancel()
	return rp.EndSessionURL(ctx, s.externalURL(r, "", "/review/login"))
}
