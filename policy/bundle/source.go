package bundle

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	opabundle "github.com/open-policy-agent/opa/v1/bundle"

	"github.com/sacpgw/gateway/internal/egress"
)

// Size bounds: a policy bundle is Rego text, kilobytes to a few megabytes.
// Anything far larger is refused before it is unpacked.
const (
	maxBundleBytes = 32 << 20 // compressed, as downloaded
	maxFileBytes   = 16 << 20 // one file inside, uncompressed
)

// Bundle is a verified bundle's policies.
type Bundle struct {
	// Revision is the .manifest's revision ("" when the bundle names none).
	Revision string
	// Tag identifies what was downloaded (the HTTP ETag or the OCI manifest
	// digest); given back to Fetch, an unchanged bundle is not downloaded.
	Tag string
	// Files are the Rego modules, by path inside the bundle (no leading
	// slash), sorted; *_test.rego files are left out, as from a directory.
	Files []File
}

// File is one Rego module of a bundle.
type File struct {
	Path string
	Data []byte
}

// Source fetches and verifies the bundle of one Config. Its methods may be
// called from one goroutine at a time.
type Source struct {
	cfg     Config
	display string
	verify  *opabundle.VerificationConfig
	client  *http.Client // HTTP: dials only where the egress policy allows, follows no redirect
	oci     *ociSource   // OCI: nil for a URL
}

// NewSource reads the verification key and prepares the client. The
// settings must have passed Check. Outbound connections dial only where
// guard allows.
func NewSource(cfg Config, guard egress.Policy) (*Source, error) {
	cfg.SetDefaults()
	if probs := cfg.Check(); len(probs) > 0 {
		return nil, fmt.Errorf("policy.bundle: %s", probs[0].Msg)
	}
	key, err := os.ReadFile(cfg.PublicKeyFile)
	if err != nil {
		return nil, fmt.Errorf("policy.bundle.public_key_file: %w", err)
	}
	kc := &opabundle.KeyConfig{Key: string(key), Algorithm: cfg.Algorithm, Scope: cfg.Scope}
	t, err := transport(cfg, guard)
	if err != nil {
		return nil, err
	}
	s := &Source{cfg: cfg, display: Display(cfg.URL), client: &http.Client{Transport: t, CheckRedirect: egress.NoRedirects}}
	s.verify = opabundle.NewVerificationConfig(map[string]*opabundle.KeyConfig{cfg.KeyID: kc}, cfg.KeyID, cfg.Scope, nil)
	if cfg.OCI != "" {
		s.display = cfg.OCI
		if s.oci, err = newOCISource(cfg, t); err != nil {
			return nil, err
		}
	}
	if err := checkKey(key, cfg.Algorithm); err != nil {
		return nil, fmt.Errorf("policy.bundle.public_key_file %s: %w", cfg.PublicKeyFile, err)
	}
	return s, nil
}

// transport dials only where guard allows, trusting ca_file's CAs beside
// the system's. The whole fetch is bounded by Fetch's deadline.
func transport(cfg Config, guard egress.Policy) (*http.Transport, error) {
	t := guard.Guard(http.DefaultTransport.(*http.Transport).Clone())
	if cfg.CAFile == "" {
		return t, nil
	}
	pem, err := os.ReadFile(cfg.CAFile)
	if err != nil {
		return nil, fmt.Errorf("policy.bundle.ca_file: %w", err)
	}
	pool, err := x509.SystemCertPool()
	if err != nil {
		pool = x509.NewCertPool()
	}
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("policy.bundle.ca_file %s: no PEM certificate", cfg.CAFile)
	}
	t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	return t, nil
}

// Display is where the bundle comes from, without credentials.
func (s *Source) Display() string { return s.display }

// Polling is the interval between fetches.
func (s *Source) Polling() time.Duration { return s.cfg.Polling }

// Fetch downloads and verifies the bundle. With the Tag of the bundle in
// use it returns nil, nil when the source says nothing changed. Every error
// names the source without credentials.
func (s *Source) Fetch(ctx context.Context, tag string) (*Bundle, error) {
	ctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	var raw []byte
	var newTag string
	var err error
	if s.oci != nil {
		raw, newTag, err = s.oci.fetch(ctx, tag)
	} else {
		raw, newTag, err = s.fetchHTTP(ctx, tag)
	}
	if err != nil || raw == nil {
		return nil, err
	}
	b, err := s.read(raw)
	if err != nil {
		return nil, fmt.Errorf("bundle from %s refused: %w", s.display, err)
	}
	b.Tag = newTag
	return b, nil
}

// fetchHTTP GETs the bundle; nil bytes when the server answers 304.
func (s *Source) fetchHTTP(ctx context.Context, tag string) ([]byte, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.cfg.URL, nil)
	if err != nil {
		return nil, "", fmt.Errorf("bundle from %s: %w", s.display, err)
	}
	req.Header.Set("Accept", "application/vnd.openpolicyagent.bundles, application/gzip, */*")
	if tag != "" {
		req.Header.Set("If-None-Match", tag)
	}
	if s.cfg.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.cfg.Token)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		// *url.Error repeats the URL with its query: name the source ourselves.
		var ue interface{ Unwrap() error }
		if errors.As(err, &ue) && ue.Unwrap() != nil {
			err = ue.Unwrap()
		}
		return nil, "", fmt.Errorf("bundle from %s: %w", s.display, err)
	}
	defer resp.Body.Close()
	switch resp.StatusCode {
	case http.StatusOK:
	case http.StatusNotModified:
		return nil, tag, nil
	default:
		return nil, "", fmt.Errorf("bundle from %s: HTTP %d", s.display, resp.StatusCode)
	}
	raw, err := readLimited(resp.Body)
	if err != nil {
		return nil, "", fmt.Errorf("bundle from %s: %w", s.display, err)
	}
	return raw, resp.Header.Get("ETag"), nil
}

// readLimited reads a whole download, refusing one over maxBundleBytes.
func readLimited(r io.Reader) ([]byte, error) {
	raw, err := io.ReadAll(io.LimitReader(r, maxBundleBytes+1))
	if err != nil {
		return nil, fmt.Errorf("download: %w", err)
	}
	if len(raw) > maxBundleBytes {
		return nil, fmt.Errorf("larger than %d MiB", maxBundleBytes>>20)
	}
	return raw, nil
}

// read verifies and unpacks a bundle with OPA's reader: the signature must
// verify with the configured key and scope, and every file must match its
// hash in the signature, or nothing of it is used. The gateway takes only
// Rego from a bundle: data documents, Wasm and plans are refused rather
// than silently ignored.
func (s *Source) read(raw []byte) (*Bundle, error) {
	b, err := opabundle.NewReader(bytes.NewReader(raw)).
		WithBundleVerificationConfig(s.verify).
		WithSizeLimitBytes(maxFileBytes).
		WithRegoVersion(ast.RegoV1).
		Read()
	if err != nil {
		return nil, err
	}
	if len(b.Data) > 0 {
		return nil, errors.New("the bundle holds data documents; the gateway loads only Rego from a bundle")
	}
	if len(b.WasmModules) > 0 || len(b.PlanModules) > 0 {
		return nil, errors.New("the bundle holds Wasm or plan modules; the gateway loads only Rego")
	}
	if v := b.Manifest.RegoVersion; v != nil && *v == ast.RegoV0.Int() {
		return nil, errors.New("the bundle is Rego v0 (rego_version 0); the gateway reads Rego v1")
	}
	out := &Bundle{Revision: b.Manifest.Revision}
	for _, m := range b.Modules {
		p := strings.TrimPrefix(m.Path, "/")
		if strings.HasSuffix(p, "_test.rego") {
			continue
		}
		out.Files = append(out.Files, File{Path: p, Data: m.Raw})
	}
	if len(out.Files) == 0 {
		return nil, errors.New("the bundle holds no Rego policy")
	}
	slices.SortFunc(out.Files, func(a, b File) int { return strings.Compare(a.Path, b.Path) })
	return out, nil
}

// checkKey refuses, at startup, a key file that could never verify a
// signature (OPA's reader would say so only on the first fetch), and a
// private key: the gateway needs only the public half, and a signing key
// on every gateway would let any of them sign policy.
func checkKey(key []byte, alg string) error {
	if strings.HasPrefix(alg, "HS") {
		if len(bytes.TrimSpace(key)) == 0 {
			return errors.New("the file is empty")
		}
		return nil
	}
	block, _ := pem.Decode(key)
	if block == nil {
		return errors.New("no PEM block: want the public key, as `openssl rsa -pubout` writes it")
	}
	var err error
	switch block.Type {
	case "PUBLIC KEY":
		_, err = x509.ParsePKIXPublicKey(block.Bytes)
	case "RSA PUBLIC KEY":
		_, err = x509.ParsePKCS1PublicKey(block.Bytes)
	case "CERTIFICATE":
		_, err = x509.ParseCertificate(block.Bytes)
	default:
		if strings.Contains(block.Type, "PRIVATE") {
			return errors.New("this is a private key: give the gateway only the public key (the signing key stays with whoever builds bundles)")
		}
		return fmt.Errorf("a PEM %q block: want PUBLIC KEY or CERTIFICATE", block.Type)
	}
	return err
}
