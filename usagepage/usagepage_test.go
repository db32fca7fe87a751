package usagepage

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/ledger"
	"github.com/sacpgw/gateway/internal/roster"
)

// person signs everyone in as p; a nil p is nobody signed in.
type person struct{ p *door.Person }

func (s person) SignedIn(*http.Request) (door.Person, error) {
	if s.p == nil {
		return door.Person{}, apierror.Unauthorized("sign in")
	}
	return *s.p, nil
}

type history struct {
	s   map[string]*ledger.Series
	err error
}

func (h history) Read(context.Context) (map[string]*ledger.Series, error) { return h.s, h.err }

// usageOf is a history in which each subject made n requests today.
func usageOf(now time.Time, n map[string]int64) history {
	out := map[string]*ledger.Series{}
	for subj, v := range n {
		s := &ledger.Series{Subject: subj, Total: ledger.Counts{Requests: v, MicroUSD: 400}}
		for _, d := range ledger.LastDays(now, ledger.Days) {
			s.Days = append(s.Days, ledger.DayCounts{Day: d})
		}
		s.Days[ledger.Days-1].Counts = s.Total
		out[subj] = s
	}
	return history{s: out}
}

func get(t *testing.T, p *Page) (int, string, http.Header) {
	t.Helper()
	w := httptest.NewRecorder()
	p.serve(w, httptest.NewRequest(http.MethodGet, Path, nil))
	b, _ := io.ReadAll(w.Result().Body)
	return w.Code, string(b), w.Header()
}

func page(who *door.Person, h history) *Page {
	cfg := &config.Config{Agents: map[string]*roster.Agent{"a1": {ID: "a1", Team: "ds"}, "b1": {ID: "b1", Team: "web"}, "solo": {ID: "solo"}}}
	return New(cfg, person{who}, h, slog.New(slog.NewTextHandler(io.Discard, nil)))
}

// Who sees what: the admin every team and agent; a team's owner that team
// and its agents only; a reviewer who owns no team a 403 that says whom
// to ask; nobody signed in the sign-in form.
func TestWhoSeesWhat(t *testing.T) {
	now := time.Now()
	h := usageOf(now, map[string]int64{"team:ds": 3, "team:web": 5, "agent:a1": 3, "agent:b1": 5, "agent:solo": 1})
	cases := []struct {
		name       string
		who        *door.Person
		status     int
		want, none []string
	}{
		{"admin", &door.Person{Name: "admin", Admin: true}, 200,
			[]string{`id="usage-ds"`, `id="usage-web"`, `id="usage-a1"`, `id="usage-b1"`, `id="usage-solo"`}, nil},
		{"owner of ds", &door.Person{Name: "ana@example.com", TeamOwner: []string{"ds"}, Via: "oidc"}, 200,
			[]string{`id="usage-ds"`, `id="usage-a1"`, "3 in 30 days", "$0.0004"}, []string{`id="usage-web"`, `id="usage-b1"`, `id="usage-solo"`}},
		{"reviewer", &door.Person{Name: "rev", Reviewer: true}, 403, []string{`id="forbidden"`}, []string{`id="usage-`}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			st, body, hdr := get(t, page(c.who, h))
			if st != c.status {
				t.Fatalf("status %d, want %d", st, c.status)
			}
			for _, w := range c.want {
				if !strings.Contains(body, w) {
					t.Errorf("lacks %s", w)
				}
			}
			for _, n := range c.none {
				if strings.Contains(body, n) {
					t.Errorf("shows %s", n)
				}
			}
			if csp := hdr.Get("Content-Security-Policy"); !strings.HasPrefix(csp, "default-src 'none'") || strings.Contains(body, "<script") {
				t.Errorf("CSP %q, or a script on the page", csp)
			}
		})
	}
	st, _, hdr := get(t, page(nil, h))
	if st != http.StatusSeeOther || hdr.Get("Location") != "/review/login?next=%2Freview%2Fusage" {
		t.Errorf("signed out: %d to %q", st, hdr.Get("Location"))
	}
}

// A history the state backend cannot give is said on the page, which
// still stands.
func TestHistoryUnreadable(t *testing.T) {
	st, body, _ := get(t, page(&door.Person{Admin: true}, history{err: errors.New("redis down")}))
	if st != 200 || !strings.Contains(body, `id="usage-error"`) || strings.Contains(body, "redis down") {
		t.Errorf("%d %s", st, body)
	}
}

// The bars: one per day, today's the tallest of a day's only use, an
// idle day none, every bar saying its day and amount.
func TestChart(t *testing.T) {
	days := []ledger.DayCounts{{Day: "2026-11-27", Counts: ledger.Counts{Requests: 2}}, {Day: "2026-11-28"}, {Day: "2026-11-29", Counts: ledger.Counts{Requests: 1000}}}
	ch := chartOf("requests", days, "2026-11-29", func(c ledger.Counts) int64 { return c.Requests }, count)
	if len(ch.Bars) != 3 || ch.Bars[2].H != chartH || ch.Bars[1].H != 0 || ch.Bars[0].H != 1 || ch.Bars[2].Title != "2026-11-29: 1,000" {
		t.Errorf("bars %+v", ch.Bars)
	}
	if ch.Total != "1,002" || ch.Today != "1,000" || ch.Peak != "busiest 2026-11-29 (1,000)" {
		t.Errorf("chart %+v", ch)
	}
	for in, want := range map[int64]string{0: "$0.00", 400: "$0.0004", 18_400_000: "$18.40", 1_234_567: "$1.234567"} {
		if got := money(in); got != want {
			t.Errorf("money(%d) = %s, want %s", in, got, want)
		}
	}
}
