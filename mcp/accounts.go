package mcp

import (
	"crypto/subtle"
	_ "embed"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/pagekit"
)

// The page where a person connects their accounts at the servers with
// oauth.delegated, and the authorization flow's way back.
const (
	accountsPath = "/review/mcp/accounts"
	callbackPath = "/review/mcp/callback"
)

// flowTTL bounds how long a person may take at the server's sign-in.
const flowTTL = 10 * time.Minute

//go:embed accounts.html
var accountsHTML string

var accountsPages = pagekit.WithStyle(template.Must(template.New("accounts").Parse(accountsHTML)))

// flow is one person's authorization flow under way: bound to the server,
// the person and their page session, spent by its callback.
type flow struct {
	server, subject string
	// session is the page session's CSRF token: the callback must come in
	// the same session that started the flow.
	session  string
	verifier string
	redirect string
	expires  time.Time
}

// accountRoutes are the accounts page's routes (none without people's
// sign-in).
func (d *Door) accountRoutes() []door.Route {
	if d.people == nil {
		return nil
	}
	return []door.Route{
		{Method: http.MethodGet, Path: accountsPath, Handler: http.HandlerFunc(d.accounts), Access: door.People},
		{Method: http.MethodPost, Path: accountsPath + "/:server/connect", Handler: http.HandlerFunc(d.connect), Access: door.People},
		{Method: http.MethodPost, Path: accountsPath + "/:server/disconnect", Handler: http.HandlerFunc(d.disconnect), Access: door.People},
		{Method: http.MethodGet, Path: callbackPath, Handler: http.HandlerFunc(d.callback), Access: door.People},
	}
}

// errNoSubject: the accounts belong to people the organisation's provider
// signed in (a token sign-in names no one).
var errNoSubject = apierror.Forbidden("Connect your accounts after signing in with your organisation's account.")

// errCSRF is a change without the page's CSRF token or origin.
var errCSRF = &apierror.Error{Status: http.StatusForbidden, Type: apierror.TypePermission, Code: "csrf_failed",
	Message: "A change made with a page session needs the page's CSRF token and origin."}

// person is the signed-in person with a subject; a change (mutate) needs
// the session's CSRF token and the page's origin.
func (d *Door) person(w http.ResponseWriter, r *http.Request, mutate bool) (door.Person, bool) {
	p, err := d.people.SignedIn(r)
	if err != nil {
		if e := apierror.From(err); e.Status == http.StatusUnauthorized && r.Method == http.MethodGet {
			http.Redirect(w, r, "/review/login?next="+url.QueryEscape(accountsPath), http.StatusSeeOther)
			return p, false
		}
		apierror.Write(w, err)
		return p, false
	}
	if p.Subject == "" {
		apierror.Write(w, errNoSubject)
		return p, false
	}
	if mutate && (p.CSRF == "" || !httpx.SameOrigin(r) || subtle.ConstantTimeCompare([]byte(r.PostFormValue("csrf")), []byte(p.CSRF)) != 1) {
		apierror.Write(w, errCSRF)
		return p, false
	}
	return p, true
}

// change is the signed-in person changing their account at the running
// configuration's delegated server named in the path (CSRF checked).
func (d *Door) change(w http.ResponseWriter, r *http.Request) (door.Person, *delegatedCreds, bool) {
	p, ok := d.person(w, r, true)
	if !ok {
		return p, nil, false
	}
	d.oauth.mu.Lock()
	c := d.oauth.current.delegated[r.PathValue("server")]
	d.oauth.mu.Unlock()
	if c == nil {
		apierror.Write(w, &apierror.Error{Status: http.StatusNotFound, Type: apierror.TypeInvalidRequest, Code: "not_found",
			Message: "No MCP server of that name is called with people's own accounts."})
	}
	return p, c, c != nil
}

type accountView struct {
	Name      string
	Connected bool
}

// accounts serves the page: the delegated servers and whether the person
// is connected to each.
func (d *Door) accounts(w http.ResponseWriter, r *http.Request) {
	p, ok := d.person(w, r, false)
	if !ok {
		return
	}
	d.oauth.mu.Lock()
	cur := d.oauth.current
	d.oauth.mu.Unlock()
	var views []accountView
	for name, c := range cur.delegated {
		views = append(views, accountView{Name: name, Connected: c.connected(r.Context(), p.Subject)})
	}
	slices.SortFunc(views, func(a, b accountView) int { return strings.Compare(a.Name, b.Name) })
	note := ""
	if s := r.URL.Query().Get("connected"); s != "" && cur.delegated[s] != nil {
		note = "Connected to " + s + "."
	}
	_ = pagekit.Render(w, http.StatusOK, accountsPages, "accounts", map[string]any{"Who": p.Name, "CSRF": p.CSRF, "Servers": views, "Note": note})
}

// connect starts the person's flow at the server's authorization server
// and shows the link to it (a form's redirect to another site is what the
// pages' form-action forbids).
func (d *Door) connect(w http.ResponseWriter, r *http.Request) {
	p, c, ok := d.change(w, r)
	if !ok {
		return
	}
	state := randomState()
	redirect := externalURL(r, c.connect, callbackPath)
	to, verifier, err := c.begin(r.Context(), redirect, state)
	if err != nil {
		d.log.Warn("mcp: authorization server unavailable", "server", c.server, "error", err.Error())
		apierror.Write(w, &apierror.Error{Status: http.StatusBadGateway, Type: apierror.TypeUpstream, Code: "upstream_error",
			Message: "The sign-in of MCP server " + quote(c.server) + " cannot be reached right now; try again shortly."})
		return
	}
	d.oauth.begin(state, &flow{server: c.server, subject: p.Subject, session: p.CSRF, verifier: verifier, redirect: redirect, expires: time.Now().Add(flowTTL)})
	_ = pagekit.Render(w, http.StatusOK, accountsPages, "continue", map[string]any{"Name": c.server, "URL": template.URL(to)})
}

// callback takes the authorization server's answer: in the session that
// started the flow, once.
func (d *Door) callback(w http.ResponseWriter, r *http.Request) {
	p, ok := d.person(w, r, false)
	if !ok {
		return
	}
	f := d.oauth.take(r.URL.Query().Get("state"))
	if f == nil || f.subject != p.Subject || subtle.ConstantTimeCompare([]byte(f.session), []byte(p.CSRF)) != 1 {
		apierror.Write(w, &apierror.Error{Status: http.StatusBadRequest, Type: apierror.TypeInvalidRequest, Code: "invalid_state",
			Message: "This sign-in was not started here, in this session, or it has expired: connect again from " + accountsPath + "."})
		return
	}
	d.oauth.mu.Lock()
	c := d.oauth.current.delegated[f.server]
	d.oauth.mu.Unlock()
	code := r.URL.Query().Get("code")
	if c == nil || code == "" {
		apierror.Write(w, &apierror.Error{Status: http.StatusBadRequest, Type: apierror.TypeInvalidRequest, Code: "not_connected",
			Message: "The server's sign-in did not give the gateway access; connect again from " + accountsPath + "."})
		return
	}
	if err := c.finish(r.Context(), p.Subject, f.redirect, code, f.verifier); err != nil {
		d.log.Warn("mcp: connecting an account failed", "server", c.server, "error", err.Error())
		msg := "The token endpoint of MCP server " + quote(c.server) + " did not give a token."
		if ce, ok := errors.AsType[*credentialError](err); ok {
			msg = ce.Error() + "."
		}
		apierror.Write(w, &apierror.Error{Status: http.StatusBadGateway, Type: apierror.TypeUpstream, Code: "upstream_error", Message: msg})
		return
	}
	http.Redirect(w, r, accountsPath+"?connected="+url.QueryEscape(c.server), http.StatusSeeOther)
}

// disconnect forgets the person's tokens for the server.
func (d *Door) disconnect(w http.ResponseWriter, r *http.Request) {
	p, c, ok := d.change(w, r)
	if !ok {
		return
	}
	if err := c.disconnect(r.Context(), p.Subject); err != nil {
		d.log.Error("mcp: disconnecting an account failed", "server", c.server, "error", err.Error())
		apierror.Write(w, err)
		return
	}
	http.Redirect(w, r, accountsPath, http.StatusSeeOther)
}

// externalURL is path at the gateway's external address: from base (the
// configured one, ending in accountsPath) when set, else the address the
// browser used.
func externalURL(r *http.Request, base, path string) string {
	if b := base[:len(base)-len(accountsPath)]; b != "" {
		return b + path
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	return scheme + "://" + r.Host + path
}

// begin keeps f under state; flows past their time are dropped.
func (o *oauthState) begin(state string, f *flow) {
	o.mu.Lock()
	defer o.mu.Unlock()
	now := time.Now()
	for k, g := range o.flows {
		if now.After(g.expires) {
			delete(o.flows, k)
		}
	}
	o.flows[state] = f
}

// take spends the flow of state: nil when unknown or expired.
func (o *oauthState) take(state string) *flow {
	o.mu.Lock()
	defer o.mu.Unlock()
	f := o.flows[state]
	delete(o.flows, state)
	if f == nil || time.Now().After(f.expires) {
		return nil
	}
	return f
}
