package bundle

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/internal/egress"
)

// The gateway holds only the public half: a private key given as
// public_key_file (a copy-paste slip that would put the signing key on
// every gateway) is refused at startup, as is a file with no key.
func TestNewSourceKeyFile(t *testing.T) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	pub, err := x509.MarshalPKIXPublicKey(&k.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, c := range []struct{ name, content, want string }{
		{"private.pem", string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})), "private key"},
		{"empty.pem", "", "no PEM block"},
		{"public.pem", string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pub})), ""},
	} {
		path := filepath.Join(dir, c.name)
		if err := os.WriteFile(path, []byte(c.content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := NewSource(Config{URL: "https://b.example.com/b.tar.gz", PublicKeyFile: path, Algorithm: "ES256"}, egress.Policy{})
		if c.want == "" && err != nil || c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)) {
			t.Errorf("%s: err = %v, want %q", c.name, err, c.want)
		}
	}
}

// Display is what logs, errors and the operator page show: never a
// presigned URL's query or user info.
func TestDisplayHidesCredentials(t *testing.T) {
	for in, want := range map[string]string{
		"https://b.example.com/gw.tar.gz?X-Amz-Signature=abc": "https://b.example.com/gw.tar.gz",
		"https://u:p@b.example.com/gw.tar.gz":                 "https://b.example.com/gw.tar.gz",
		"ghcr.io/acme/gateway-policy:1.4":                     "ghcr.io/acme/gateway-policy:1.4",
	} {
		if got := Display(in); got != want {
			t.Errorf("Display(%q) = %q, want %q", in, got, want)
		}
	}
}
