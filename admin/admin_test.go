package admin

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/confkit"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/team"
)

// people signs in whoever the request's X-Who names: the contract of
// door.PeopleAuth (which approval's sessions serve in the gateway), with
// the roles a provider's groups would give.
type people map[string]door.Person

func (p people) SignedIn(r *http.Request) (door.Person, error) {
	who := r.Header.Get("X-Who")
	if who == "agent" {
		return door.Person{}, apierror.Forbidden("an agent's token")
	}
	if pp, ok := p[who]; ok {
		return pp, nil
	}
	return door.Person{}, apierror.Unauthorized("nobody signed in")
}

type harness struct {
	t     *testing.T
	srv   *httptest.Server
	store *Store
	keys  *Keys
	api   *API
}

var staff = people{
	"admin":   {Name: "admin", Admin: true, Via: "token"},
	"ds-lead": {Name: "ds-lead@example.org", Email: "ds-lead@example.org", Subject: "u1", TeamOwner: []string{"data"}, Via: "oidc"},
	"web":     {Name: "web-lead", TeamOwner: []string{"web"}, Via: "oidc"},
	"rev":     {Name: "security-lead", Reviewer: true, Via: "token"},
	"cookie":  {Name: "admin", Admin: true, Via: "oidc", CSRF: "csrf-1"},
}

func newHarness(t *testing.T, dir string) *harness {
	t.Helper()
	store, err := NewMemoryStore(dir)
	if err != nil {
		t.Fatal(err)
	}
	return harnessOn(t, store)
}

func harnessOn(t *testing.T, store *Store) *harness {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	trail, err := audit.Open(audit.Config{Dir: t.TempDir(), Chain: "admin", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { trail.Close() })
	keys := NewKeys(store, log)
	cfg := &config.Config{Agents: map[string]*roster.Agent{
		"file-agent": {ID: "file-agent", Type: "coder", Team: "data"},
		"web-bot":    {ID: "web-bot", Type: "coder", Team: "web"},
	}}
	api, err := New(cfg, Deps{Store: store, Keys: keys, People: staff, Audit: &door.Recorder{Log: trail, FailClosed: true, Logger: log}, Log: log})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	for _, r := range api.Routes() {
		mux.Handle(r.Pattern(), r.Handler)
	}
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &harness{t: t, srv: srv, store: store, keys: keys, api: api}
}

func (h *harness) do(who, method, path, body string, hdr ...string) (int, string) {
	h.t.Helper()
	req, _ := http.NewRequest(method, h.srv.URL+path, strings.NewReader(body))
	req.Header.Set("X-Who", who)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(res.Body)
	return res.StatusCode, string(b)
}

func (h *harness) must(who, method, path, body string, want int) string {
	h.t.Helper()
	st, b := h.do(who, method, path, body)
	if st != want {
		h.t.Fatalf("%s %s %s as %s: %d %s, want %d", method, path, body, who, st, b, want)
	}
	return b
}

// TestRoles: a team owner manages the agents and keys of their team only
// (another team's agent is 404, as one that does not exist), cannot put
// an agent in another team nor create or delete teams; a reviewer who
// owns no team and an agent are refused.
func TestRoles(t *testing.T) {
	h := newHarness(t, "")
	h.must("admin", "POST", "/admin/teams", `{"name":"data","budget":"500USD/day"}`, 201)
	h.must("admin", "POST", "/admin/teams", `{"name":"web"}`, 201)
	h.must("ds-lead", "POST", "/admin/agents", `{"name":"ds-1","team":"data","type":"analyst"}`, 201)
	h.must("web", "POST", "/admin/agents", `{"name":"web-1","team":"web"}`, 201)

	for _, c := range []struct {
		who, method, path, body string
		want                    int
	}{
		{"ds-lead", "GET", "/admin/agents/web-1", "", 404},
		{"ds-lead", "GET", "/admin/agents/web-bot", "", 404},
		{"ds-lead", "POST", "/admin/agents/web-1/keys", "", 404},
		{"ds-lead", "GET", "/admin/agents/web-1/keys", "", 404},
		{"ds-lead", "PATCH", "/admin/agents/web-1", `{"disabled":true}`, 404},
		{"ds-lead", "DELETE", "/admin/agents/web-1", "", 404},
		{"ds-lead", "GET", "/admin/teams/web", "", 404},
		{"ds-lead", "POST", "/admin/agents", `{"name":"ds-2","team":"web"}`, 403},
		{"ds-lead", "POST", "/admin/agents", `{"name":"ds-3"}`, 403},
		{"ds-lead", "PATCH", "/admin/agents/ds-1", `{"team":"web"}`, 403},
		{"ds-lead", "POST", "/admin/teams", `{"name":"ml"}`, 403},
		{"ds-lead", "DELETE", "/admin/teams/data", "", 403},
		{"rev", "GET", "/admin/agents", "", 403},
		{"agent", "GET", "/admin/agents", "", 403},
		{"nobody", "GET", "/admin/agents", "", 401},
		{"ds-lead", "GET", "/admin/agents/ds-1", "", 200},
		{"ds-lead", "POST", "/admin/agents/file-agent/keys", "", 201},
		{"ds-lead", "PATCH", "/admin/teams/data", `{"rate_limit":"100/minute"}`, 200},
		{"admin", "GET", "/admin/agents/web-1", "", 200},
	} {
		if st, b := h.do(c.who, c.method, c.path, c.body); st != c.want {
			t.Errorf("%s %s %s as %s: %d %s, want %d", c.method, c.path, c.body, c.who, st, b, c.want)
		}
	}
	var list struct{ Agents []AgentView }
	_ = json.Unmarshal([]byte(h.must("ds-lead", "GET", "/admin/agents", "", 200)), &list)
	var names []string
	for _, a := range list.Agents {
		names = append(names, a.Name)
	}
	if strings.Join(names, ",") != "file-agent,ds-1" {
		t.Errorf("the data team's owner lists %v, want their team's agents only", names)
	}
	if st, b := h.do("admin", "DELETE", "/admin/teams/data", ""); st != http.StatusConflict {
		t.Errorf("deleting a team with agents: %d %s, want 409", st, b)
	}
}

// TestAgentValidation: the fields and checks of agents.yaml, with
// did-you-mean; what only the file sets is refused; the body is read
// strictly.
func TestAgentValidation(t *testing.T) {
	h := newHarness(t, "")
	for _, c := range []struct{ body, want string }{
		{`{"name":"a","rate_limt":"1/hour"}`, `did you mean \"rate_limit\"?`},
		{`{"name":"a","response_format":"json_standrd"}`, `did you mean \"json_standard\"?`},
		{`{"name":"a","allowed_targets":["desing"]}`, `did you mean \"design\"?`},
		{`{"name":"a","rate_limit":"lots"}`, "rate"},
		{`{"name":"a","token_sha256":"` + strings.Repeat("a", 64) + `"}`, "keys this API issues"},
		{`{"name":"a","data_schema_file":"/etc/passwd"}`, "agents.yaml only"},
		{`{"name":"a","messages":[{"to":["nobody"],"actions":["x"]}]}`, `unknown agent \"nobody\"`},
		{`{"name":"a","type":"x","type":"y"}`, "duplicate"},
		{`{"name":"<b>x</b>"}`, "not a valid agent name"},
		{`{"name":"gateway"}`, "reserved"},
		{`["name"]`, "JSON object"},
		{`{"name":"a"} {}`, "Invalid JSON"},
		{`{"type":"x"}`, "name is required"},
	} {
		st, b := h.do("admin", "POST", "/admin/agents", c.body)
		if st != http.StatusBadRequest || !strings.Contains(b, c.want) {
			t.Errorf("%s: %d %s, want 400 with %q", c.body, st, b, c.want)
		}
	}
	if st, b := h.do("admin", "POST", "/admin/agents", `{"name":"file-agent"}`); st != http.StatusConflict {
		t.Errorf("a name the file defines: %d %s, want 409", st, b)
	}
	if st, b := h.do("admin", "PATCH", "/admin/agents/file-agent", `{"type":"y"}`); st != http.StatusConflict {
		t.Errorf("changing the file's agent: %d %s, want 409", st, b)
	}
	h.must("admin", "POST", "/admin/agents", `{"name":"a","messages":[{"to":["file-agent"],"actions":["ping"]}],"max_request_size":"50KB"}`, 201)
	b := h.must("admin", "PATCH", "/admin/agents/a", `{"max_request_size":null,"description":"x"}`, 200)
	if strings.Contains(b, "max_request_size") || !strings.Contains(b, `"description":"x"`) {
		t.Errorf("a merge patch: %s", b)
	}
}

// TestCSRF: a change made with a page session's cookie needs the
// session's CSRF token and the page's origin; a read does not.
func TestCSRF(t *testing.T) {
	h := newHarness(t, "")
	body := `{"name":"c-1"}`
	if st, _ := h.do("cookie", "POST", "/admin/agents", body); st != http.StatusForbidden {
		t.Errorf("no token: %d, want 403", st)
	}
	if st, _ := h.do("cookie", "POST", "/admin/agents", body, CSRFHeader, "csrf-1", "Origin", "https://evil.example"); st != http.StatusForbidden {
		t.Errorf("another origin: %d, want 403", st)
	}
	if st, _ := h.do("cookie", "POST", "/admin/agents", body, CSRFHeader, "csrf-2"); st != http.StatusForbidden {
		t.Errorf("a wrong token: %d, want 403", st)
	}
	if st, b := h.do("cookie", "POST", "/admin/agents", body, CSRFHeader, "csrf-1", "Origin", h.srv.URL); st != http.StatusCreated {
		t.Errorf("token and origin: %d %s, want 201", st, b)
	}
	h.must("cookie", "GET", "/admin/agents", "", 200)
}

// TestFileTeamsShownReadOnly: teams.yaml's teams are listed and read
// through the API beside the run-time ones (their limits in the file's
// units, not marked run-time), to their owners only; the file stays their
// source of truth: a change or a run-time team of the same name is 409.
func TestFileTeamsShownReadOnly(t *testing.T) {
	h := newHarness(t, t.TempDir())
	budget, err := confkit.ParseMoney("500USD/month")
	if err != nil {
		t.Fatal(err)
	}
	cfg := *h.api.cfg.Load()
	cfg.Teams = map[string]*team.Team{"data": {Name: "data", Description: "analysts", Budget: budget}}
	h.api.cfg.Store(&cfg)
	h.must("admin", "POST", "/admin/teams", `{"name":"web"}`, 201)

	var list struct {
		Teams []struct {
			Name    string            `json:"name"`
			Runtime bool              `json:"runtime"`
			Spec    map[string]string `json:"spec"`
			Members []string          `json:"members"`
		} `json:"teams"`
	}
	if err := json.Unmarshal([]byte(h.must("admin", "GET", "/admin/teams", "", 200)), &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Teams) != 2 || list.Teams[0].Name != "data" || list.Teams[0].Runtime || list.Teams[0].Spec["budget"] != "500USD/month" ||
		len(list.Teams[0].Members) != 1 || list.Teams[0].Members[0] != "file-agent" || list.Teams[1].Name != "web" || !list.Teams[1].Runtime {
		t.Fatalf("teams: %+v", list.Teams)
	}
	if b := h.must("ds-lead", "GET", "/admin/teams", "", 200); strings.Contains(b, `"web"`) || !strings.Contains(b, `"data"`) {
		t.Errorf("a team owner sees: %s", b)
	}
	if b := h.must("ds-lead", "GET", "/admin/teams/data", "", 200); !strings.Contains(b, `"description":"analysts"`) || strings.Contains(b, "created_at") {
		t.Errorf("GET a file team: %s", b)
	}
	h.must("web", "GET", "/admin/teams/data", "", 404)
	for _, c := range []struct{ method, path, body string }{
		{"PATCH", "/admin/teams/data", `{"description":"x"}`},
		{"DELETE", "/admin/teams/data", ""},
		{"POST", "/admin/teams", `{"name":"data"}`},
	} {
		if st, b := h.do("admin", c.method, c.path, c.body); st != http.StatusConflict || !strings.Contains(b, "teams.yaml") {
			t.Errorf("%s %s: %d %s, want 409 naming teams.yaml", c.method, c.path, st, b)
		}
	}
}
