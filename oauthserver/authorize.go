package oauthserver

import (
	"context"
	"crypto/subtle"
	"embed"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/mcpauth"
	"github.com/sacpgw/gateway/internal/pagekit"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/policy"
)

// The authorization endpoint checks a client's request, keeps it for ten
// minutes under a random id, and sends the browser to the consent page
// under /review/, where the person's session cookie reaches: signed in
// with the organisation's provider (or sent there first and back), they
// see the client's name, where its code will go, the server, and the
// agents they may act as, and decide. The code goes to the client's
// redirect URI only after that decision.

// Store kinds.
const (
	kindClient  = "client"
	kindPending = "pending"
	kindCode    = "code"
	kindAccess  = "at"
	kindRefresh = "rt"
	kindFamily  = "family"
	kindSpent   = "spent"
)

const (
	pendingTTL = 10 * time.Minute
	codeTTL    = 2 * time.Minute
	maxState   = 1024
	codePrefix = "gwmcp_code_"
)

// pending is an authorization request waiting for its person.
type pending struct {
	ClientID    string `json:"client_id"`
	RedirectURI string `json:"redirect_uri"`
	Challenge   string `json:"challenge"`
	Server      string `json:"server"`
	State       string `json:"state,omitempty"`
	Scope       string `json:"scope,omitempty"`
}

//go:embed consent.html
var pageFS embed.FS

var pages = pagekit.WithStyle(template.Must(template.New("").ParseFS(pageFS, "consent.html")))

// challengeRE is a PKCE S256 challenge: 32 bytes, base64url, no padding.
var challengeRE = regexp.MustCompile(`^[A-Za-z0-9_-]{43}$`)

// single reads a query or form where every parameter appears at most once
// (RFC 6749 3.1: a repeated parameter is an error); an empty value is
// absent.
func single(v url.Values) (map[string]string, error) {
	out := make(map[string]string, len(v))
	for k, vs := range v {
		if len(vs) > 1 {
			return nil, fmt.Errorf("the parameter %s appears more than once", clip(k))
		}
		if vs[0] != "" {
			out[k] = vs[0]
		}
	}
	return out, nil
}

// authorize serves GET /oauth/authorize.
func (s *Door) authorize(w http.ResponseWriter, r *http.Request, c *conf) {
	q, err := single(r.URL.Query())
	if err != nil {
		s.errorPage(w, http.StatusBadRequest, "This sign-in request is malformed: "+err.Error()+".")
		return
	}
	cl, ok, err := mcpauth.Get[client](r.Context(), s.store, kindClient, q["client_id"])
	switch {
	case err != nil:
		s.log.Error("authorize: client store unavailable", "error", err.Error())
		s.errorPage(w, http.StatusServiceUnavailable, "Signing in is unavailable right now; try again shortly.")
		return
	case !ok:
		s.errorPage(w, http.StatusBadRequest, "The application is not registered here (or its registration expired): let it register again.")
		return
	case !slices.Contains(cl.RedirectURIs, q["redirect_uri"]):
		// Never redirect to a URI the client did not register: the
		// error is shown here instead.
		s.errorPage(w, http.StatusBadRequest, "The application asked to be answered at an address it did not register.")
		return
	}
	p, code, desc := checkAuthorize(q, c)
	if code != "" {
		redirectBack(w, r, q["redirect_uri"], c.set.BaseURL, url.Values{"error": {code}, "error_description": {desc}, "state": {q["state"]}})
		return
	}
	id := mcpauth.Secret("")
	if err := mcpauth.Put(r.Context(), s.store, kindPending, id, p, pendingTTL); err != nil {
		s.log.Error("authorize: store unavailable", "error", err.Error())
		s.errorPage(w, http.StatusServiceUnavailable, "Signing in is unavailable right now; try again shortly.")
		return
	}
	http.Redirect(w, r, c.set.BaseURL+ConsentPath+id, http.StatusSeeOther)
}

// checkAuthorize checks an authorization request of a known client at a
// registered redirect URI: the pending request, or the OAuth error code
// and description to send back.
func checkAuthorize(q map[string]string, c *conf) (pending, string, string) {
	p := pending{ClientID: q["client_id"], RedirectURI: q["redirect_uri"], Challenge: q["code_challenge"], State: q["state"], Scope: q["scope"]}
	switch {
	case q["response_type"] != "code":
		return p, "unsupported_response_type", "Only the authorization code flow (response_type=code) is supported."
	case q["code_challenge_method"] != "S256" || !challengeRE.MatchString(p.Challenge):
		return p, "invalid_request", "PKCE is required: send code_challenge with code_challenge_method=S256 (plain is refused)."
	case len(p.State) > maxState:
		return p, "invalid_request", "state is too long."
	}
	for _, sc := range strings.Fields(p.Scope) {
		if !slices.Contains(scopes, sc) {
			return p, "invalid_scope", "Unknown scope " + clip(sc) + "; this server knows mcp and offline_access."
		}
	}
	server, ok := serverOf(q["resource"], c)
	if !ok {
		return p, "invalid_target", "resource must name one MCP server of this gateway, as " + c.set.Resource("{server}") + "."
	}
	p.Server = server
	return p, "", ""
}

// serverOf is the MCP server whose resource indicator is resource.
func serverOf(resource string, c *conf) (string, bool) {
	name, ok := strings.CutPrefix(resource, c.set.BaseURL+"/mcp/")
	return name, ok && c.servers[name]
}

// redirectBack sends the browser to the client's registered redirect URI
// with params, and the issuer (RFC 9207).
func redirectBack(w http.ResponseWriter, r *http.Request, redirectURI, issuer string, params url.Values) {
	u, _ := url.Parse(redirectURI) // checked at registration
	q := u.Query()
	for k, vs := range params {
		if len(vs) == 1 && vs[0] != "" {
			q.Set(k, vs[0])
		}
	}
	q.Set("iss", issuer)
	u.RawQuery = q.Encode()
	http.Redirect(w, r, u.String(), http.StatusSeeOther)
}

// consentView is what the consent page shows.
type consentView struct {
	ID, ClientName, ClientID, RedirectHost, Server, Person, CSRF string
	Agents                                                       []string
	Error                                                        string
}

// consentPage serves GET /review/mcp-clients/{id}.
func (s *Door) consentPage(w http.ResponseWriter, r *http.Request, c *conf) {
	id := r.PathValue("id")
	p, cl, ok := s.pendingOf(w, r, id)
	if !ok {
		return
	}
	who, ok := s.signedIn(w, r, c, id)
	if !ok {
		return
	}
	agents, err := s.allowedAgents(r.Context(), c, who, p, cl)
	if err != nil {
		s.log.Error("consent: policy unavailable", "error", err.Error())
		s.errorPage(w, http.StatusServiceUnavailable, "The policy cannot decide right now; try again shortly.")
		return
	}
	if len(agents) == 0 {
		s.refuse(w, r, who, p, "the policy lets this person act as no agent at this server")
		return
	}
	v := consentView{ID: id, ClientName: cl.Name, ClientID: cl.ID, RedirectHost: redirectHost(p.RedirectURI), Server: p.Server,
		Person: who.Name, CSRF: who.CSRF, Agents: agents}
	if err := pagekit.RenderFormTo(w, http.StatusOK, pages, "consent", v, formTarget(p.RedirectURI)); err != nil {
		s.log.Error("consent page", "error", err.Error())
	}
}

// consent serves POST /review/mcp-clients/{id}: the person's decision.
func (s *Door) consent(w http.ResponseWriter, r *http.Request, c *conf) {
	id := r.PathValue("id")
	who, ok := s.signedIn(w, r, c, id)
	if !ok {
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, 4096)
	if err := r.ParseForm(); err != nil || len(r.PostForm) > 4 {
		s.errorPage(w, http.StatusBadRequest, "The form is malformed.")
		return
	}
	if !httpx.SameOrigin(r) || who.CSRF == "" || subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(who.CSRF)) != 1 {
		s.errorPage(w, http.StatusForbidden, "This form did not come from this page (cross-site request refused); open the sign-in from your application again.")
		return
	}
	p, ok, err := mcpauth.Take[pending](r.Context(), s.store, kindPending, id)
	switch {
	case err != nil:
		s.unavailablePage(w, "consent", err)
		return
	case !ok:
		s.errorPage(w, http.StatusNotFound, "This sign-in request has expired or was already answered; start again from your application.")
		return
	}
	if r.PostForm.Get("decision") != "allow" {
		_ = s.record(r, KindRefuse, "", &who, map[string]any{"client_id": p.ClientID, "server": p.Server, "reason": "the person declined"})
		redirectBack(w, r, p.RedirectURI, c.set.BaseURL, url.Values{"error": {"access_denied"}, "error_description": {"The person declined."}, "state": {p.State}})
		return
	}
	cl, ok, err := mcpauth.Get[client](r.Context(), s.store, kindClient, p.ClientID)
	if err != nil || !ok {
		s.errorPage(w, http.StatusBadRequest, "The application's registration expired; start again from your application.")
		return
	}
	// Decided again on exactly the agent chosen: the page's list is not
	// trusted back.
	agent := r.PostForm.Get("agent")
	a := agentNamed(c, agent)
	if a == nil {
		s.refuse(w, r, who, p, "the chosen agent is not configured")
		return
	}
	d, err := s.policy.MCPClient(r.Context(), clientInput(who, a, p, cl))
	if err != nil && !d.FailClosed {
		s.unavailablePage(w, "consent policy", err)
		return
	}
	if !d.Allow {
		s.refuse(w, r, who, p, "the policy does not let this person act as agent "+agent)
		return
	}
	s.issueCode(w, r, c, who, p, agent)
}

// issueCode stores a code for p's client, acting as agent for who, and
// sends it to the client.
func (s *Door) issueCode(w http.ResponseWriter, r *http.Request, c *conf, who door.Person, p pending, agent string) {
	code := mcpauth.Secret(codePrefix)
	g := grant{ClientID: p.ClientID, Server: p.Server, Agent: agent, Scope: p.Scope, Subject: who.Subject, Email: who.Email, Name: who.Name,
		RedirectURI: p.RedirectURI, Challenge: p.Challenge, Family: mcpauth.Secret(""), Ends: s.now().Add(c.set.RefreshTokenTTL.D()).Unix()}
	if err := mcpauth.Put(r.Context(), s.store, kindCode, mcpauth.Key(code), g, codeTTL); err != nil {
		s.unavailablePage(w, "consent", err)
		return
	}
	if err := s.record(r, KindGrant, agent, &who, map[string]any{"client_id": p.ClientID, "server": p.Server}); err != nil {
		_ = s.store.Delete(r.Context(), kindCode, mcpauth.Key(code))
		s.unavailablePage(w, "consent audit", err)
		return
	}
	redirectBack(w, r, p.RedirectURI, c.set.BaseURL, url.Values{"code": {code}, "state": {p.State}})
}

// pendingOf reads the pending request id and its client, or answers.
func (s *Door) pendingOf(w http.ResponseWriter, r *http.Request, id string) (pending, client, bool) {
	p, ok, err := mcpauth.Get[pending](r.Context(), s.store, kindPending, id)
	if err == nil && ok {
		var cl client
		if cl, ok, err = mcpauth.Get[client](r.Context(), s.store, kindClient, p.ClientID); err == nil && ok {
			return p, cl, true
		}
	}
	if err != nil {
		s.unavailablePage(w, "consent", err)
	} else {
		s.errorPage(w, http.StatusNotFound, "This sign-in request has expired or was already answered; start again from your application.")
	}
	return pending{}, client{}, false
}

// signedIn is the person signed in with the organisation's provider; one
// who is not (or signed in with a token, which names nobody the provider
// knows) is sent to the provider's sign-in, and back here.
func (s *Door) signedIn(w http.ResponseWriter, r *http.Request, c *conf, id string) (door.Person, bool) {
	who, err := s.people.SignedIn(r)
	e := apierror.From(err)
	switch {
	case err == nil && who.Subject != "":
		return who, true
	case err == nil || e.Status == http.StatusUnauthorized:
		http.Redirect(w, r, "/review/oidc/login?next="+url.QueryEscape(ConsentPath+id), http.StatusSeeOther)
	default:
		s.errorPage(w, e.Status, e.Message)
	}
	return door.Person{}, false
}

// allowedAgents are the agents the policy lets who's client act as at p's
// server, by id.
func (s *Door) allowedAgents(ctx context.Context, c *conf, who door.Person, p pending, cl client) ([]string, error) {
	var out []string
	for _, a := range c.agents {
		d, err := s.policy.MCPClient(ctx, clientInput(who, a, p, cl))
		if err != nil && !d.FailClosed {
			return nil, err
		}
		if d.Allow {
			out = append(out, a.ID)
		}
	}
	return out, nil
}

// clientInput is data.gateway.mcp_clients.allow's input.
func clientInput(who door.Person, a *roster.Agent, p pending, cl client) map[string]any {
	return map[string]any{
		"person": map[string]any{"subject": who.Subject, "email": who.Email, "groups": anyList(who.Groups), "admin": who.Admin,
			"reviewer": who.Reviewer, "team_owner": anyList(who.TeamOwner), "team_reviewer": anyList(who.TeamReviewer)},
		"agent":  policy.AgentInput(a),
		"server": p.Server,
		"client": map[string]any{"id": cl.ID, "name": cl.Name, "redirect_host": redirectHost(p.RedirectURI)},
	}
}

func anyList(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

func agentNamed(c *conf, id string) *roster.Agent {
	for _, a := range c.agents {
		if a.ID == id {
			return a
		}
	}
	return nil
}

// refuse answers a person the policy lets act as nobody (or not as the
// agent chosen): a page saying so, and an oauth.refuse entry naming them.
func (s *Door) refuse(w http.ResponseWriter, r *http.Request, who door.Person, p pending, why string) {
	_ = s.record(r, KindRefuse, "", &who, map[string]any{"client_id": p.ClientID, "server": p.Server, "reason": why})
	s.errorPage(w, http.StatusForbidden, "You may not let an application act for you at MCP server "+p.Server+": "+why+
		". Ask an admin of the gateway if you need this.")
}

// redirectHost is where a redirect URI sends the code, as the consent
// page shows it: its host, or an app's scheme.
func redirectHost(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return ""
	}
	if u.Host != "" {
		return u.Host
	}
	return u.Scheme + ":"
}

// hostRE is what a CSP source may carry of a redirect URI's host.
var hostRE = regexp.MustCompile(`^[A-Za-z0-9.\-]+(:[0-9]+)?$|^\[[0-9A-Fa-f:.]+\](:[0-9]+)?$`)

// formTarget is the CSP form-action source of a redirect URI.
func formTarget(s string) string {
	u, err := url.Parse(s)
	switch {
	case err != nil:
		return ""
	case u.Host != "" && hostRE.MatchString(u.Host):
		return u.Scheme + "://" + u.Host
	case u.Host == "":
		return u.Scheme + ":"
	}
	return ""
}

// errorPage shows a plain page with msg.
func (s *Door) errorPage(w http.ResponseWriter, status int, msg string) {
	if err := pagekit.Render(w, status, pages, "problem", msg); err != nil {
		s.log.Error("oauth page", "error", err.Error())
	}
}

func (s *Door) unavailablePage(w http.ResponseWriter, what string, err error) {
	s.log.Error(what+": store unavailable", "error", err.Error())
	s.errorPage(w, http.StatusServiceUnavailable, "Signing in is unavailable right now; try again shortly.")
}
