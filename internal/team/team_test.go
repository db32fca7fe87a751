package team

import (
	"context"
	"errors"
	"regexp"
	"testing"
)

type runtime map[string]*Team

func (r runtime) Team(_ context.Context, name string) (*Team, bool, error) {
	if name == "broken" {
		return nil, false, errors.New("store down")
	}
	t, ok := r[name]
	return t, ok, nil
}

// The file's team holds over a runtime one of the same name; a runtime
// team is found when the file has none; a store failure is an error, not
// "no such team" (the caller must not serve the agent without its team's
// limits).
func TestCombined(t *testing.T) {
	file := &Team{Name: "ds"}
	c := Combined{File: Static{"ds": file}, Runtime: runtime{"ds": {Name: "ds", Runtime: true}, "web": {Name: "web", Runtime: true}}}
	if got, ok, err := c.Team(t.Context(), "ds"); got != file || !ok || err != nil {
		t.Errorf("ds = %+v %v %v, want the file's", got, ok, err)
	}
	if got, ok, err := c.Team(t.Context(), "web"); got == nil || !got.Runtime || !ok || err != nil {
		t.Errorf("web = %+v %v %v, want the runtime one", got, ok, err)
	}
	if _, ok, err := c.Team(t.Context(), "nope"); ok || err != nil {
		t.Errorf("nope: %v %v, want not found", ok, err)
	}
	if _, ok, err := c.Team(t.Context(), "broken"); ok || err == nil {
		t.Errorf("broken: %v %v, want the store's error", ok, err)
	}
	if _, ok, err := (Combined{}).Team(t.Context(), "ds"); ok || err != nil {
		t.Errorf("no teams at all: %v %v", ok, err)
	}
}

var namePattern = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// FuzzCheckName: a name is accepted exactly when it is 1-64 of a-z, 0-9,
// '_' and '-', starting with a letter or digit (team names go into Redis
// keys, URLs and audit entries; the admin API takes them from people).
func FuzzCheckName(f *testing.F) {
	for _, s := range []string{"ds", "data-science", "", "Data", "-x", "a:b", "a b", "é", string(make([]byte, 65))} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if ok := CheckName(s) == nil; ok != namePattern.MatchString(s) {
			t.Errorf("CheckName(%q) accepted %v, the pattern says %v", s, ok, !ok)
		}
	})
}
