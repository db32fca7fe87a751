package confkit

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// LoadCertPool reads the PEM certificates of a ca_file setting (an
// upstream's, tls.client_ca_file). A file without a certificate is an
// error, not an empty pool that would trust nothing.
func LoadCertPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificates", path)
	}
	return pool, nil
}

// ClientTLS is the TLS of an outbound connection (to an upstream, a
// collector, Redis, another gateway): TLS 1.2 at least, trusting the
// certificates of caFile, or the system's roots when caFile is empty.
func ClientTLS(caFile string) (*tls.Config, error) {
	conf := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile == "" {
		return conf, nil
	}
	pool, err := LoadCertPool(caFile)
	if err != nil {
		return nil, err
	}
	conf.RootCAs = pool
	return conf, nil
}
