package door

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/internal/testkit"
)

// TestIdentifyActing: an in-process caller (a workflow step) is the agent
// its context names, and nothing a request carries can make it so.
func TestIdentifyActing(t *testing.T) {
	agents := map[string]*roster.Agent{
		"researcher": {ID: "researcher", TokenHash: roster.HashToken("tok-researcher")},
		"starter":    {ID: "starter", TokenHash: roster.HashToken("tok-starter")},
	}
	for _, a := range agents {
		a.TokenSHA256 = "set"
	}
	cases := []struct {
		name    string
		sidecar string
		acting  string // the context's agent; "" for none
		token   string
		want    string // the agent identified; "" for a 401
	}{
		{name: "a step acts as its node's agent", acting: "researcher", want: "researcher"},
		{name: "the context wins over a token sent along", acting: "researcher", token: "tok-starter", want: "researcher"},
		{name: "an unknown agent is refused", acting: "nobody"},
		{name: "a sidecar serves its own agent's steps", sidecar: "researcher", acting: "researcher", want: "researcher"},
		{name: "and no other's", sidecar: "starter", acting: "researcher"},
		{name: "without the context, a token", token: "tok-starter", want: "starter"},
		{name: "without either, nothing", want: ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id, err := NewIdentifier(agents, c.sidecar)
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if c.acting != "" {
				ctx = scope.WithActing(ctx, scope.Acting{AgentID: c.acting, RunID: "run-1", Node: "n"})
			}
			r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", nil)
			r.Header.Set("Content-Type", "application/json")
			if c.token != "" {
				r.Header.Set("Authorization", "Bearer "+c.token)
			}
			a, err := id.Identify(r)
			if c.want == "" {
				if c.sidecar == "" && c.acting == "" && c.token == "" {
					return // no credential: covered elsewhere
				}
				if e := apierror.From(err); err == nil || e.Status != http.StatusUnauthorized {
					t.Fatalf("identified %v, err %v: want a 401", a, err)
				}
				return
			}
			if err != nil || a.ID != c.want {
				t.Fatalf("identified %v, err %v: want %s", a, err, c.want)
			}
		})
	}
}

// spawnedByToken is the registry of agents spawned at run time, as the
// identifier sees it (registry.Registry in the gateway).
type spawnedByToken map[[sha256.Size]byte]*roster.Agent

func (s spawnedByToken) AgentByToken(_ context.Context, sum [sha256.Size]byte) (*roster.Agent, bool, error) {
	a, ok := s[sum]
	return a, ok, nil
}

func (s spawnedByToken) Touch(context.Context, string) error { return nil }

// TestIdentifySidecarPlaceholderKeys: at a sidecar every request is the
// sidecar's agent, whatever placeholder key its SDK sends and in whichever
// header (OpenAI's bearer, Anthropic's x-api-key, Azure's api-key); only
// the token of another known agent (configured or spawned) is refused,
// with a 401 and an auth.failure entry. The agent's own token still works.
func TestIdentifySidecarPlaceholderKeys(t *testing.T) {
	agents := map[string]*roster.Agent{
		"copilot-2": {ID: "copilot-2", TokenSHA256: "set", TokenHash: roster.HashToken("tok-copilot")},
		"claude-3":  {ID: "claude-3", TokenSHA256: "set", TokenHash: roster.HashToken("tok-claude")},
	}
	spawned := spawnedByToken{roster.HashToken("tok-spawned"): {ID: "helper-1"}}
	const placeholder = "unused-the-sidecar-identifies-the-agent"
	cases := []struct {
		name, header, value string
		origin              string
		want                string // the agent identified; "" for a 401
		method              string // the auth check's method
	}{
		{name: "OpenAI SDK placeholder", header: "Authorization", value: "Bearer " + placeholder, want: "copilot-2", method: "sidecar"},
		{name: "Anthropic SDK placeholder", header: "X-Api-Key", value: placeholder, want: "copilot-2", method: "sidecar"},
		{name: "Azure SDK placeholder", header: "Api-Key", value: placeholder, want: "copilot-2", method: "sidecar"},
		{name: "a placeholder shaped like a key", header: "Authorization", value: "Bearer sk-proj-0123456789", want: "copilot-2", method: "sidecar"},
		{name: "no key at all", want: "copilot-2", method: "sidecar"},
		{name: "the agent's own token", header: "Authorization", value: "Bearer tok-copilot", want: "copilot-2", method: "token"},
		{name: "its own token as x-api-key", header: "X-Api-Key", value: "tok-copilot", want: "copilot-2", method: "token"},
		{name: "another agent's token", header: "Authorization", value: "Bearer tok-claude"},
		{name: "another agent's token as x-api-key", header: "X-Api-Key", value: "tok-claude"},
		{name: "another agent's token as api-key", header: "Api-Key", value: "tok-claude"},
		{name: "a spawned agent's token", header: "Authorization", value: "Bearer tok-spawned"},
		{name: "a placeholder from a web page", header: "Authorization", value: "Bearer " + placeholder, origin: "https://evil.example"},
		{name: "a malformed Authorization header", header: "Authorization", value: "Basic " + placeholder},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			id, err := NewIdentifier(agents, "copilot-2")
			if err != nil {
				t.Fatal(err)
			}
			trail := &testkit.Trail{}
			id.Audit = &Recorder{Log: trail, FailClosed: true, Logger: slog.New(slog.DiscardHandler)}
			id.Spawned = spawned
			r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{}`))
			r.Header.Set("Content-Type", "application/json")
			if c.header != "" {
				r.Header.Set(c.header, c.value)
			}
			if c.origin != "" {
				r.Header.Set("Origin", c.origin)
			}
			ex := &scope.Exchange{RequestID: "req-1"}
			served := false
			err = id.Serve(httptest.NewRecorder(), scope.Attach(r, ex), http.HandlerFunc(func(http.ResponseWriter, *http.Request) { served = true }))
			if c.want == "" {
				if e := apierror.From(err); err == nil || e.Status != http.StatusUnauthorized || served {
					t.Fatalf("served %v as %v, err %v: want a 401", served, ex.Agent, err)
				}
				if got := trail.Kinds(); !slices.Equal(got, []string{audit.KindAuthFailure}) {
					t.Fatalf("audit kinds %v, want one %s", got, audit.KindAuthFailure)
				}
				for _, rec := range trail.Records() {
					if b, _ := json.Marshal(rec); strings.Contains(string(b), "tok-") || strings.Contains(string(b), placeholder) {
						t.Errorf("the audit entry holds the presented key: %s", b)
					}
				}
				return
			}
			if err != nil || !served || ex.Agent == nil || ex.Agent.ID != c.want {
				t.Fatalf("served %v as %v, err %v: want %s", served, ex.Agent, err, c.want)
			}
			if v, _ := ex.Verdict(scope.CheckAuth); v.Method != c.method {
				t.Errorf("auth method %q, want %q", v.Method, c.method)
			}
			if got := trail.Kinds(); len(got) != 0 {
				t.Errorf("audit kinds %v, want none", got)
			}
		})
	}
}

// TestIdentifyCentralRefusesUnknownKeys: outside sidecar mode a key no agent
// holds is refused, as before: the placeholder rule is the sidecar's only.
func TestIdentifyCentralRefusesUnknownKeys(t *testing.T) {
	agents := map[string]*roster.Agent{"copilot-2": {ID: "copilot-2", TokenSHA256: "set", TokenHash: roster.HashToken("tok-copilot")}}
	id, err := NewIdentifier(agents, "")
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"Authorization", "X-Api-Key", "Api-Key"} {
		r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(`{}`))
		r.Header.Set("Content-Type", "application/json")
		v := "unused-the-sidecar-identifies-the-agent"
		if h == "Authorization" {
			v = "Bearer " + v
		}
		r.Header.Set(h, v)
		if a, err := id.Identify(r); apierror.From(err).Status != http.StatusUnauthorized {
			t.Errorf("%s: identified %v, err %v: want a 401", h, a, err)
		}
	}
}

// unreadableSpawned is a registry of spawned agents whose store is down.
type unreadableSpawned struct{}

func (unreadableSpawned) AgentByToken(context.Context, [sha256.Size]byte) (*roster.Agent, bool, error) {
	return nil, false, errors.New("redis: connection refused")
}

func (unreadableSpawned) Touch(context.Context, string) error { return nil }

// TestIdentifySidecarSpawnedUnreadable: when the spawned agents cannot be
// read, a key that matches no configured agent may be a spawned agent's:
// the sidecar answers 503 rather than guess it is a placeholder. The
// agent's own token needs no lookup and is served.
func TestIdentifySidecarSpawnedUnreadable(t *testing.T) {
	agents := map[string]*roster.Agent{"copilot-2": {ID: "copilot-2", TokenSHA256: "set", TokenHash: roster.HashToken("tok-copilot")}}
	id, err := NewIdentifier(agents, "copilot-2")
	if err != nil {
		t.Fatal(err)
	}
	id.Spawned = unreadableSpawned{}
	for key, want := range map[string]int{"unused-placeholder": http.StatusServiceUnavailable, "tok-copilot": http.StatusOK} {
		r := httptest.NewRequest(http.MethodGet, "/v1/models", nil)
		r.Header.Set("Authorization", "Bearer "+key)
		a, err := id.Identify(r)
		got := http.StatusOK
		if err != nil {
			got = apierror.From(err).Status
		}
		if got != want || (want == http.StatusOK && a.ID != "copilot-2") {
			t.Errorf("%s: identified %v, err %v: want %d", key, a, err, want)
		}
	}
}

// FuzzIdentifySidecar: whatever credential headers a request carries, a
// sidecar identifies it as its own agent or refuses it; it never serves it
// as another agent, and never refuses the agent's own token sent alone.
func FuzzIdentifySidecar(f *testing.F) {
	agents := map[string]*roster.Agent{
		"copilot-2": {ID: "copilot-2", TokenSHA256: "set", TokenHash: roster.HashToken("tok-copilot")},
		"claude-3":  {ID: "claude-3", TokenSHA256: "set", TokenHash: roster.HashToken("tok-claude")},
	}
	id, err := NewIdentifier(agents, "copilot-2")
	if err != nil {
		f.Fatal(err)
	}
	f.Add("Bearer unused-the-sidecar-identifies-the-agent", "", "")
	f.Add("Bearer tok-claude", "", "")
	f.Add("", "tok-claude", "placeholder")
	f.Add("bearer  tok-copilot ", "tok-copilot", "")
	f.Add("Basic x", "", "")
	f.Add("", "", "tok-copilot")
	f.Fuzz(func(t *testing.T, authorization, xAPIKey, apiKey string) {
		r := httptest.NewRequest(http.MethodGet, "/v1/models", nil)
		for name, v := range map[string]string{"Authorization": authorization, "X-Api-Key": xAPIKey, "Api-Key": apiKey} {
			if v != "" {
				r.Header[name] = []string{v}
			}
		}
		a, err := id.Identify(r)
		switch {
		case err != nil && a != nil:
			t.Fatalf("both an agent %v and an error %v", a, err)
		case err != nil:
			if s := apierror.From(err).Status; s != http.StatusUnauthorized {
				t.Fatalf("refused with %d: %v", s, err)
			}
			if tok, present, cerr := credential(r); cerr == nil && present && tok == "tok-copilot" {
				t.Fatalf("the agent's own token refused: %v", err)
			}
		case a.ID != "copilot-2":
			t.Fatalf("served as %s", a.ID)
		}
		for _, v := range []string{authorization, xAPIKey, apiKey} {
			if err == nil && strings.Contains(v, "tok-claude") && strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), "Bearer")) == "tok-claude" {
				t.Fatalf("another agent's token %q served", v)
			}
		}
	})
}
