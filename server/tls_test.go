package server_test

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sacpgw/gateway/internal/testcert"
)

func TestMTLSIdentityAndRotation(t *testing.T) {
	ca := testcert.NewCA(t)
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
	sc, sk := ca.Issue(t, 100, "")
	put("server.pem", sc)
	put("server.key", sk)
	put("ca.pem", ca.PEM)
	st := newStack(t, stackOpts{tlsYAML: "tls:\n  cert_file: " + files["server.pem"] + "\n  key_file: " + files["server.key"] +
		"\n  client_ca_file: " + files["ca.pem"] + "\n  min_version: \"1.3\"\n"})
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(ca.PEM)
	client := func(spiffe string, maxVersion uint16) *http.Client {
		cfg := &tls.Config{RootCAs: roots, MaxVersion: maxVersion}
		if spiffe != "" {
			c, k := ca.Issue(t, 200, spiffe)
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
	nc, nk := ca.Issue(t, 101, "")
	put("server.key", nk)
	put("server.pem", nc)
	time.Sleep(1100 * time.Millisecond) // the reload check runs at most once a second
	fresh := client("spiffe://example.org/agent/alpha", 0)
	resp, err = call(fresh, "")
	if err != nil || resp.TLS.PeerCertificates[0].SerialNumber.Int64() != 101 {
		t.Fatalf("rotated certificate not served: %v", err)
	}
}
