package policy

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/types"
	opabundle "github.com/open-policy-agent/opa/v1/bundle"

	"github.com/sacpgw/gateway/internal/egress"
	"github.com/sacpgw/gateway/policy/bundle"
)

// signer makes bundles as `opa build --signing-key` does: OPA's own
// writer and signature, RS256, key id "default".
type signer struct {
	priv   string // PEM
	pubKey string // path of the public key file
}

func newSigner(t *testing.T) signer {
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
	return signer{priv: string(priv), pubKey: path}
}

// build writes a signed bundle of files (path → Rego); tamper, when set,
// changes the files after signing.
func (s signer) build(t *testing.T, revision string, files map[string]string, tamper func(*opabundle.Bundle)) []byte {
	t.Helper()
	b := opabundle.Bundle{Manifest: opabundle.Manifest{Revision: revision}, Data: map[string]any{}}
	b.Manifest.Init()
	for _, p := range slices.Sorted(func(yield func(string) bool) {
		for p := range files {
			if !yield(p) {
				return
			}
		}
	}) {
		b.Modules = append(b.Modules, opabundle.ModuleFile{URL: "/" + p, Path: "/" + p, Raw: []byte(files[p])})
	}
	if s.priv != "" {
		if err := b.GenerateSignature(opabundle.NewSigningConfig(s.priv, "RS256", ""), "default", false); err != nil {
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

func chatBundle(reason string) map[string]string {
	return map[string]string{"gateway/chat.rego": chatPolicy(reason)}
}

// bundleServer serves one bundle at a time, with an ETag, as a static file
// server or object store does.
type bundleServer struct {
	*httptest.Server
	mu          sync.Mutex
	body        []byte
	gets, not   atomic.Int64 // requests, 304 answers
	lastAuthHdr atomic.Value
	caFile      string // the server's certificate, for ca_file
}

func newBundleServer(t *testing.T, body []byte) *bundleServer {
	s := &bundleServer{body: body}
	s.Server = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.gets.Add(1)
		s.lastAuthHdr.Store(r.Header.Get("Authorization"))
		s.mu.Lock()
		body := s.body
		s.mu.Unlock()
		sum := sha256.Sum256(body)
		etag := `"` + hex.EncodeToString(sum[:8]) + `"`
		if r.Header.Get("If-None-Match") == etag {
			s.not.Add(1)
			w.WriteHeader(http.StatusNotModified)
			return
		}
		w.Header().Set("ETag", etag)
		w.Header().Set("Content-Type", "application/vnd.openpolicyagent.bundles")
		_, _ = w.Write(body)
	}))
	t.Cleanup(s.Close)
	s.caFile = filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(s.caFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: s.Certificate().Raw}), 0o600); err != nil {
		t.Fatal(err)
	}
	return s
}

func (s *bundleServer) serve(body []byte) {
	s.mu.Lock()
	s.body = body
	s.mu.Unlock()
}

// loopback lets the test's servers through the outbound guard, as
// messaging.allowed_networks would.
var loopback = egress.Policy{Allowed: []netip.Prefix{netip.MustParsePrefix("127.0.0.0/8"), netip.MustParsePrefix("::1/128")}}

func bundleEngine(t *testing.T, cfg bundle.Config, guard egress.Policy, noWatch bool) (*Engine, *reloads, error) {
	t.Helper()
	src, err := bundle.NewSource(cfg, guard)
	if err != nil {
		t.Fatal(err)
	}
	var rl reloads
	e, err := New(Options{Bundle: src, NoWatch: noWatch, OnReload: rl.add})
	if err == nil {
		t.Cleanup(e.Close)
	}
	return e, &rl, err
}

// denies is the reason the live policies give for a chat request.
func denies(t *testing.T, e *Engine) string {
	t.Helper()
	d, err := e.ChatDeny(context.Background(), map[string]any{"deny": true})
	if err != nil || d.FailClosed {
		t.Fatalf("decision failed: %v %+v", err, d)
	}
	return strings.Join(d.Reasons, ",")
}

// TestBundleHTTP loads a signed bundle from an HTTP server and polls it:
// an unchanged bundle is not downloaded again (If-None-Match), a bundle
// signed with another key, one changed after signing, an unsigned one and
// one that does not compile are each refused while the last good bundle
// keeps deciding, and a good new revision then replaces it.
func TestBundleHTTP(t *testing.T) {
	good, other := newSigner(t), newSigner(t)
	srv := newBundleServer(t, good.build(t, "v1", chatBundle("bundle-v1"), nil))
	e, rl, err := bundleEngine(t, bundle.Config{URL: srv.URL + "/gateway.tar.gz?sig=secret", PublicKeyFile: good.pubKey, CAFile: srv.caFile, Token: "tok-123"}, loopback, true)
	if err != nil {
		t.Fatal(err)
	}
	if got := denies(t, e); got != "bundle-v1" {
		t.Fatalf("decision = %q, want the bundle's", got)
	}
	st := e.Bundle()
	if st.Revision != "v1" || st.Error != "" || st.Source != srv.URL+"/gateway.tar.gz" {
		t.Fatalf("status = %+v", st)
	}
	if h, _ := srv.lastAuthHdr.Load().(string); h != "Bearer tok-123" {
		t.Fatalf("Authorization = %q", h)
	}
	if err := e.PollBundle(context.Background()); err != nil || srv.not.Load() != 1 {
		t.Fatalf("unchanged poll: err %v, 304s %d", err, srv.not.Load())
	}

	refused := []struct {
		name, want string
		body       []byte
	}{
		{"signed with another key", "verify", other.build(t, "evil-1", chatBundle("evil"), nil)},
		{"changed after signing", "digest mismatch", good.build(t, "evil-2", chatBundle("fine"), func(b *opabundle.Bundle) {
			b.Modules[0].Raw = []byte(chatPolicy("evil"))
		})},
		{"unsigned", ".signatures.json", signer{}.build(t, "evil-3", chatBundle("evil"), nil)},
		{"does not parse", "/gateway/chat.rego:4", good.build(t, "v2-broken", map[string]string{"gateway/chat.rego": "package gateway.chat\n\ndeny contains x if {\n"}, nil)},
		{"does not compile", "bundle/gateway/chat.rego:3: rego_type_error: undefined function", good.build(t, "v2-broken", map[string]string{"gateway/chat.rego": "package gateway.chat\n\ndeny contains x if x := no_such_function(input)\n"}, nil)},
		{"errs on the smoke test", "fails on a sample input", good.build(t, "v2-erring", map[string]string{"gateway/chat.rego": "package gateway.chat\n\nv := 1 if input.model\n\nv := 2 if input.request\n\ndeny contains \"x\" if v\n"}, nil)},
	}
	for _, c := range refused {
		srv.serve(c.body)
		err := e.PollBundle(context.Background())
		var le *LoadError
		if !errors.As(err, &le) || !strings.Contains(err.Error(), c.want) {
			t.Fatalf("%s: err = %v, want a LoadError with %q", c.name, err, c.want)
		}
		if got := denies(t, e); got != "bundle-v1" {
			t.Fatalf("%s: decision = %q: the last good bundle must keep deciding", c.name, got)
		}
		st := e.Bundle()
		if st.Revision != "v1" || st.Error == "" || !strings.Contains(e.ReloadProblem(), "policy bundle refused") {
			t.Fatalf("%s: status %+v, problem %q", c.name, st, e.ReloadProblem())
		}
		if strings.Contains(st.Error, "secret") || strings.Contains(st.Error, "tok-123") {
			t.Fatalf("%s: a credential in the error: %s", c.name, st.Error)
		}
	}
	srv.serve(good.build(t, "v3", chatBundle("bundle-v3"), nil))
	if err := e.PollBundle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, st := denies(t, e), e.Bundle(); got != "bundle-v3" || st.Revision != "v3" || st.Error != "" || e.ReloadProblem() != "" {
		t.Fatalf("after v3: decision %q, status %+v, problem %q", got, st, e.ReloadProblem())
	}
	evs := rl.all()
	if n := len(evs); n != len(refused)+1 || evs[0].OK || !evs[n-1].OK || evs[n-1].BundleRevision != "v3" || evs[n-1].Dir != st.Source {
		t.Fatalf("reload events: %+v", evs)
	}
}

// TestBundleStartRefused: a gateway does not start on a bundle it would
// refuse later (there is no last good one yet), nor on a bundle server
// outside the outbound policy.
func TestBundleStartRefused(t *testing.T) {
	good, other := newSigner(t), newSigner(t)
	srv := newBundleServer(t, other.build(t, "v1", chatBundle("evil"), nil))
	if _, _, err := bundleEngine(t, bundle.Config{URL: srv.URL, PublicKeyFile: good.pubKey, CAFile: srv.caFile}, loopback, true); err == nil || !strings.Contains(err.Error(), "verify") {
		t.Fatalf("bad signature at start: err = %v", err)
	}
	srv.serve(good.build(t, "v1", chatBundle("ok"), nil))
	if _, _, err := bundleEngine(t, bundle.Config{URL: srv.URL, PublicKeyFile: good.pubKey, CAFile: srv.caFile}, egress.Policy{}, true); err == nil || !strings.Contains(err.Error(), "destination not allowed") {
		t.Fatalf("loopback without allowance: err = %v", err)
	}
}

// TestBundlePolling: without NoWatch the engine asks the source on its
// interval by itself.
func TestBundlePolling(t *testing.T) {
	good := newSigner(t)
	srv := newBundleServer(t, good.build(t, "v1", chatBundle("bundle-v1"), nil))
	e, _, err := bundleEngine(t, bundle.Config{URL: srv.URL, PublicKeyFile: good.pubKey, CAFile: srv.caFile, Polling: time.Second}, loopback, false)
	if err != nil {
		t.Fatal(err)
	}
	srv.serve(good.build(t, "v2", chatBundle("bundle-v2"), nil))
	eventually(t, "the polled bundle v2", func() bool { return e.Bundle().Revision == "v2" })
	if got := denies(t, e); got != "bundle-v2" {
		t.Fatalf("decision = %q", got)
	}
}

// pushBundle pushes a bundle to ref as OPA expects it in a registry: an
// OCI image whose one layer is the bundle, media type tar+gzip.
func pushBundle(t *testing.T, ref string, body []byte) {
	t.Helper()
	r, err := name.ParseReference(ref)
	if err != nil {
		t.Fatal(err)
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), static.NewLayer(body, types.OCILayer))
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(r, img); err != nil {
		t.Fatal(err)
	}
}

// TestBundleOCI pulls the bundle from a real OCI distribution registry
// (go-containerregistry's, started here): a new push to the tag is
// picked up, one signed with another key is refused and the last good
// one keeps deciding.
func TestBundleOCI(t *testing.T) {
	reg := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(reg.Close)
	ref := strings.TrimPrefix(reg.URL, "http://") + "/acme/gateway-policy:live"
	good, other := newSigner(t), newSigner(t)
	pushBundle(t, ref, good.build(t, "oci-1", chatBundle("oci-v1"), nil))

	cfg := bundle.Config{OCI: ref, PublicKeyFile: good.pubKey}
	if _, _, err := bundleEngine(t, cfg, loopback, true); err == nil || !strings.Contains(err.Error(), "plain_http") {
		t.Fatalf("a plain-HTTP registry without plain_http: err = %v", err)
	}
	cfg.PlainHTTP = true
	e, _, err := bundleEngine(t, cfg, loopback, true)
	if err != nil {
		t.Fatal(err)
	}
	if got, st := denies(t, e), e.Bundle(); got != "oci-v1" || st.Revision != "oci-1" || st.Source != ref {
		t.Fatalf("decision %q, status %+v", got, st)
	}
	if err := e.PollBundle(context.Background()); err != nil || e.Bundle().Revision != "oci-1" {
		t.Fatalf("unchanged: %v", err)
	}
	pushBundle(t, ref, other.build(t, "evil", chatBundle("evil"), nil))
	if err := e.PollBundle(context.Background()); err == nil || !strings.Contains(err.Error(), "verify") {
		t.Fatalf("bad signature: err = %v", err)
	}
	if got, st := denies(t, e), e.Bundle(); got != "oci-v1" || st.Revision != "oci-1" || st.Error == "" {
		t.Fatalf("after a refused bundle: decision %q, status %+v", got, st)
	}
	pushBundle(t, ref, good.build(t, "oci-2", chatBundle("oci-v2"), nil))
	if err := e.PollBundle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, st := denies(t, e), e.Bundle(); got != "oci-v2" || st.Revision != "oci-2" || st.Error != "" {
		t.Fatalf("after oci-2: decision %q, status %+v", got, st)
	}
}
