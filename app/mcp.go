package app

import (
	"context"

	"github.com/sacpgw/gateway/approval"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/mcp"
	"github.com/sacpgw/gateway/server"
)

// mcpDoor is the MCP front door (docs/mcp.md) on the app's policies,
// limiter and audit trail: /mcp/{server} behind the identify stage (each
// message an agent sends spends its rate_limit in the door, a tools/call
// the tool's limit too), its metrics, its /readyz detail, and its Resolver
// on the approval service. Its grants and sessions are where the app's
// state is: Redis when state.backend is redis, else this process.
func (a *App) mcpDoor(cfg *config.Config) (door.Door, error) {
	deps := mcp.Deps{Config: cfg, Policy: a.policies, Limiter: a.state.limiter, Log: a.log, Audit: a.rec,
		OAuthClient: a.egress.Client(0)}
	if a.approval != nil {
		deps.Opener = a.approval
		deps.People = a.approval
	}
	if st := a.state; st.redis != nil {
		// With the state in Redis, an approval heard by any replica and a
		// session initialized through any go on through every replica;
		// each call bounded by state.timeout, and an unreachable Redis
		// refuses the call (never lets it through).
		timeout := cfg.Gateway.State.Timeout.D()
		deps.Grants = mcp.NewRedisGrants(st.redis, "", timeout)
		deps.Sessions = mcp.NewRedisSessions(st.redis, mcp.RedisSessionsOptions{Timeout: timeout})
		deps.Tokens = mcp.NewRedisTokens(st.redis, "", timeout)
	}
	d, err := mcp.New(deps)
	if err != nil {
		return nil, err
	}
	a.mcp = d
	if a.approval != nil {
		a.approval.Handle(approval.TypeMCP, d.Resolve)
		a.approval.Handle(approval.TypeMCPTool, d.ResolveDefinition)
	}
	a.metrics.Registry().MustRegister(d.Collector())
	a.checks = append(a.checks, server.Check{Name: "mcp", Ready: func(context.Context) error { return nil }, Detail: d.Health})
	return d, nil
}
