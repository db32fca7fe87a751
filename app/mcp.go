package app

import (
	"context"
	"net/http"

	"github.com/sacpgw/gateway/approval"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/metrics"
	"github.com/sacpgw/gateway/mcp"
	"github.com/sacpgw/gateway/server"
)

var _ Reconfigurer = (*mcp.Door)(nil)

// wireMCP builds the MCP front door (docs/mcp.md) on the app's policies,
// limiter and audit trail, and adds what it serves: /mcp/{server} behind
// the identify stage (not metered: each message an agent sends spends its
// rate_limit in the door, a tools/call the tool's limit too), its metrics, its /readyz detail, and its Resolver
// on the approval service. Its grants and sessions are where the app's
// state is: Redis when state.backend is redis, else this process. Call
// it once the approval service, messaging and the checks exist.
func (a *App) wireMCP(cfg *config.Config, m *metrics.Metrics, routes *[]server.Route, checks *[]server.Check) error {
	deps := mcp.Deps{Config: cfg, Policy: a.policies, Limiter: a.state.limiter, Log: a.log}
	if a.audit != nil {
		deps.Audit = &httpx.Recorder{Log: a.trail(), FailClosed: cfg.Gateway.Audit.FailMode == "closed", Logger: a.log}
	}
	if a.approval != nil {
		deps.Opener = a.approval
	}
	if st := a.state; st.redis != nil {
		// With the state in Redis, an approval heard by any replica and a
		// session initialized through any go on through every replica;
		// each call bounded by state.timeout, and an unreachable Redis
		// refuses the call (never lets it through).
		timeout := cfg.Gateway.State.Timeout.D()
		deps.Grants = mcp.NewRedisGrants(st.redis, "", timeout)
		deps.Sessions = mcp.NewRedisSessions(st.redis, mcp.RedisSessionsOptions{Timeout: timeout})
	}
	door, err := mcp.New(deps)
	if err != nil {
		return err
	}
	a.mcpDoor = door
	if a.approval != nil {
		a.approval.Handle(approval.TypeMCP, door.Resolve)
	}
	m.Registry().MustRegister(door.Collector())
	for _, method := range []string{http.MethodPost, http.MethodGet, http.MethodDelete} {
		*routes = append(*routes, server.Route{Method: method, Path: "/mcp/:server", Handler: door})
	}
	*checks = append(*checks, server.Check{Name: "mcp", Ready: func(context.Context) error { return nil }, Detail: door.Health})
	return nil
}
