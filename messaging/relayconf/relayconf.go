// Package relayconf is gateway.yaml's messaging section: how the relay
// delivers agent-to-agent messages (deadlines, retries, workers, queue,
// history), the TLS it speaks to agents' endpoints, and the networks every
// outbound call may reach although they are private. It owns the section's
// defaults and checks, below the loader, which only composes it.
package relayconf

import (
	"net/netip"
	"strconv"
	"time"

	"github.com/sacpgw/gateway/internal/confkit"
)

// Settings configures agent-to-agent traffic (POST /relay/messages).
type Settings struct {
	// Timeout bounds a REQUEST's round trip when its metadata.timeout_ms is
	// absent, and each delivery attempt of a queued message. Default 10s.
	Timeout confkit.Duration `yaml:"timeout"`
	// MaxTimeout caps metadata.timeout_ms. Default 60s.
	MaxTimeout confkit.Duration `yaml:"max_timeout"`
	// RetryBackoff is the wait before the second delivery attempt of a
	// queued message; it doubles after each failure. Attempts in all are
	// protocol limits.max_retry_attempts. Default 200ms.
	RetryBackoff confkit.Duration `yaml:"retry_backoff"`
	// Workers deliver queued messages. Default 4.
	Workers int `yaml:"workers"`
	// QueueCapacity bounds queued deliveries; over it a message is refused
	// (503) rather than dropped later. Default 10000.
	QueueCapacity int `yaml:"queue_capacity"`
	// HistoryRetention keeps a workflow's history this long after its last
	// message. Default 168h.
	HistoryRetention confkit.Duration `yaml:"history_retention"`
	// MaxClockSkew refuses envelopes whose timestamp is further than this
	// from the gateway's clock. Default 5m.
	MaxClockSkew confkit.Duration `yaml:"max_clock_skew"`
	// TLS is how the gateway connects to https endpoints.
	TLS TLS `yaml:"tls"`
	// AllowedNetworks are CIDRs that outbound calls (agent endpoints,
	// webhooks, spawned agents) may reach although they are loopback,
	// link-local or private. Empty: only public addresses.
	AllowedNetworks []string `yaml:"allowed_networks"`
	// AllowedPrefixes is AllowedNetworks parsed; set by Check.
	AllowedPrefixes []netip.Prefix `yaml:"-"`
}

// TLS authenticates the gateway to the agents' endpoints and them
// to it (the agent communication patterns have agents authenticate via mTLS;
// docs/agent-messaging.md, Configuration).
type TLS struct {
	// CAFile verifies the endpoints' certificates. Empty: system roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are the client certificate the gateway
	// presents (re-read on each new connection, so rotation needs no
	// restart). Empty: none.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// Check fills in the defaults, resolves the TLS files' paths and checks
// them, and parses allowed_networks into AllowedPrefixes.
func (m *Settings) Check(r confkit.Reporter) {
	for _, p := range []*string{&m.TLS.CAFile, &m.TLS.CertFile, &m.TLS.KeyFile} {
		r.Resolve(p)
	}
	confkit.Durations(r, "messaging", []confkit.DurationSetting{
		{Key: "timeout", V: &m.Timeout, Default: 10 * time.Second},
		{Key: "max_timeout", V: &m.MaxTimeout, Default: time.Minute},
		{Key: "retry_backoff", V: &m.RetryBackoff, Default: 200 * time.Millisecond},
		{Key: "history_retention", V: &m.HistoryRetention, Default: 7 * 24 * time.Hour},
		{Key: "max_clock_skew", V: &m.MaxClockSkew, Default: 5 * time.Minute},
	})
	if m.Timeout > m.MaxTimeout {
		r.Add(r.Line("timeout"), "messaging.timeout %s exceeds messaging.max_timeout %s", m.Timeout.D(), m.MaxTimeout.D())
	}
	if (m.TLS.CertFile == "") != (m.TLS.KeyFile == "") {
		r.Add(r.Line("tls"), "messaging.tls: cert_file and key_file go together")
	}
	confkit.FileExists(r, r.Line("tls", "ca_file"), "messaging.tls.ca_file", m.TLS.CAFile)
	confkit.FileExists(r, r.Line("tls", "cert_file"), "messaging.tls.cert_file", m.TLS.CertFile)
	confkit.FileExists(r, r.Line("tls", "key_file"), "messaging.tls.key_file", m.TLS.KeyFile)
	if m.Workers == 0 {
		m.Workers = 4
	}
	if m.QueueCapacity == 0 {
		m.QueueCapacity = 10000
	}
	if m.Workers < 0 || m.Workers > 256 {
		r.Add(r.Line("workers"), "messaging.workers %d: want 1..256", m.Workers)
	}
	if m.QueueCapacity < 0 {
		r.Add(r.Line("queue_capacity"), "messaging.queue_capacity: must be positive")
	}
	m.AllowedPrefixes = nil
	for i, c := range m.AllowedNetworks {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			r.Add(r.Line("allowed_networks", strconv.Itoa(i)), "messaging.allowed_networks: %q is not a CIDR such as 10.0.0.0/8", c)
			continue
		}
		m.AllowedPrefixes = append(m.AllowedPrefixes, p.Masked())
	}
}
