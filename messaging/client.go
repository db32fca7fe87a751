package messaging

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"

	"github.com/sacpgw/gateway/internal/confkit"
	"github.com/sacpgw/gateway/internal/egress"
	"github.com/sacpgw/gateway/messaging/relayconf"
	"github.com/sacpgw/gateway/upstream"
)

// NewClient is the HTTP client that calls agents' endpoints: pooled
// keep-alive connections (a busy relay must not reconnect per message),
// the endpoints' certificates verified against ca_file, and the gateway's
// client certificate presented for mTLS.
//
// Every connection goes only where p allows: the dialed address is checked
// (no loopback, private, link-local or metadata ranges unless
// messaging.allowed_networks lists them), never through a proxy.
func NewClient(c relayconf.TLS, p egress.Policy) (*http.Client, error) {
	t := p.Guard(upstream.NewTransport(0))
	tc, err := confkit.ClientTLS(c.CAFile)
	if err != nil {
		return nil, fmt.Errorf("messaging.tls.ca_file: %w", err)
	}
	if c.CertFile != "" {
		// Loaded once now, so a bad pair fails at startup; then again on
		// each handshake, so a rotated certificate needs no restart.
		if _, err := tls.LoadX509KeyPair(c.CertFile, c.KeyFile); err != nil {
			return nil, fmt.Errorf("messaging.tls: client certificate: %w", err)
		}
		certFile, keyFile := c.CertFile, c.KeyFile
		tc.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			cert, err := tls.LoadX509KeyPair(certFile, keyFile)
			if err != nil {
				return nil, errors.New("messaging client certificate unreadable: " + err.Error())
			}
			return &cert, nil
		}
	}
	t.TLSClientConfig = tc
	// No redirects: a recipient that answers 3xx cannot send the gateway
	// (and the message) elsewhere; the 3xx is a refused delivery.
	return &http.Client{Transport: t, CheckRedirect: egress.NoRedirects}, nil
}
