package app

import (
	"context"
	"strings"
	"time"

	"github.com/sacpgw/gateway/internal/metrics"
	"github.com/sacpgw/gateway/server"
)

// newMetrics is /metrics with what outlives reloads: the policies, spend,
// upstreams, config reloads and the Responses API's state.
func (a *App) newMetrics() *metrics.Metrics {
	m := metrics.New(metrics.Options{})
	m.PolicyStats(a.policies.Stats)
	m.Registry().MustRegister(a.spend)
	m.UpstreamStats(a.upstreamStats.ByUpstream)
	m.Counter("gateway_config_reloads_total", "Config reloads applied (a refused one is gateway_config_reload_failures_total).", func() float64 { return float64(a.reloadsOK.Load()) })
	m.Counter("gateway_config_reload_failures_total", "Config reloads refused: the last good configuration keeps serving.", func() float64 { return float64(a.reloadsFailed.Load()) })
	m.Gauge("gateway_config_restart_pending", "Settings a config reload changed that take effect only after a restart (0: the running configuration is the files').", func() float64 {
		if p := a.pending.Load(); p != nil {
			return float64(len(*p))
		}
		return 0
	})
	responsesMetrics(m, a.state.responses)
	m.Gauge("gateway_upstream_breakers_open", "Upstreams whose circuit breaker is open or half-open now, in this replica.", func() float64 {
		if a.openai == nil {
			return 0
		}
		return float64(a.openai.OpenBreakers())
	})
	return m
}

// baseChecks are the /readyz checks of the config and the policies.
func (a *App) baseChecks() []server.Check {
	engine := a.policies
	return []server.Check{
		{Name: "config", Ready: func(context.Context) error { return nil }, Detail: func() string {
			if p := a.pending.Load(); p != nil && len(*p) > 0 {
				return "reloaded, but these settings take effect only after a restart: " + strings.Join(*p, ", ")
			}
			return ""
		}},
		{Name: "policies", Ready: func(context.Context) error { return engine.Ready() }, Detail: func() string {
			if p := engine.ReloadProblem(); p != "" {
				// A refused bundle reads "policy bundle refused: ..." here.
				return "the last reload was rejected and the last good policies serve: " + p
			}
			return ""
		}},
	}
}

// stateMetrics adds the audit trail's and the shared state's checks and
// metrics, after the doors'.
func (a *App) stateMetrics() {
	m, auditLog := a.metrics, a.audit
	if auditLog != nil && a.running.Gateway.Audit.FailMode == "closed" {
		// Closed mode cannot answer without the trail: out of the Service.
		a.checks = append(a.checks, server.Check{Name: "audit", Ready: func(context.Context) error { return auditLog.Ready() }})
	}
	if fb := a.state.fallback; fb != nil {
		m.Counter("gateway_state_redis_fallbacks_total", "Limit decisions served by the local limiter because Redis failed.", func() float64 { return float64(fb.Fallbacks()) })
		m.Counter("gateway_state_redis_errors_total", "Redis errors of the shared limits.", func() float64 { return float64(fb.Errors()) })
		a.checks = append(a.checks, server.Check{Name: "state", Ready: func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			return fb.Ready(ctx)
		}})
	}
	if auditLog != nil {
		m.AuditStats(auditLog.Stats)
	}
	if g := a.sources; g != nil {
		m.Gauge("gateway_unauthenticated_sources", "Source addresses tracked for failed authentications (summarized and limited per address).", func() float64 { return float64(g.Sources()) })
	}
}
