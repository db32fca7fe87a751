package app

import (
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/messaging"
)

// relayContexts keeps the relay threads' Global Contexts beside their
// history: in Redis, shared by the replicas, with the Redis backend; in
// memory (messaging's default) otherwise.
func (a *App) relayContexts(cfg *config.Config) messaging.ContextStore {
	if a.state.redis == nil {
		return nil
	}
	return messaging.NewRedisContexts(a.state.redis, "", cfg.Gateway.Messaging.HistoryRetention.D())
}
