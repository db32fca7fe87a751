package app

import (
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/mcpauth"
	"github.com/sacpgw/gateway/oauthserver"
)

// oauthStore is where the authorization server for people's MCP clients
// keeps its clients, codes and tokens: Redis when state.backend is redis
// (a token issued through one replica is honoured, and revoked, on all),
// else this process.
func oauthStore(st *state, cfg *config.Config) mcpauth.Store {
	if st.redis != nil {
		return mcpauth.NewRedisStore(st.redis, cfg.Gateway.State.Timeout.D())
	}
	return mcpauth.NewMemoryStore()
}

// oauthDoor is the authorization server for people's MCP clients
// (docs/mcp.md): people sign in through the approval service's session,
// the policy decides which agents they may act as. Its routes answer 404
// without mcp_clients.
func (a *App) oauthDoor(cfg *config.Config) (door.Door, error) {
	if a.approval == nil {
		return nil, nil
	}
	return oauthserver.New(oauthserver.Deps{Config: cfg, Store: a.oauth, People: a.approval, Policy: a.policies,
		Limiter: a.state.limiter, Audit: a.rec, Log: a.log})
}
