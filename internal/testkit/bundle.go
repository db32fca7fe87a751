package testkit

import (
	"bytes"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	opabundle "github.com/open-policy-agent/opa/v1/bundle"
)

// BundleSigner makes policy bundles as `opa build --signing-key` does:
// OPA's own writer and signature, RS256, key id "default".
type BundleSigner struct {
	private string // PEM; empty: the bundles are unsigned
	// PublicKeyFile is the public key, for policy.bundle.public_key_file.
	PublicKeyFile string
}

// NewBundleSigner makes a fresh RSA key pair.
func NewBundleSigner(t testing.TB) BundleSigner {
	t.Helper()
	k, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "bundle.pub.pem")
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub}), 0o600); err != nil {
		t.Fatal(err)
	}
	priv := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(k)})
	return BundleSigner{private: string(priv), PublicKeyFile: path}
}

// Build writes a bundle (tar.gz) of files (path → Rego) with the given
// .manifest revision, signed unless s is the zero BundleSigner; tamper,
// when set, changes the bundle after signing.
func (s BundleSigner) Build(t testing.TB, revision string, files map[string]string, tamper func(*opabundle.Bundle)) []byte {
	t.Helper()
	b := opabundle.Bundle{Manifest: opabundle.Manifest{Revision: revision}, Data: map[string]any{}}
	b.Manifest.Init()
	for _, p := range slices.Sorted(maps.Keys(files)) {
		b.Modules = append(b.Modules, opabundle.ModuleFile{URL: "/" + p, Path: "/" + p, Raw: []byte(files[p])})
	}
	if s.private != "" {
		if err := b.GenerateSignature(opabundle.NewSigningConfig(s.private, "RS256", ""), "default", false); err != nil {
			t.Fatal(err)
		}
	}
	if tamper != nil {
		tamper(&b)
	}
	var buf bytes.Buffer
	if err := opabundle.NewWriter(&buf).DisableFormat(true).Write(b); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// BundleServer serves one bundle at a time over HTTPS, with an ETag, as a
// static file server or an object store does.
type BundleServer struct {
	*httptest.Server
	// CAFile is the server's certificate, for policy.bundle.ca_file.
	CAFile string
	// Gets counts requests, NotModified the 304 answers.
	Gets, NotModified atomic.Int64
	mu                sync.Mutex
	body              []byte
	auth              string
}

// NewBundleServer starts a server with body; it stops when the test ends.
func NewBundleServer(t testing.TB, body []byte) *BundleServer {
	t.Helper()
	s := &BundleServer{body: body}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(s.serveHTTP))
	t.Cleanup(s.Close)
	s.CAFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(s.CAFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *BundleServer) serveHTTP(w http.ResponseWriter, r *http.Request) {
	s.Gets.Add(1)
	s.mu.Lock()
	body := s.body
	s.auth = r.Header.Get("Authorization")
	s.mu.Unlock()
	sum := sha256.Sum256(body)
	etag := `"` + hex.EncodeToString(sum[:8]) + `"`
	if r.Header.Get("If-None-Match") == etag {
		s.NotModified.Add(1)
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("ETag", etag)
	w.Header().Set("Content-Type", "application/vnd.openpolicyagent.bundles")
	_, _ = w.Write(body)
}

// Serve replaces the bundle served.
func (s *BundleServer) Serve(body []byte) {
	s.mu.Lock()
	s.body = body
	s.mu.Unlock()
}

// Authorization is the Authorization header of the last request.
func (s *BundleServer) Authorization() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.auth
}
