// Package usagepage is the usage page, GET /review/usage: for each team
// and agent, the requests, tokens and spend of each of the last 30 days,
// drawn as bar charts a person reads at a glance (inline SVG: no script,
// no image source under the strict Content-Security-Policy), readable on
// a phone. Admins see every team and agent; a team owner sees their
// teams and the teams' agents; anyone else is told whom to ask.
//
// The page reads the usage history (internal/ledger), which every replica
// writes to the state backend, so it is the same on every replica and
// after a restart. It changes nothing.
package usagepage

import (
	"context"
	"embed"
	"fmt"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/ledger"
	"github.com/sacpgw/gateway/internal/pagekit"
)

// Path is the page's route: under /review/, where the review site's
// session cookie is sent.
const Path = "/review/usage"

// Usage reads the usage history (ledger.Recorder).
type Usage interface {
	Read(ctx context.Context) (map[string]*ledger.Series, error)
}

// Page is the usage page's door.
type Page struct {
	people door.PeopleAuth
	usage  Usage
	log    *slog.Logger
	now    func() time.Time
	// members is, per agent, its team under the current configuration.
	members atomic.Pointer[map[string]string]
}

// New returns the page of cfg; people signs people in (the review site's
// sessions), usage is the history.
func New(cfg *config.Config, people door.PeopleAuth, usage Usage, log *slog.Logger) *Page {
	p := &Page{people: people, usage: usage, log: log, now: time.Now}
	p.members.Store(membersOf(cfg))
	return p
}

func membersOf(cfg *config.Config) *map[string]string {
	m := make(map[string]string, len(cfg.Agents))
	for id, a := range cfg.Agents {
		m[id] = a.Team
	}
	return &m
}

// Routes implements door.Door.
func (p *Page) Routes() []door.Route {
	return []door.Route{{Method: http.MethodGet, Path: Path, Handler: http.HandlerFunc(p.serve), Access: door.People}}
}

// Prepare implements door.Door: the agents' teams of cfg.
func (p *Page) Prepare(cfg *config.Config) (func(), error) {
	m := membersOf(cfg)
	return func() { p.members.Store(m) }, nil
}

//go:embed usage.html
var pageFS embed.FS

var tmpl = template.Must(template.New("").ParseFS(pageFS, "usage.html"))

// readDeadline bounds the wait for the state backend.
const readDeadline = 3 * time.Second

func (p *Page) serve(w http.ResponseWriter, r *http.Request) {
	who, err := p.people.SignedIn(r)
	if err != nil {
		if e := apierror.From(err); e.Status == http.StatusUnauthorized {
			http.Redirect(w, r, "/review/login?next="+url.QueryEscape(Path), http.StatusSeeOther)
			return
		}
		httpx.Fail(w, r, err)
		return
	}
	v := view{Who: who.Name, Admin: who.Admin, Now: p.now().UTC()}
	status := http.StatusOK
	if !who.Admin && len(who.TeamOwner) == 0 {
		status = http.StatusForbidden
		v.Forbidden = true
	} else {
		ctx, cancel := context.WithTimeout(r.Context(), readDeadline)
		defer cancel()
		series, err := p.usage.Read(ctx)
		if err != nil {
			p.log.Warn("usage page: history unreadable", "error", err.Error())
			v.Error = "The usage history could not be read right now; retry shortly."
		}
		v.Teams, v.Agents = p.visible(who, series)
	}
	write(w, r, status, v)
}

// visible are the teams and agents who may see, as cards, by name.
func (p *Page) visible(who door.Person, series map[string]*ledger.Series) (teams, agents []card) {
	members := *p.members.Load()
	today := ledger.Day(p.now())
	for subj, s := range series {
		switch {
		case strings.HasPrefix(subj, ledger.TeamPrefix):
			name := strings.TrimPrefix(subj, ledger.TeamPrefix)
			if who.OwnsTeam(name) {
				teams = append(teams, cardOf(name, s, today))
			}
		case strings.HasPrefix(subj, ledger.AgentPrefix):
			id := strings.TrimPrefix(subj, ledger.AgentPrefix)
			if who.Admin || who.OwnsTeam(members[id]) {
				agents = append(agents, cardOf(id, s, today))
			}
		}
	}
	byName := func(a, b card) int { return strings.Compare(a.Name, b.Name) }
	slices.SortFunc(teams, byName)
	slices.SortFunc(agents, byName)
	return teams, agents
}

func write(w http.ResponseWriter, r *http.Request, status int, v view) {
	if err := pagekit.Render(w, status, tmpl, "usage", v); err != nil {
		httpx.Fail(w, r, fmt.Errorf("usage page: %w", err))
	}
}
