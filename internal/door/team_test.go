package door

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/internal/team"
)

type downTeams struct{}

func (downTeams) Team(context.Context, string) (*team.Team, bool, error) {
	return nil, false, errors.New("redis: connection refused")
}

// TestIdentifyFindsTheTeam: the identify stage gives the exchange the
// agent's team; an agent whose team is not defined (a runtime team
// deleted) is refused with a 403 naming it, and one whose team cannot be
// read gets a 503: never served without its team's limits.
func TestIdentifyFindsTheTeam(t *testing.T) {
	ds := &team.Team{Name: "ds"}
	agents := map[string]*roster.Agent{
		"a1":   {ID: "a1", Team: "ds", TokenSHA256: "set", TokenHash: roster.HashToken("tok-a1")},
		"gone": {ID: "gone", Team: "deleted", TokenSHA256: "set", TokenHash: roster.HashToken("tok-gone")},
		"solo": {ID: "solo", TokenSHA256: "set", TokenHash: roster.HashToken("tok-solo")},
	}
	id, err := NewIdentifier(agents, "")
	if err != nil {
		t.Fatal(err)
	}
	serve := func(src team.Source, tok string) (*scope.Exchange, int) {
		id.Teams = src
		ex := &scope.Exchange{}
		r := httptest.NewRequest(http.MethodGet, "/v1/models", nil)
		r.Header.Set("Authorization", "Bearer "+tok)
		err := id.Serve(httptest.NewRecorder(), scope.Attach(r, ex), http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
		if err != nil {
			return ex, apierror.From(err).Status
		}
		return ex, http.StatusOK
	}
	file := team.Combined{File: team.Static{"ds": ds}}
	if ex, st := serve(file, "tok-a1"); st != http.StatusOK || ex.Team != ds {
		t.Errorf("a1: %d, team %+v", st, ex.Team)
	}
	if ex, st := serve(file, "tok-solo"); st != http.StatusOK || ex.Team != nil {
		t.Errorf("solo: %d, team %+v", st, ex.Team)
	}
	if _, st := serve(file, "tok-gone"); st != http.StatusForbidden {
		t.Errorf("an agent of an undefined team: %d, want 403", st)
	}
	if _, st := serve(downTeams{}, "tok-a1"); st == http.StatusOK || st == http.StatusForbidden {
		t.Errorf("teams unreadable: %d, want an error that is not a verdict on the agent", st)
	}
}
