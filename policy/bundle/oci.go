package bundle

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// BundleLayer is the media type of the layer that holds the bundle in an
// OCI image, as OPA's own OCI downloader looks for it (and as `oras push
// bundle.tar.gz:application/vnd.oci.image.layer.v1.tar+gzip` writes it).
const BundleLayer = types.OCILayer

// ociSource pulls a bundle from a registry with go-containerregistry.
type ociSource struct {
	ref     name.Reference
	display string
	opts    []remote.Option
}

// parseRef reads an OCI reference; plain lets the registry speak HTTP.
func parseRef(ref string, plain bool) (name.Reference, error) {
	var opts []name.Option
	if plain {
		opts = append(opts, name.Insecure)
	}
	return name.ParseReference(ref, append(opts, name.StrictValidation)...)
}

// newOCISource pulls through t (the guarded transport).
func newOCISource(cfg Config, t *http.Transport) (*ociSource, error) {
	ref, err := parseRef(cfg.OCI, cfg.PlainHTTP)
	if err != nil {
		return nil, fmt.Errorf("policy.bundle.oci: %w", err)
	}
	var rt http.RoundTripper = t
	if !cfg.PlainHTTP {
		// go-containerregistry falls back to plain HTTP for registries on
		// loopback and private addresses; without plain_http that is a
		// downgrade nobody asked for.
		rt = httpsOnly{rt}
	}
	auth := authn.Anonymous
	if cfg.Token != "" {
		auth = &authn.Bearer{Token: cfg.Token}
	}
	return &ociSource{ref: ref, display: cfg.OCI, opts: []remote.Option{remote.WithTransport(rt), remote.WithAuth(auth)}}, nil
}

// fetch returns the bundle layer's bytes and the manifest's digest, or nil
// bytes when the digest is tag (nothing changed). The registry client
// checks each blob against its digest.
func (o *ociSource) fetch(ctx context.Context, tag string) ([]byte, string, error) {
	opts := append([]remote.Option{remote.WithContext(ctx)}, o.opts...)
	desc, err := remote.Get(o.ref, opts...)
	if err != nil {
		return nil, "", fmt.Errorf("bundle from %s: %w", o.display, err)
	}
	if desc.Digest.String() == tag {
		return nil, tag, nil
	}
	img, err := bundleImage(desc)
	if err != nil {
		return nil, "", fmt.Errorf("bundle from %s: %w", o.display, err)
	}
	raw, err := layerBytes(img)
	if err != nil {
		return nil, "", fmt.Errorf("bundle from %s: %w", o.display, err)
	}
	return raw, desc.Digest.String(), nil
}

// bundleImage is the image behind desc: itself, or, for an index, the
// first manifest with a bundle layer (OPA skips build attestations, whose
// platform is unknown/unknown, the same way).
func bundleImage(desc *remote.Descriptor) (v1.Image, error) {
	if !desc.MediaType.IsIndex() {
		return desc.Image()
	}
	idx, err := desc.ImageIndex()
	if err != nil {
		return nil, err
	}
	im, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, m := range im.Manifests {
		if p := m.Platform; p != nil && p.OS == "unknown" && p.Architecture == "unknown" {
			continue
		}
		if !m.MediaType.IsImage() {
			continue
		}
		img, err := idx.Image(m.Digest)
		if err != nil {
			return nil, err
		}
		if _, ok, err := findLayer(img); err != nil || ok {
			return img, err
		}
	}
	return nil, fmt.Errorf("no manifest in the index has a %s layer", BundleLayer)
}

// findLayer is the image's bundle layer.
func findLayer(img v1.Image) (v1.Descriptor, bool, error) {
	m, err := img.Manifest()
	if err != nil {
		return v1.Descriptor{}, false, err
	}
	for _, l := range m.Layers {
		if l.MediaType == BundleLayer {
			return l, true, nil
		}
	}
	return v1.Descriptor{}, false, nil
}

// layerBytes downloads the bundle layer, refusing one announced or found
// larger than maxBundleBytes.
func layerBytes(img v1.Image) ([]byte, error) {
	d, ok, err := findLayer(img)
	if err != nil {
		return nil, err
	}
	if !ok {
		return nil, fmt.Errorf("the image has no %s layer (push the bundle as one)", BundleLayer)
	}
	if d.Size > maxBundleBytes {
		return nil, fmt.Errorf("the bundle layer is %d bytes, over %d MiB", d.Size, maxBundleBytes>>20)
	}
	l, err := img.LayerByDigest(d.Digest)
	if err != nil {
		return nil, err
	}
	rc, err := l.Compressed()
	if err != nil {
		return nil, err
	}
	defer rc.Close()
	return readLimited(rc)
}

// httpsOnly refuses plain-HTTP requests.
type httpsOnly struct{ next http.RoundTripper }

func (h httpsOnly) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.URL.Scheme != "https" {
		return nil, errors.New("the registry would be reached over plain HTTP: set policy.bundle.plain_http to allow it")
	}
	return h.next.RoundTrip(r)
}
