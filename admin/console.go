package admin

import (
	_ "embed"
	"encoding/json"
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"time"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/pagekit"
)

// The console: server-rendered pages over the same handlers' rules,
// without JavaScript, in the review site's style (pagekit). A person signs
// in on the review site, whose session cookie is the console's: the pages
// are under /review/ for that reason; the forms carry the session's CSRF
// token.

//go:embed console.html
var consoleHTML string

var consolePages = template.Must(pagekit.WithStyle(template.New("console").Funcs(template.FuncMap{
	"ts": func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
})).Parse(consoleHTML))

type consoleRoute struct {
	method, path string
	h            handler
}

func (a *API) consoleRoutes() []consoleRoute {
	return []consoleRoute{
		{http.MethodGet, "/console", func(w http.ResponseWriter, r *http.Request) error {
			http.Redirect(w, r, "/review/console/agents", http.StatusSeeOther)
			return nil
		}},
		{http.MethodGet, "/review/console/agents", a.page(a.agentsPage)},
		{http.MethodGet, "/review/console/agents/:name", a.page(a.agentPage)},
		{http.MethodPost, "/review/console/agents/:name/keys", a.page(a.issuePage)},
		{http.MethodPost, "/review/console/agents/:name/keys/:id/revoke", a.page(a.revokePage)},
		{http.MethodGet, "/review/console/teams", a.page(a.teamsPage)},
	}
}

type navView struct {
	Who  string
	CSRF string
}

// page signs the person in for a console page: nobody signed in goes to
// the sign-in form; a refusal is an error page in the API's shape.
func (a *API) page(fn func(w http.ResponseWriter, r *http.Request, p door.Person) error) handler {
	return func(w http.ResponseWriter, r *http.Request) error {
		p, err := a.person(r, r.Method != http.MethodGet)
		if e, ok := errors.AsType[*apierror.Error](err); ok && e.Status == http.StatusUnauthorized {
			next := "/review/console/agents"
			if r.Method == http.MethodGet {
				next = r.URL.Path
			}
			http.Redirect(w, r, "/review/login?next="+url.QueryEscape(next), http.StatusSeeOther)
			return nil
		}
		if err != nil {
			return err
		}
		return fn(w, r, p)
	}
}

func (a *API) agentsPage(w http.ResponseWriter, r *http.Request, p door.Person) error {
	views, err := a.agentViews(r, p)
	if err != nil {
		return err
	}
	return pagekit.Render(w, http.StatusOK, consolePages, "agents", map[string]any{"Nav": navView{p.Name, p.CSRF}, "Agents": views})
}

type agentPageData struct {
	Nav    navView
	Agent  AgentView
	Keys   []KeyView
	Issued *IssuedKey
	Error  string
}

func (a *API) agentData(r *http.Request, p door.Person) (agentRef, agentPageData, error) {
	ref, err := a.agent(r, p, r.PathValue("name"))
	if err != nil {
		return ref, agentPageData{}, err
	}
	keys, err := a.d.Store.KeysInfo(r.Context(), ref.name)
	if err != nil {
		return ref, agentPageData{}, stateErr(err)
	}
	d := agentPageData{Nav: navView{p.Name, p.CSRF}, Agent: ref.view()}
	for _, k := range keys {
		if k.Runtime == (ref.stored != nil) {
			d.Keys = append(d.Keys, KeyView{ID: k.ID, Created: k.Created, Expires: k.Expires, LastUsed: k.LastUsed, By: k.By})
		}
	}
	return ref, d, nil
}

func (a *API) agentPage(w http.ResponseWriter, r *http.Request, p door.Person) error {
	_, d, err := a.agentData(r, p)
	if err != nil {
		return err
	}
	return pagekit.Render(w, http.StatusOK, consolePages, "agent", d)
}

// issuePage issues a key and shows it on the page it answers with: the
// key is in no URL, no redirect and no later page.
func (a *API) issuePage(w http.ResponseWriter, r *http.Request, p door.Person) error {
	ref, err := a.agent(r, p, r.PathValue("name"))
	if err != nil {
		return err
	}
	var expires *time.Time
	if in := r.PostFormValue("expires_in"); in != "" {
		raw, _ := json.Marshal(map[string]string{"expires_in": in})
		b, err := readBody(raw, []string{"expires_in"}, nil)
		if err == nil {
			expires, err = a.expiryOf(b)
		}
		if err != nil {
			_, d, derr := a.agentData(r, p)
			if derr != nil {
				return derr
			}
			d.Error = apierror.From(err).Message
			return pagekit.Render(w, http.StatusBadRequest, consolePages, "agent", d)
		}
	}
	k, err := a.issue(r, p, ref, expires)
	if err != nil {
		return err
	}
	_, d, err := a.agentData(r, p)
	if err != nil {
		return err
	}
	d.Issued = &k
	return pagekit.Render(w, http.StatusOK, consolePages, "agent", d)
}

func (a *API) revokePage(w http.ResponseWriter, r *http.Request, p door.Person) error {
	ref, err := a.agent(r, p, r.PathValue("name"))
	if err != nil {
		return err
	}
	if err := a.revoke(r, p, ref, r.PathValue("id")); err != nil {
		return err
	}
	http.Redirect(w, r, "/review/console/agents/"+url.PathEscape(ref.name), http.StatusSeeOther)
	return nil
}

type teamRow struct {
	Name, Description string
	Limits            []string
	Members           []string
}

func (a *API) teamsPage(w http.ResponseWriter, r *http.Request, p door.Person) error {
	all, err := a.d.Store.Teams(r.Context())
	if err != nil {
		return stateErr(err)
	}
	var rows []teamRow
	for _, t := range all {
		if !p.OwnsTeam(t.Name) {
			continue
		}
		var f struct {
			Description string `json:"description"`
			RateLimit   string `json:"rate_limit"`
			TokenLimit  string `json:"token_limit"`
			Budget      string `json:"budget"`
		}
		_ = json.Unmarshal(t.Spec, &f)
		row := teamRow{Name: t.Name, Description: f.Description}
		for _, l := range []struct{ label, v string }{{"requests", f.RateLimit}, {"tokens", f.TokenLimit}, {"budget", f.Budget}} {
			if l.v != "" {
				row.Limits = append(row.Limits, l.label+" "+l.v)
			}
		}
		if row.Members, err = a.members(r, t.Name); err != nil {
			return err
		}
		rows = append(rows, row)
	}
	return pagekit.Render(w, http.StatusOK, consolePages, "teams", map[string]any{"Nav": navView{p.Name, p.CSRF}, "Teams": rows})
}
