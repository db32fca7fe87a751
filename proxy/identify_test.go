package proxy

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sacpgw/gateway/config"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/scope"
)

// TestIdentifyActing: an in-process caller (a workflow step) is the agent
// its context names, and nothing a request carries can make it so.
func TestIdentifyActing(t *testing.T) {
	agents := map[string]*config.Agent{
		"researcher": {ID: "researcher", TokenHash: config.HashToken("tok-researcher")},
		"starter":    {ID: "starter", TokenHash: config.HashToken("tok-starter")},
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
