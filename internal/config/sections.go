package config

import (
	"net/netip"
	"path"
	"strconv"
	"strings"
	"time"

	"github.com/sacpgw/gateway/internal/confkit"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/mcp/mcpconf"
	"gopkg.in/yaml.v3"
)

// The sections of gateway.yaml that no part owns yet (the front doors' and
// the server's): their defaults and checks, written as the parts' are, so
// each moves with its type when its door prepares itself from its own
// section.

func (rs *Responses) check(r confkit.Reporter) {
	if rs.StoreTTL == 0 {
		rs.StoreTTL = Duration(24 * time.Hour)
	}
	if rs.MaxStoredSize == 0 {
		rs.MaxStoredSize = 1 << 20
	}
	if rs.StoreTTL < 0 || rs.MaxStoredSize < 0 {
		r.Add(r.Line(), "responses: store_ttl and max_stored_size must be positive")
	}
}

func (lg *Log) check(r confkit.Reporter) {
	if lg.Level == "" {
		lg.Level = "info"
	}
	logLevels := []string{"debug", "info", "warn", "error"}
	if !confkit.OneOf(lg.Level, logLevels...) {
		r.Add(r.Line("level"), "log.level %q: want debug, info, warn or error%s", lg.Level, confkit.DidYouMean(lg.Level, logLevels))
	}
	if lg.Format == "" {
		lg.Format = "json"
	}
	if !confkit.OneOf(lg.Format, "json", "text") {
		r.Add(r.Line("format"), "log.format %q: want json or text%s", lg.Format, confkit.DidYouMean(lg.Format, []string{"json", "text"}))
	}
}

func (a Admin) check(r confkit.Reporter) {
	if a.TokenSHA256 != "" {
		if _, err := roster.ParseHash(a.TokenSHA256); err != nil {
			r.Add(r.Line("token_sha256"), "admin.token_sha256: %v", err)
		}
	}
	names := map[string]bool{}
	for i, rv := range a.Reviewers {
		idx := strconv.Itoa(i)
		if rv.Name == "" {
			r.Add(r.Line("reviewers", idx), "admin.reviewers[%d]: name is required", i)
		} else if names[rv.Name] {
			r.Add(r.Line("reviewers", idx, "name"), "admin.reviewers: duplicate reviewer %q", rv.Name)
		}
		names[rv.Name] = true
		if _, err := roster.ParseHash(rv.TokenSHA256); err != nil {
			r.Add(r.Line("reviewers", idx, "token_sha256"), "admin.reviewers[%d].token_sha256: %v", i, err)
		}
	}
}

func (t *TLS) check(r confkit.Reporter) {
	for _, p := range []*string{&t.CertFile, &t.KeyFile, &t.ClientCAFile} {
		r.Resolve(p)
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		r.Add(r.Line(), "tls: cert_file and key_file must be set together")
	}
	if t.ClientCAFile != "" && t.CertFile == "" {
		r.Add(r.Line("client_ca_file"), "tls.client_ca_file needs cert_file and key_file (mTLS requires TLS)")
	}
	confkit.FileExists(r, r.Line("cert_file"), "tls.cert_file", t.CertFile)
	confkit.FileExists(r, r.Line("key_file"), "tls.key_file", t.KeyFile)
	confkit.FileExists(r, r.Line("client_ca_file"), "tls.client_ca_file", t.ClientCAFile)
	if t.MinVersion == "" {
		t.MinVersion = "1.3"
	}
	if !confkit.OneOf(t.MinVersion, "1.2", "1.3") {
		r.Add(r.Line("min_version"), "tls.min_version %q: want 1.2 or 1.3%s", t.MinVersion, confkit.DidYouMean(t.MinVersion, []string{"1.2", "1.3"}))
	}
}

func (a *Approval) check(r confkit.Reporter) {
	if a.CatalogueDir == "" {
		// The default may be absent (an empty catalogue); a configured one must exist.
		a.CatalogueDir = "specs"
		r.Resolve(&a.CatalogueDir)
	} else {
		r.Resolve(&a.CatalogueDir)
		confkit.FileExists(r, r.Line("catalogue_dir"), "approval.catalogue_dir", a.CatalogueDir)
	}
	if a.RateLimit.IsZero() {
		a.RateLimit = Rate{N: 60, Period: time.Minute}
	}
	for name, u := range map[string]string{"base_url": a.BaseURL, "webhook": a.Webhook} {
		if u != "" && !confkit.HTTPURL(u) {
			r.Add(r.Line(name), "approval.%s %q: want an http(s) URL", name, u)
		}
	}
}

func (s *State) check(r confkit.Reporter) {
	if s.Dir == "" {
		s.Dir = "data/state"
	}
	r.Resolve(&s.Dir)
	if s.Backend == "" {
		s.Backend = "memory"
	}
	if !confkit.OneOf(s.Backend, "memory", "redis") {
		r.Add(r.Line("backend"), "state.backend %q: want memory or redis%s", s.Backend, confkit.DidYouMean(s.Backend, []string{"memory", "redis"}))
	}
	if s.OnFailure == "" {
		s.OnFailure = "local"
	}
	if !confkit.OneOf(s.OnFailure, "closed", "local") {
		r.Add(r.Line("on_failure"), "state.on_failure %q: want closed or local%s", s.OnFailure, confkit.DidYouMean(s.OnFailure, []string{"closed", "local"}))
	}
	if s.Timeout == 0 {
		s.Timeout = Duration(50 * time.Millisecond)
	}
	if s.Timeout < 0 {
		r.Add(r.Line("timeout"), "state.timeout: must be positive")
	}
}

// durationSetting is a duration of a gateway.yaml section: its key
// (dotted below the section), where it is kept, and its default.
type durationSetting struct {
	key string
	v   *Duration
	def time.Duration
}

// durations gives each unset duration of section its default and refuses
// a negative one at its line (at finds a key's line in the section).
func (l *loader) durations(section string, at func(...string) int, ds []durationSetting) {
	for _, d := range ds {
		if *d.v == 0 {
			*d.v = Duration(d.def)
		}
		if *d.v < 0 {
			l.add(GatewayFile, at(strings.Split(d.key, ".")...), "%s.%s: must be positive", section, d.key)
		}
	}
}

func (l *loader) http(n *yaml.Node, h *HTTP) {
	const f = GatewayFile
	at := func(p ...string) int { return lineOf(n, append([]string{"http"}, p...)...) }
	l.durations("http", at, []durationSetting{
		{"read_header_timeout", &h.ReadHeaderTimeout, 5 * time.Second},
		{"body_idle_timeout", &h.BodyIdleTimeout, 15 * time.Second},
		{"write_idle_timeout", &h.WriteIdleTimeout, time.Minute},
		{"idle_timeout", &h.IdleTimeout, 2 * time.Minute},
		{"unauthenticated.audit_window", &h.Unauthenticated.AuditWindow, time.Minute},
	})
	u := &h.Unauthenticated
	if u.ConnsPerSource == 0 {
		u.ConnsPerSource = 4096
	}
	if u.ConnsPerSource < 0 {
		l.add(f, at("unauthenticated", "conns_per_source"), "http.unauthenticated.conns_per_source: must be positive")
	}
	if u.RateLimit.IsZero() {
		u.RateLimit = Rate{N: 10, Period: time.Second}
	}
}

func (l *loader) messaging(n *yaml.Node, m *Messaging) {
	const f = GatewayFile
	at := func(p ...string) int { return lineOf(n, append([]string{"messaging"}, p...)...) }
	l.durations("messaging", at, []durationSetting{
		{"timeout", &m.Timeout, 10 * time.Second},
		{"max_timeout", &m.MaxTimeout, time.Minute},
		{"retry_backoff", &m.RetryBackoff, 200 * time.Millisecond},
		{"history_retention", &m.HistoryRetention, 7 * 24 * time.Hour},
		{"max_clock_skew", &m.MaxClockSkew, 5 * time.Minute},
	})
	if m.Timeout > m.MaxTimeout {
		l.add(f, at("timeout"), "messaging.timeout %s exceeds messaging.max_timeout %s", m.Timeout.D(), m.MaxTimeout.D())
	}
	if (m.TLS.CertFile == "") != (m.TLS.KeyFile == "") {
		l.add(f, at("tls"), "messaging.tls: cert_file and key_file go together")
	}
	l.fileExists(f, at("tls", "ca_file"), "messaging.tls.ca_file", m.TLS.CAFile)
	l.fileExists(f, at("tls", "cert_file"), "messaging.tls.cert_file", m.TLS.CertFile)
	l.fileExists(f, at("tls", "key_file"), "messaging.tls.key_file", m.TLS.KeyFile)
	if m.Workers == 0 {
		m.Workers = 4
	}
	if m.QueueCapacity == 0 {
		m.QueueCapacity = 10000
	}
	if m.Workers < 0 || m.Workers > 256 {
		l.add(f, at("workers"), "messaging.workers %d: want 1..256", m.Workers)
	}
	if m.QueueCapacity < 0 {
		l.add(f, at("queue_capacity"), "messaging.queue_capacity: must be positive")
	}
	m.AllowedPrefixes = nil
	for i, c := range m.AllowedNetworks {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			l.add(f, at("allowed_networks", strconv.Itoa(i)), "messaging.allowed_networks: %q is not a CIDR such as 10.0.0.0/8", c)
			continue
		}
		m.AllowedPrefixes = append(m.AllowedPrefixes, p.Masked())
	}
}

// agentMCP checks the agents' mcp_tools against the configured servers.
func (l *loader) agentMCP(n *yaml.Node, agents map[string]*roster.Agent, m mcpconf.Settings) {
	const f = AgentsFile
	servers, virtual := m.Names()
	for _, id := range sortedKeys(agents) {
		a := agents[id]
		for _, server := range sortedKeys(a.MCPTools) {
			at := func(p ...string) int { return lineOf(n, append([]string{"agents", id, "mcp_tools", server}, p...)...) }
			if virtual[server] {
				l.add(f, at(), "agent %q: mcp_tools: %q is a virtual server: name its servers, whose entries govern their tools there", id, server)
				continue
			}
			if !confkit.OneOf(server, servers...) {
				l.add(f, at(), "agent %q: mcp_tools: unknown MCP server %q (want a name of %s mcp.servers)%s", id, server, GatewayFile, confkit.DidYouMean(server, servers))
			}
			for i, g := range a.MCPTools[server] {
				if _, err := path.Match(g, ""); err != nil || g == "" {
					l.add(f, at(strconv.Itoa(i)), "agent %q: mcp_tools.%s: bad glob %q", id, server, g)
				}
			}
		}
	}
}
