package server_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testCA issues certificates for the TLS tests.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newCA(t *testing.T) *testCA {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"}, NotBefore: time.Now().Add(-time.Hour),
		NotAfter: time.Now().Add(time.Hour), IsCA: true, KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tpl, tpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns PEM cert and key; server certs get 127.0.0.1, client certs a SPIFFE URI.
func (ca *testCA) issue(t *testing.T, serial int64, spiffe string) (certPEM, keyPEM []byte) {
	key, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	tpl := &x509.Certificate{SerialNumber: big.NewInt(serial), Subject: pkix.Name{CommonName: "leaf"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), KeyUsage: x509.KeyUsageDigitalSignature}
	if spiffe == "" {
		tpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		tpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	} else {
		u, _ := url.Parse(spiffe)
		tpl.URIs = []*url.URL{u}
		tpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, _ := x509.MarshalECPrivateKey(key)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func TestMTLSIdentityAndRotation(t *testing.T) {
	ca := newCA(t)
	dir := t.TempDir()
	files := map[string]string{}
	put := func(name string, b []byte) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		files[name] = p
		return p
	}
	sc, sk := ca.issue(t, 100, "")
	put("server.pem", sc)
	put("server.key", sk)
	put("ca.pem", ca.pem)
	st := newStack(t, stackOpts{tlsYAML: "tls:\n  cert_file: " + files["server.pem"] + "\n  key_file: " + files["server.key"] +
		"\n  client_ca_file: " + files["ca.pem"] + "\n  min_version: \"1.3\"\n"})
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.pem)
	client := func(spiffe string, maxVersion uint16) *http.Client {
		cfg := &tls.Config{RootCAs: roots, MaxVersion: maxVersion}
		if spiffe != "" {
			c, k := ca.issue(t, 200, spiffe)
			pair, err := tls.X509KeyPair(c, k)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{pair}
		}
		return &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}}
	}
	call := func(c *http.Client, token string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, st.srv.URL+"/v1/chat/completions", strings.NewReader(`{"model":"mock-1","messages":[{"role":"user","content":"x"}]}`))
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		return c.Do(req)
	}
	alpha := client("spiffe://example.org/agent/alpha", 0)
	resp, err := call(alpha, "")
	if err != nil || resp.StatusCode != 200 || resp.Header.Get("X-Ratelimit-Limit-Requests") != "1000" {
		t.Fatalf("certificate identity: %v %v", err, resp)
	}
	if resp.TLS.Version != tls.VersionTLS13 {
		t.Errorf("negotiated %x, want TLS 1.3", resp.TLS.Version)
	}
	if resp, err := call(alpha, "tok-restricted"); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("token and certificate naming different agents: %v %v", err, resp)
	}
	if resp, err := call(alpha, "tok-alpha"); err != nil || resp.StatusCode != 200 {
		t.Errorf("token and certificate of the same agent: %v %v", err, resp)
	}
	if resp, err := call(client("spiffe://example.org/agent/nobody", 0), ""); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("unregistered SPIFFE ID: %v %v", err, resp)
	}
	if _, err := call(client("", 0), "tok-alpha"); err == nil {
		t.Error("a client without a certificate was served under mTLS")
	}
	if _, err := call(client("spiffe://example.org/agent/alpha", tls.VersionTLS12), ""); err == nil {
		t.Error("TLS 1.2 accepted with min_version 1.3")
	}
	// Rotation: new files, new connections see the new certificate.
	time.Sleep(1100 * time.Millisecond) // modification times must differ
	nc, nk := ca.issue(t, 101, "")
	put("server.key", nk)
	put("server.pem", nc)
	time.Sleep(1100 * time.Millisecond) // the reload check runs at most once a second
	fresh := client("spiffe://example.org/agent/alpha", 0)
	resp, err = call(fresh, "")
	if err != nil || resp.TLS.PeerCertificates[0].SerialNumber.Int64() != 101 {
		t.Fatalf("rotated certificate not served: %v", err)
	}
}
