package app

import (
	"fmt"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/audit/siem"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/egress"
	"github.com/sacpgw/gateway/internal/metrics"
)

// wireSIEM builds the stream of the trail to a SIEM's collector
// (audit.otlp) and its metrics; without a trail (config check) or the
// setting, there is none. Run runs it.
func (a *App) wireSIEM(cfg *config.Config, auditLog *audit.Log, policy egress.Policy, m *metrics.Metrics, version string) error {
	o := cfg.Gateway.Audit.OTLP
	if o == nil || auditLog == nil {
		return nil
	}
	exp, err := siem.New(*o, siem.Source{Dir: cfg.Gateway.Audit.Dir, Chain: auditLog.Chain(), Durable: auditLog.Durable},
		siem.Options{Egress: policy, Log: a.log, Service: cfg.Gateway.Tracing.ServiceName, Version: version})
	if err != nil {
		return &UsageError{fmt.Sprintf("%s: %v", config.GatewayFile, err)}
	}
	a.siem = exp
	stat := func(f func(siem.Stats) float64) func() float64 { return func() float64 { return f(exp.Stats()) } }
	m.Counter("gateway_audit_otlp_exported_total", "Audit entries the OTLP collector acknowledged.", stat(func(s siem.Stats) float64 { return float64(s.Exported) }))
	m.Counter("gateway_audit_otlp_errors_total", "OTLP exports of audit entries that failed (each is retried).", stat(func(s siem.Stats) float64 { return float64(s.Errors) }))
	m.Counter("gateway_audit_otlp_rejected_total", "Audit entries the OTLP collector acknowledged but refused (partial success): in the trail, not in the SIEM.", stat(func(s siem.Stats) float64 { return float64(s.Rejected) }))
	m.Gauge("gateway_audit_otlp_lag_entries", "Committed audit entries the OTLP collector has not acknowledged yet.", stat(func(s siem.Stats) float64 { return float64(s.Lag) }))
	m.Gauge("gateway_audit_otlp_last_success_timestamp_seconds", "When the OTLP collector last acknowledged audit entries (0: not since the start).", stat(func(s siem.Stats) float64 {
		if s.LastSuccess.IsZero() {
			return 0
		}
		return float64(s.LastSuccess.UnixNano()) / 1e9
	}))
	return nil
}
