// Package listenconf is gateway.yaml's tls and http sections: how the
// gateway's listener terminates TLS (and asks for client certificates), and
// what a client connection may hold before it is cut. The server and the
// source guard read them; this package owns their defaults and checks, below
// the loader, which only composes it.
package listenconf

import (
	"time"

	"github.com/sacpgw/gateway/internal/confkit"
)

// TLS configures TLS termination.
type TLS struct {
	CertFile     string `yaml:"cert_file"`
	KeyFile      string `yaml:"key_file"`
	ClientCAFile string `yaml:"client_ca_file"`
	// MinVersion is "1.2" or "1.3". Default "1.3".
	MinVersion string `yaml:"min_version"`
}

// Check resolves the files' paths, checks they exist and go together, and
// defaults the minimum version.
func (t *TLS) Check(r confkit.Reporter) {
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

// HTTP bounds what a client connection may hold: slow headers and bodies,
// readers that take nothing, and the traffic of clients that have not
// authenticated (limited per source before any work: docs/security.md,
// "Flooding, connections and the state backend").
type HTTP struct {
	// ReadHeaderTimeout bounds the wait for a request's headers. Default 5s.
	ReadHeaderTimeout confkit.Duration `yaml:"read_header_timeout"`
	// BodyIdleTimeout cuts a request body that sends no byte for this long.
	// Default 15s.
	BodyIdleTimeout confkit.Duration `yaml:"body_idle_timeout"`
	// WriteIdleTimeout cuts a client that accepts no byte of the answer for
	// this long (streams included: each write extends it). Default 60s.
	WriteIdleTimeout confkit.Duration `yaml:"write_idle_timeout"`
	// IdleTimeout closes a keep-alive connection without requests. Default 120s.
	IdleTimeout confkit.Duration `yaml:"idle_timeout"`
	// Unauthenticated limits the traffic of sources that have not
	// authenticated.
	Unauthenticated Unauthenticated `yaml:"unauthenticated"`
}

// Unauthenticated bounds what a source that has not authenticated can cost:
// connections, refused requests, and audit entries.
type Unauthenticated struct {
	// ConnsPerSource caps the connections one source address holds before
	// one of them authenticates. Default 4096.
	ConnsPerSource int `yaml:"conns_per_source"`
	// RateLimit bounds the failed authentications of one source address;
	// past it the source gets 429 before any work. Default 10/second.
	RateLimit confkit.Rate `yaml:"rate_limit"`
	// AuditWindow: the first failure of a source in a window is audited at
	// once, the repeats as one counted entry per source per window. Default 60s.
	AuditWindow confkit.Duration `yaml:"audit_window"`
}

// Check fills in the defaults and refuses negative bounds.
func (h *HTTP) Check(r confkit.Reporter) {
	confkit.Durations(r, "http", []confkit.DurationSetting{
		{Key: "read_header_timeout", V: &h.ReadHeaderTimeout, Default: 5 * time.Second},
		{Key: "body_idle_timeout", V: &h.BodyIdleTimeout, Default: 15 * time.Second},
		{Key: "write_idle_timeout", V: &h.WriteIdleTimeout, Default: time.Minute},
		{Key: "idle_timeout", V: &h.IdleTimeout, Default: 2 * time.Minute},
		{Key: "unauthenticated.audit_window", V: &h.Unauthenticated.AuditWindow, Default: time.Minute},
	})
	u := &h.Unauthenticated
	if u.ConnsPerSource == 0 {
		u.ConnsPerSource = 4096
	}
	if u.ConnsPerSource < 0 {
		r.Add(r.Line("unauthenticated", "conns_per_source"), "http.unauthenticated.conns_per_source: must be positive")
	}
	if u.RateLimit.IsZero() {
		u.RateLimit = confkit.Rate{N: 10, Period: time.Second}
	}
}
