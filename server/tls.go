package server

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/sacpgw/gateway/internal/confkit"
	"github.com/sacpgw/gateway/server/listenconf"
)

// TLSConfig builds the server's TLS settings from config: the minimum
// version (1.3 unless configured), and with client_ca_file mutual TLS where
// every client must present a certificate signed by that CA (agents are
// then identified by the SPIFFE ID in its URI SAN). The certificate is
// re-read when its files change, so cert-manager can rotate it without a
// restart. It returns nil, nil when no certificate is configured.
func TLSConfig(c listenconf.TLS, log *slog.Logger) (*tls.Config, error) {
	if c.CertFile == "" {
		return nil, nil
	}
	kp := &keyPair{cert: c.CertFile, key: c.KeyFile, log: log}
	if _, err := kp.load(); err != nil {
		return nil, err
	}
	cfg := &tls.Config{
		MinVersion:     tls.VersionTLS13,
		GetCertificate: kp.get,
	}
	if c.MinVersion == "1.2" {
		cfg.MinVersion = tls.VersionTLS12
	}
	if c.ClientCAFile != "" {
		pool, err := confkit.LoadCertPool(c.ClientCAFile)
		if err != nil {
			return nil, fmt.Errorf("tls.client_ca_file: %w", err)
		}
		cfg.ClientCAs = pool
		cfg.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return cfg, nil
}

// keyPair serves the current certificate, reloading it when the files'
// modification times change (checked at most once a second).
type keyPair struct {
	cert, key string
	log       *slog.Logger

	mu      sync.Mutex
	current *tls.Certificate
	mod     time.Time
	checked time.Time
}

func (k *keyPair) get(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if time.Since(k.checked) < time.Second && k.current != nil {
		return k.current, nil
	}
	k.checked = time.Now()
	mod := k.modTime()
	if k.current != nil && mod.Equal(k.mod) {
		return k.current, nil
	}
	c, err := k.loadLocked()
	if err != nil {
		// A half-written rotation: keep serving the last good certificate.
		k.log.Warn("tls certificate reload failed; keeping the current one", "error", err.Error())
		if k.current != nil {
			return k.current, nil
		}
		return nil, err
	}
	if k.current != nil {
		k.log.Info("tls certificate reloaded", "cert_file", k.cert)
	}
	k.current, k.mod = c, mod
	return c, nil
}

func (k *keyPair) load() (*tls.Certificate, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	c, err := k.loadLocked()
	if err == nil {
		k.current, k.mod = c, k.modTime()
	}
	return c, err
}

func (k *keyPair) loadLocked() (*tls.Certificate, error) {
	c, err := tls.LoadX509KeyPair(k.cert, k.key)
	if err != nil {
		return nil, fmt.Errorf("tls: %w", err)
	}
	return &c, nil
}

func (k *keyPair) modTime() time.Time {
	var latest time.Time
	for _, f := range []string{k.cert, k.key} {
		if st, err := os.Stat(f); err == nil && st.ModTime().After(latest) {
			latest = st.ModTime()
		}
	}
	return latest
}
