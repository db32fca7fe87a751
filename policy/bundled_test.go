package policy

import (
	"context"
	"errors"
	"io"
	"log"
	"net/http/httptest"
	"net/netip"
	"strings"
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
	"github.com/sacpgw/gateway/internal/testkit"
	"github.com/sacpgw/gateway/policy/bundle"
)

func chatBundle(reason string) map[string]string {
	return map[string]string{"gateway/chat.rego": chatPolicy(reason)}
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
	good, other := testkit.NewBundleSigner(t), testkit.NewBundleSigner(t)
	srv := testkit.NewBundleServer(t, good.Build(t, "v1", chatBundle("bundle-v1"), nil))
	e, rl, err := bundleEngine(t, bundle.Config{URL: srv.URL + "/gateway.tar.gz?sig=secret", PublicKeyFile: good.PublicKeyFile, CAFile: srv.CAFile, Token: "tok-123"}, loopback, true)
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
	if h := srv.Authorization(); h != "Bearer tok-123" {
		t.Fatalf("Authorization = %q", h)
	}
	if err := e.PollBundle(context.Background()); err != nil || srv.NotModified.Load() != 1 {
		t.Fatalf("unchanged poll: err %v, 304s %d", err, srv.NotModified.Load())
	}

	refused := []struct {
		name, want string
		body       []byte
	}{
		{"signed with another key", "verify", other.Build(t, "evil-1", chatBundle("evil"), nil)},
		{"changed after signing", "digest mismatch", good.Build(t, "evil-2", chatBundle("fine"), func(b *opabundle.Bundle) {
			b.Modules[0].Raw = []byte(chatPolicy("evil"))
		})},
		{"unsigned", ".signatures.json", testkit.BundleSigner{}.Build(t, "evil-3", chatBundle("evil"), nil)},
		{"does not parse", "/gateway/chat.rego:4", good.Build(t, "v2-broken", map[string]string{"gateway/chat.rego": "package gateway.chat\n\ndeny contains x if {\n"}, nil)},
		{"does not compile", "bundle/gateway/chat.rego:3: rego_type_error: undefined function", good.Build(t, "v2-broken", map[string]string{"gateway/chat.rego": "package gateway.chat\n\ndeny contains x if x := no_such_function(input)\n"}, nil)},
		{"errs on the smoke test", "fails on a sample input", good.Build(t, "v2-erring", map[string]string{"gateway/chat.rego": "package gateway.chat\n\nv := 1 if input.model\n\nv := 2 if input.request\n\ndeny contains \"x\" if v\n"}, nil)},
	}
	for _, c := range refused {
		srv.Serve(c.body)
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
	// The last refusal again at the next poll: still refused, not reported
	// a second time.
	if err := e.PollBundle(context.Background()); err == nil || len(rl.all()) != len(refused) {
		t.Fatalf("a repeated refusal: err %v, %d events", err, len(rl.all()))
	}
	// The same Rego under a new manifest revision: nothing to compile, the
	// revision shown follows.
	srv.Serve(good.Build(t, "v1.1", chatBundle("bundle-v1"), nil))
	if err := e.PollBundle(context.Background()); err != nil || e.Bundle().Revision != "v1.1" || e.Bundle().Error != "" || len(rl.all()) != len(refused) {
		t.Fatalf("same Rego, new revision: err %v, status %+v, %d events", err, e.Bundle(), len(rl.all()))
	}
	srv.Serve(good.Build(t, "v3", chatBundle("bundle-v3"), nil))
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
	good, other := testkit.NewBundleSigner(t), testkit.NewBundleSigner(t)
	srv := testkit.NewBundleServer(t, other.Build(t, "v1", chatBundle("evil"), nil))
	if _, _, err := bundleEngine(t, bundle.Config{URL: srv.URL, PublicKeyFile: good.PublicKeyFile, CAFile: srv.CAFile}, loopback, true); err == nil || !strings.Contains(err.Error(), "verify") {
		t.Fatalf("bad signature at start: err = %v", err)
	}
	srv.Serve(good.Build(t, "v1", chatBundle("ok"), nil))
	if _, _, err := bundleEngine(t, bundle.Config{URL: srv.URL, PublicKeyFile: good.PublicKeyFile, CAFile: srv.CAFile}, egress.Policy{}, true); err == nil || !strings.Contains(err.Error(), "destination not allowed") {
		t.Fatalf("loopback without allowance: err = %v", err)
	}
}

// TestBundlePolling: without NoWatch the engine asks the source on its
// interval by itself.
func TestBundlePolling(t *testing.T) {
	good := testkit.NewBundleSigner(t)
	srv := testkit.NewBundleServer(t, good.Build(t, "v1", chatBundle("bundle-v1"), nil))
	e, _, err := bundleEngine(t, bundle.Config{URL: srv.URL, PublicKeyFile: good.PublicKeyFile, CAFile: srv.CAFile, Polling: time.Second}, loopback, false)
	if err != nil {
		t.Fatal(err)
	}
	srv.Serve(good.Build(t, "v2", chatBundle("bundle-v2"), nil))
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
	good, other := testkit.NewBundleSigner(t), testkit.NewBundleSigner(t)
	pushBundle(t, ref, good.Build(t, "oci-1", chatBundle("oci-v1"), nil))

	cfg := bundle.Config{OCI: ref, PublicKeyFile: good.PublicKeyFile}
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
	pushBundle(t, ref, other.Build(t, "evil", chatBundle("evil"), nil))
	if err := e.PollBundle(context.Background()); err == nil || !strings.Contains(err.Error(), "verify") {
		t.Fatalf("bad signature: err = %v", err)
	}
	if got, st := denies(t, e), e.Bundle(); got != "oci-v1" || st.Revision != "oci-1" || st.Error == "" {
		t.Fatalf("after a refused bundle: decision %q, status %+v", got, st)
	}
	pushBundle(t, ref, good.Build(t, "oci-2", chatBundle("oci-v2"), nil))
	if err := e.PollBundle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if got, st := denies(t, e), e.Bundle(); got != "oci-v2" || st.Revision != "oci-2" || st.Error != "" {
		t.Fatalf("after oci-2: decision %q, status %+v", got, st)
	}
}

// TestBundleWithShadow: a shadow directory is watched and reloaded beside
// a bundle, which has no directory of its own.
func TestBundleWithShadow(t *testing.T) {
	good := testkit.NewBundleSigner(t)
	srv := testkit.NewBundleServer(t, good.Build(t, "v1", chatBundle("live"), nil))
	shadow := t.TempDir()
	write(t, shadow, "chat.rego", chatPolicy("shadow-1"))
	src, err := bundle.NewSource(bundle.Config{URL: srv.URL, PublicKeyFile: good.PublicKeyFile, CAFile: srv.CAFile}, loopback)
	if err != nil {
		t.Fatal(err)
	}
	e, err := New(Options{Bundle: src, ShadowDir: shadow, Debounce: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Close)
	first := e.ShadowRevision()
	replace(t, shadow, "chat.rego", chatPolicy("shadow-2"))
	eventually(t, "the shadow reload", func() bool { return e.ShadowRevision() != first })
	if got := denies(t, e); got != "live" {
		t.Fatalf("decision = %q", got)
	}
}
