package messaging

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"

	"github.com/sacpgw/gateway/config"
	"github.com/sacpgw/gateway/upstream"
)

// NewClient is the HTTP client that calls agents' endpoints: pooled
// keep-alive connections (a busy relay must not reconnect per message),
// the endpoints' certificates verified against ca_file, and the gateway's
// client certificate presented for mTLS.
func NewClient(c config.MessagingTLS) (*http.Client, error) {
	t := upstream.NewTransport(0)
	t.Proxy = nil // endpoints are inside the mesh; never via a proxy
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	if c.CAFile != "" {
		pool, err := upstream.LoadCertPool(c.CAFile)
		if err != nil {
			return nil, fmt.Errorf("messaging.tls.ca_file: %w", err)
		}
		tc.RootCAs = pool
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
	return &http.Client{Transport: t, CheckRedirect: noRedirects}, nil
}

// noRedirects keeps the gateway at the endpoint it was configured with: a
// recipient that answers 3xx cannot send it (and the message) elsewhere,
// such as a cloud metadata address. The 3xx is a refused delivery.
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
