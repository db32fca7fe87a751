package app

import (
	"github.com/redis/go-redis/v9"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/metrics"
	"github.com/sacpgw/gateway/proxy"
)

// newResponseState is where the Responses API's conversations
// (previous_response_id) are kept: in Redis with the other shared state
// when the state backend is Redis (every replica can continue every
// response; each call bounded by state.timeout), else in this process
// (bounded in entries and bytes; a replica continues only the responses
// it answered, and a restart forgets them). It lives as long as the app:
// the gateways that config reloads build share it, so a reload does not
// forget the conversations (their TTL and size limit are the running
// configuration's).
func newResponseState(cfg *config.Config, client redis.UniversalClient) *proxy.ResponseState {
	if client == nil {
		return proxy.NewResponseState(proxy.NewMemoryResponseStore(proxy.MemoryResponseStoreOptions{}))
	}
	return proxy.NewResponseState(proxy.NewRedisResponseStore(client, "", cfg.Gateway.State.Timeout.D()))
}

// responsesMetrics exports the conversations that could not be kept: the
// client had its answer (its store member says false), and continuing it
// is a 404.
func responsesMetrics(m *metrics.Metrics, s *proxy.ResponseState) {
	m.Counter("gateway_responses_not_kept_too_large_total", "Responses API conversations not kept for being over responses.max_stored_size.",
		func() float64 { return float64(s.TooLarge()) })
	m.Counter("gateway_responses_store_failures_total", "Responses API conversations not kept because the state backend failed.",
		func() float64 { return float64(s.StoreFailures()) })
}
