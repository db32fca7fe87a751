// Package bundle fetches the gateway's policies as a signed OPA bundle
// (the tar.gz that `opa build` writes, with its .manifest and
// .signatures.json) from an HTTP(S) URL or an OCI registry, and verifies it
// with OPA's own bundle reader before anything of it is used. Package
// policy compiles and swaps in what this package returns; this one knows
// nothing about decisions.
package bundle

import (
	"fmt"
	"net/url"
	"time"

	"github.com/open-policy-agent/opa/v1/keys"
)

// Defaults of the settings left empty.
const (
	DefaultPolling   = time.Minute
	DefaultTimeout   = 30 * time.Second
	DefaultAlgorithm = "RS256"   // what `opa build --signing-key` signs with unless told otherwise
	DefaultKeyID     = "default" // the key id `opa build` names unless given --verification-key-id
	// minPolling keeps a typo ("1ms") from turning the gateway into a load
	// test of the bundle server.
	minPolling = time.Second
)

// Config is gateway.yaml's policy.bundle: where the signed bundle lives
// and how to check it. Exactly one of URL and OCI is set.
type Config struct {
	// URL is an http(s) URL of the bundle (a .tar.gz), polled with
	// If-None-Match so an unchanged bundle is not downloaded again.
	URL string `yaml:"url"`
	// OCI is a registry reference (registry/repository:tag or @digest)
	// whose image holds the bundle as its one
	// application/vnd.oci.image.layer.v1.tar+gzip layer, as OPA pulls it.
	OCI string `yaml:"oci"`
	// PlainHTTP lets OCI talk to a registry without TLS (a lab registry);
	// the signature still decides what loads.
	PlainHTTP bool `yaml:"plain_http"`
	// Polling is how often the source is asked for a newer bundle.
	// Default 1m, at least 1s.
	Polling time.Duration `yaml:"polling"`
	// Timeout bounds one fetch, download included. Default 30s.
	Timeout time.Duration `yaml:"timeout"`
	// PublicKeyFile is the PEM public key (or, for HS256, the shared
	// secret) the bundle's signature must verify with. Required: the
	// gateway loads no unsigned bundle.
	PublicKeyFile string `yaml:"public_key_file"`
	// KeyID names the key, as `opa build --verification-key-id` does.
	// The signature is checked with this key whatever id it names itself.
	// Default "default", as opa build's.
	KeyID string `yaml:"key_id"`
	// Algorithm of the signature. Default RS256.
	Algorithm string `yaml:"algorithm"`
	// Scope must equal the scope claim of the signature (OPA's
	// bundles.*.signing.scope). Default: empty, as opa build writes it.
	Scope string `yaml:"scope"`
	// CAFile is a PEM bundle of the CAs that sign the bundle server's or
	// registry's certificate, beside the system's. Empty: the system's.
	CAFile string `yaml:"ca_file"`
	// Token is sent as a bearer token (write it as ${ENV}: it is a
	// credential). Empty: no Authorization.
	Token string `yaml:"token"`
}

// Problem is one setting that does not validate: Key is the setting's key
// under policy.bundle ("" for the block itself), for the loader's line.
type Problem struct {
	Key, Msg string
}

// SetDefaults fills in the defaults of the empty settings.
func (c *Config) SetDefaults() {
	if c.Polling == 0 {
		c.Polling = DefaultPolling
	}
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	if c.Algorithm == "" {
		c.Algorithm = DefaultAlgorithm
	}
	if c.KeyID == "" {
		c.KeyID = DefaultKeyID
	}
}

// Check validates the settings (after SetDefaults); the key file itself is
// read by NewSource.
func (c *Config) Check() []Problem {
	var out []Problem
	add := func(key, format string, args ...any) { out = append(out, Problem{key, fmt.Sprintf(format, args...)}) }
	switch {
	case c.URL == "" && c.OCI == "":
		add("", "set url (an http(s) URL of the bundle) or oci (a registry reference)")
	case c.URL != "" && c.OCI != "":
		add("oci", "set url or oci, not both")
	case c.URL != "":
		u, err := url.Parse(c.URL)
		if err != nil || (u.Scheme != "https" && u.Scheme != "http") || u.Host == "" {
			add("url", "want an http(s) URL such as https://bundles.example.com/gateway.tar.gz")
		} else if u.User != nil {
			add("url", "put no credentials in the URL: use token")
		} else if u.Scheme == "http" && c.Token != "" {
			add("token", "a token is sent only over https, not to %s", Display(c.URL))
		}
		if c.PlainHTTP {
			add("plain_http", "plain_http is for oci; an http:// URL says it already")
		}
	default:
		if _, err := parseRef(c.OCI, c.PlainHTTP); err != nil {
			add("oci", "want a reference such as ghcr.io/acme/gateway-policy:1.4: %v", err)
		}
		if c.PlainHTTP && c.Token != "" {
			add("token", "a token is sent only over TLS, not with plain_http")
		}
	}
	if c.Polling < minPolling {
		add("polling", "want at least %s, got %s", minPolling, c.Polling)
	}
	if c.Timeout <= 0 {
		add("timeout", "want a positive duration, got %s", c.Timeout)
	}
	if c.PublicKeyFile == "" {
		add("public_key_file", "required: the gateway loads only signed bundles")
	}
	if !keys.IsSupportedAlgorithm(c.Algorithm) {
		add("algorithm", "%q is not a signing algorithm OPA verifies (RS256, ES256, PS256, HS256, ...)", c.Algorithm)
	}
	return out
}

// Display is where a bundle comes from, fit for logs, errors and the
// operator page: a URL without its query (a presigned URL's query is a
// credential) or user info.
func Display(source string) string {
	u, err := url.Parse(source)
	if err != nil || u.Host == "" {
		return source
	}
	u.User, u.RawQuery, u.Fragment = nil, "", ""
	return u.String()
}
