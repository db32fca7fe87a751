package door

import (
	"errors"
	"github.com/sacpgw/gateway/internal/roster"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/internal/testkit"
	"github.com/sacpgw/gateway/limit"
)

// frameConfig has one agent, allowed one request a minute.
func frameConfig(token string) *config.Config {
	return &config.Config{Agents: map[string]*roster.Agent{
		"copilot-2": {ID: "copilot-2", TokenSHA256: "set", TokenHash: roster.HashToken(token),
			RateLimit: config.Rate{N: 1, Period: time.Minute}},
	}}
}

// TestFrameAccess: the shell gives every route exactly what its access
// kind says. Agent and Metered routes run only for an identified agent
// (a refusal is a 401 and an auth.failure entry); a Metered route spends
// the agent's rate_limit (the second call a 429 and a ratelimit.reject
// entry), an Agent route does not; People and Public routes, and the
// Chained routes that frame themselves, reach their handler with no
// identity asked.
func TestFrameAccess(t *testing.T) {
	trail := &testkit.Trail{}
	rec := &Recorder{Log: trail, FailClosed: true, Logger: slog.New(slog.DiscardHandler)}
	f, err := NewFrame(frameConfig("tok-1"), GateDeps{Requests: limit.NewMemory(), Audit: rec, Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var reached []string
	handler := func(name string) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			who := ""
			if a := scope.Get(r.Context()).Agent; a != nil {
				who = a.ID
			}
			reached = append(reached, name+":"+who)
		})
	}
	call := func(access Access, name, token string) int {
		t.Helper()
		r := httptest.NewRequest(http.MethodGet, "/"+name, nil)
		if token != "" {
			r.Header.Set("Authorization", "Bearer "+token)
		}
		r = scope.Attach(r, &scope.Exchange{RequestID: "req-" + name})
		w := httptest.NewRecorder()
		f.Handler(Route{Method: http.MethodGet, Path: "/" + name, Handler: handler(name), Access: access}).ServeHTTP(w, r)
		return w.Code
	}
	for _, c := range []struct {
		access      Access
		name, token string
		status      int
	}{
		{Agent, "agent-anonymous", "", http.StatusUnauthorized},
		{Agent, "agent-wrong", "tok-2", http.StatusUnauthorized},
		{Agent, "agent", "tok-1", http.StatusOK},
		{Agent, "agent-again", "tok-1", http.StatusOK},
		{Metered, "metered-anonymous", "", http.StatusUnauthorized},
		{Metered, "metered", "tok-1", http.StatusOK},
		{Metered, "metered-again", "tok-1", http.StatusTooManyRequests},
		{People, "people", "", http.StatusOK},
		{Public, "public", "", http.StatusOK},
		{Chained, "chained", "", http.StatusOK},
	} {
		if got := call(c.access, c.name, c.token); got != c.status {
			t.Errorf("%s: status %d, want %d", c.name, got, c.status)
		}
	}
	want := []string{"agent:copilot-2", "agent-again:copilot-2", "metered:copilot-2", "people:", "public:", "chained:"}
	if !slices.Equal(reached, want) {
		t.Errorf("handlers reached %v, want %v", reached, want)
	}
	kinds := trail.Kinds()
	if want := []string{audit.KindAuthFailure, audit.KindAuthFailure, audit.KindAuthFailure, audit.KindRateLimitReject}; !slices.Equal(kinds, want) {
		t.Errorf("audit entries %v, want %v", kinds, want)
	}
}

// TestFramePrepare: a reload's new agents are identified only once the
// frame's apply runs, and a bad configuration (a sidecar agent it lacks)
// is refused at Prepare, leaving the current one serving.
func TestFramePrepare(t *testing.T) {
	deps := GateDeps{Requests: limit.NewMemory(), Log: slog.New(slog.DiscardHandler)}
	f, err := NewFrame(frameConfig("tok-old"), deps)
	if err != nil {
		t.Fatal(err)
	}
	status := func(token string) int {
		r := httptest.NewRequest(http.MethodGet, "/x", nil)
		r.Header.Set("Authorization", "Bearer "+token)
		r = scope.Attach(r, &scope.Exchange{})
		w := httptest.NewRecorder()
		f.Handler(Route{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), Access: Agent}).ServeHTTP(w, r)
		return w.Code
	}
	apply, err := f.Prepare(frameConfig("tok-new"))
	if err != nil {
		t.Fatal(err)
	}
	if status("tok-old") != http.StatusOK || status("tok-new") != http.StatusUnauthorized {
		t.Fatal("prepared configuration served before apply")
	}
	apply()
	if status("tok-old") != http.StatusUnauthorized || status("tok-new") != http.StatusOK {
		t.Fatal("applied configuration not served")
	}
	side, err := NewFrame(frameConfig("tok-new"), GateDeps{Sidecar: "copilot-2", Requests: deps.Requests, Log: deps.Log})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := side.Prepare(&config.Config{Agents: map[string]*roster.Agent{}}); err == nil {
		t.Fatal("a configuration without the sidecar's agent was prepared")
	}
}

// TestRoutePattern: a door's echo-style path as a net/http pattern.
func TestRoutePattern(t *testing.T) {
	for path, want := range map[string]string{
		"/review/:id":               "GET /review/{id}",
		"/review/":                  "GET /review/{$}",
		"/workflows/:name/runs/:id": "GET /workflows/{name}/runs/{id}",
	} {
		if got := (Route{Method: http.MethodGet, Path: path}).Pattern(); got != want {
			t.Errorf("%s: %s, want %s", path, got, want)
		}
	}
}

// stubDoor counts its applies; Prepare fails when err is set.
type stubDoor struct {
	err     error
	applied int
}

func (s *stubDoor) Routes() []Route { return nil }
func (s *stubDoor) Prepare(*config.Config) (func(), error) {
	if s.err != nil {
		return nil, s.err
	}
	return func() { s.applied++ }, nil
}

// TestConfigure: a door being built serves its first configuration once
// Configure returns, and a configuration Prepare refuses is never applied.
func TestConfigure(t *testing.T) {
	ok := &stubDoor{}
	if err := Configure(ok, &config.Config{}); err != nil || ok.applied != 1 {
		t.Fatalf("Configure: err %v, applied %d; want nil and 1", err, ok.applied)
	}
	refused := &stubDoor{err: errors.New("bad servers")}
	if err := Configure(refused, &config.Config{}); !errors.Is(err, refused.err) || refused.applied != 0 {
		t.Fatalf("Configure of a refused config: err %v, applied %d; want the Prepare error and 0", err, refused.applied)
	}
}
