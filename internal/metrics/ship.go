package metrics

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sacpgw/gateway/audit/ship"
)

// ShipStats exports audit.ship's numbers, read from f at each scrape:
// gateway_audit_ship_backlog_files and _backlog_bytes (closed files and
// checkpoints not in the bucket yet), _last_success_timestamp_seconds (0
// before the first complete pass), _uploads_total and _errors_total.
func (m *Metrics) ShipStats(f func() ship.Stats) {
	m.reg.MustRegister(&statsCollector[ship.Stats]{
		read: f,
		descs: []*prometheus.Desc{
			desc("gateway_audit_ship_backlog_files", "Closed audit files and checkpoint pieces not shipped to object storage yet."),
			desc("gateway_audit_ship_backlog_bytes", "Bytes of the audit files not shipped to object storage yet."),
			desc("gateway_audit_ship_last_success_timestamp_seconds", "When a shipping pass last shipped everything it found (Unix time; 0: not yet)."),
			desc("gateway_audit_ship_uploads_total", "Objects uploaded to object storage."),
			desc("gateway_audit_ship_errors_total", "Shipping passes that stopped on an error (retried at the next pass)."),
		},
		emit: func(ch chan<- prometheus.Metric, d []*prometheus.Desc, s ship.Stats) {
			var last float64
			if !s.LastSuccess.IsZero() {
				last = float64(s.LastSuccess.UnixNano()) / 1e9
			}
			ch <- prometheus.MustNewConstMetric(d[0], prometheus.GaugeValue, float64(s.BacklogFiles))
			ch <- prometheus.MustNewConstMetric(d[1], prometheus.GaugeValue, float64(s.BacklogBytes))
			ch <- prometheus.MustNewConstMetric(d[2], prometheus.GaugeValue, last)
			ch <- prometheus.MustNewConstMetric(d[3], prometheus.CounterValue, float64(s.Uploads))
			ch <- prometheus.MustNewConstMetric(d[4], prometheus.CounterValue, float64(s.Errors))
		},
	})
}
