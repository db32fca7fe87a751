package admin

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"regexp"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/confkit"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/names"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/strictjson"
	"github.com/sacpgw/gateway/internal/team"
)

// maxBody bounds a request body of the admin API: an agents.yaml entry
// with an embedding fits with room to spare.
const maxBody = 256 << 10

// body is a request body of the admin API read once, strictly: valid
// UTF-8, no duplicate member names, one JSON object, nothing after it.
// Name is the "name" member (nil when absent), Fields the others, each
// a known field of the entry (unknown ones are refused with a did-you-mean).
type body struct {
	Name   *string
	Fields map[string]json.RawMessage
}

// readBody reads raw against the known fields of an entry; refuse, if set,
// says why a known field may not be set here ("" when it may).
func readBody(raw []byte, known []string, refuse func(field string) string) (body, error) {
	if err := strictjson.Check(raw, nil); err != nil {
		return body{}, apierror.BadRequest("", "Invalid JSON body: %v.", err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil || m == nil {
		return body{}, apierror.BadRequest("", "The body must be a JSON object.")
	}
	b := body{Fields: map[string]json.RawMessage{}}
	for _, k := range slices.Sorted(maps.Keys(m)) {
		v := m[k]
		if k == "name" {
			var s string
			if err := json.Unmarshal(v, &s); err != nil {
				return body{}, apierror.BadRequest("name", "name must be a string.")
			}
			b.Name = &s
			continue
		}
		if !slices.Contains(known, k) {
			return body{}, apierror.BadRequest(k, "Unknown field %q (known: name, %s)%s.", k, strings.Join(known, ", "), confkit.DidYouMean(k, known))
		}
		if refuse != nil {
			if why := refuse(k); why != "" {
				return body{}, apierror.BadRequest(k, "%s", why)
			}
		}
		b.Fields[k] = v
	}
	return b, nil
}

// entry is the Entry of name with fields, created now by p.
func (a *API) entry(name string, fields map[string]json.RawMessage, p door.Person) Entry {
	spec, _ := json.Marshal(fields) // raw JSON values under string keys always marshal
	now := a.now().UTC()
	return Entry{Name: name, Spec: spec, Created: now, Updated: now, By: p.Name}
}

// fieldsFact names the fields a change set, never their values (an
// endpoint or a description is the operator's, but a trail names who did
// what, and the entry's own state is in the store).
func fieldsFact(fields map[string]json.RawMessage) func(o *audit.Object) {
	return func(o *audit.Object) {
		names := slices.Sorted(maps.Keys(fields))
		if names == nil {
			names = []string{}
		}
		o.Strs("fields", slices.Clip(names))
	}
}

// merge is a PATCH: patch's fields over cur's, a null removing one.
func merge(cur json.RawMessage, patch map[string]json.RawMessage) (map[string]json.RawMessage, error) {
	out := map[string]json.RawMessage{}
	if len(cur) > 0 {
		if err := json.Unmarshal(cur, &out); err != nil {
			return nil, fmt.Errorf("admin: stored entry: %w", err)
		}
	}
	for k, v := range patch {
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) {
			delete(out, k)
			continue
		}
		out[k] = v
	}
	return out, nil
}

// yamlFields are the keys of a config entry type, in the struct's order;
// an inlined struct's keys (yaml:",inline", as roster.Profile) are the
// entry's own.
func yamlFields(t reflect.Type) []string {
	out := make([]string, 0, t.NumField())
	for f := range t.Fields() {
		name, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		switch {
		case f.Anonymous && opts == "inline":
			out = append(out, yamlFields(f.Type)...)
		case name != "" && name != "-":
			out = append(out, name)
		}
	}
	return out
}

var (
	agentFields = yamlFields(reflect.TypeFor[roster.Agent]())
	teamFields  = yamlFields(reflect.TypeFor[team.Team]())
)

// refuseFileOnly keeps the file's fields out of a run-time agent.
func refuseFileOnly(field string) string {
	if roster.FileOnly(field) {
		return field + " is set in agents.yaml only: an agent created here authenticates with the keys this API issues (POST /admin/agents/{name}/keys)."
	}
	return ""
}

// decodeEntry reads fields, an entry in JSON, as the loader reads the
// same entry in YAML (JSON is YAML): the units ("100/hour", "50KB",
// "25USD/day") and types by the same rules.
func decodeEntry(fields map[string]json.RawMessage, out any) error {
	raw, err := json.Marshal(fields)
	if err != nil {
		return err
	}
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(out); err != nil {
		// The body is one line of JSON: yaml's line numbers say nothing.
		msg := yamlNoise.ReplaceAllString(err.Error(), "")
		return apierror.BadRequest("", "%s.", strings.Join(strings.Fields(msg), " "))
	}
	return nil
}

// yamlNoise is what yaml's errors say that means nothing of a JSON body.
var yamlNoise = regexp.MustCompile(`yaml: |unmarshal errors:|line \d+: `)

// problems collects what a config check reports, for one answer.
type problems []string

func (p *problems) Line(...string) int              { return 0 }
func (p *problems) Has(...string) bool              { return false }
func (p *problems) Resolve(*string)                 {}
func (p *problems) Shown(s string) string           { return s }
func (p *problems) LookupEnv(string) (string, bool) { return "", false }
func (p *problems) Add(_ int, format string, args ...any) {
	*p = append(*p, fmt.Sprintf(format, args...))
}

// agentOf is the agent name with fields, checked as agents.yaml's entry
// (names of recipients looked up in others).
func agentOf(name string, fields map[string]json.RawMessage, others map[string]*roster.Agent) (*roster.Agent, error) {
	a := &roster.Agent{}
	if err := decodeEntry(fields, a); err != nil {
		return nil, err
	}
	a.ID = name
	var ps problems
	roster.CheckRuntime(&ps, a, others)
	if len(ps) > 0 {
		return nil, apierror.BadRequest("", "%s.", strings.Join(ps, "; "))
	}
	return a, nil
}

// teamName is what a team is called: 1-64 of a-z, 0-9, '_' and '-'.
var teamName = regexp.MustCompile(`^[a-z0-9][a-z0-9_-]{0,63}$`)

// teamOf is the team name with fields.
func teamOf(name string, fields map[string]json.RawMessage) (*team.Team, error) {
	if !teamName.MatchString(name) {
		return nil, apierror.BadRequest("name", "Team name %q: want 1-64 of a-z, 0-9, '_' and '-', starting with a letter or digit.", clip(name))
	}
	t := &team.Team{}
	if err := decodeEntry(fields, t); err != nil {
		return nil, err
	}
	t.Name, t.Runtime = name, true
	return t, nil
}

// checkAgentName is names' rule, as a 400.
func checkAgentName(name string) error {
	if err := names.Check(name); err != nil {
		return apierror.BadRequest("name", "%v.", err)
	}
	return nil
}

func clip(s string) string {
	if len(s) > 64 {
		return s[:64] + "…"
	}
	return s
}
