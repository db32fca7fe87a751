// Package upstream holds the model providers the gateway forwards to: each
// is an http.RoundTripper (a pooled HTTP transport for OpenAI-compatible APIs,
// or the built-in deterministic mock) behind a retry policy, plus the model
// globs that route to it.
package upstream

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"strings"
	"time"

	"github.com/sacpgw/gateway/config"
)

// Upstream is one configured provider.
type Upstream struct {
	// Name is the configured name, used in logs and audit entries.
	Name string
	// Type is the configured type ("openai", "mock").
	Type string
	// Transport sends requests to the provider, retrying connection failures
	// and 5xx answers before any byte reached the client.
	Transport http.RoundTripper

	base     *url.URL
	bearer   string // "Bearer <api_key>", or empty without a key
	patterns []string
	idle     interface{ CloseIdleConnections() }
}

// constructor builds the base transport and API root of one upstream type.
type constructor func(c config.Upstream) (http.RoundTripper, *url.URL, error)

// constructors maps config types to implementations; adding a provider type
// is adding an entry, not growing a switch.
func constructors() map[string]constructor {
	return map[string]constructor{
		"openai": newHTTP,
		"mock":   newMock,
	}
}

// Set is the ordered list of upstreams; the first whose glob matches a model wins.
type Set struct {
	list []*Upstream
}

// New builds every upstream of the config.
func New(cfgs []config.Upstream, log *slog.Logger) (*Set, error) {
	ctors := constructors()
	s := &Set{}
	for _, c := range cfgs {
		ctor, ok := ctors[c.Type]
		if !ok {
			return nil, fmt.Errorf("upstream %q: unknown type %q", c.Name, c.Type)
		}
		rt, base, err := ctor(c)
		if err != nil {
			return nil, fmt.Errorf("upstream %q: %w", c.Name, err)
		}
		u := &Upstream{Name: c.Name, Type: c.Type, base: base, bearer: bearerOf(c.APIKey), patterns: c.Models}
		if idle, ok := rt.(interface{ CloseIdleConnections() }); ok {
			u.idle = idle
		}
		u.Transport = &retrying{next: rt, max: c.Retries(), backoff: 100 * time.Millisecond, name: c.Name, log: log}
		s.list = append(s.list, u)
	}
	return s, nil
}

// Route returns the upstream serving model, or nil.
func (s *Set) Route(model string) *Upstream {
	for _, u := range s.list {
		if u.Serves(model) {
			return u
		}
	}
	return nil
}

// Serves reports whether one of the upstream's globs matches model.
func (u *Upstream) Serves(model string) bool {
	for _, p := range u.patterns {
		if ok, _ := path.Match(p, model); ok {
			return true
		}
	}
	return false
}

// Models lists the literal (non-glob) model names of every upstream, in
// config order, each with the upstream that serves it.
func (s *Set) Models() []Model {
	var out []Model
	seen := map[string]bool{}
	for _, u := range s.list {
		for _, p := range u.patterns {
			if strings.ContainsAny(p, `*?[\`) || seen[p] {
				continue
			}
			if s.Route(p) == u {
				out = append(out, Model{ID: p, Upstream: u.Name})
				seen[p] = true
			}
		}
	}
	return out
}

// Model is a listed model name.
type Model struct {
	ID       string
	Upstream string
}

// Target returns the provider URL for an OpenAI API path such as
// "/v1/chat/completions": the path after /v1 is appended to the base URL, so
// a base of https://host/openai/v1 works as well as https://api.openai.com/v1.
func (u *Upstream) Target(apiPath string) *url.URL {
	t := *u.base
	t.Path = strings.TrimRight(t.Path, "/") + strings.TrimPrefix(apiPath, "/v1")
	t.RawPath = ""
	return &t
}

// Authorize sets the provider's credentials on an outgoing request.
func (u *Upstream) Authorize(h http.Header) {
	delete(h, "Authorization")
	if u.bearer != "" {
		h["Authorization"] = []string{u.bearer}
	}
}

func bearerOf(key string) string {
	if key == "" {
		return ""
	}
	return "Bearer " + key
}

// Close releases pooled connections.
func (s *Set) Close() {
	for _, u := range s.list {
		if u.idle != nil {
			u.idle.CloseIdleConnections()
		}
	}
}

// NewTransport returns the pooled transport tuned for many concurrent,
// long-lived (streaming) requests to a few hosts. It is exported so that
// benchmarks give the bare reverse proxy the same pool.
func NewTransport(maxIdle int) *http.Transport {
	if maxIdle <= 0 {
		maxIdle = 512
	}
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:   5 * time.Second,
			KeepAlive: 30 * time.Second,
		}).DialContext,
		ForceAttemptHTTP2: true,
		// The default of 2 idle connections per host makes a busy gateway
		// open and close connections constantly; keep them all.
		MaxIdleConns:          maxIdle,
		MaxIdleConnsPerHost:   maxIdle,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		ReadBufferSize:        32 << 10,
		WriteBufferSize:       32 << 10,
	}
}

func newHTTP(c config.Upstream) (http.RoundTripper, *url.URL, error) {
	base, err := url.Parse(c.BaseURL)
	if err != nil {
		return nil, nil, fmt.Errorf("base_url: %w", err)
	}
	t := NewTransport(c.MaxIdleConns)
	if c.CAFile != "" {
		pool, err := LoadCertPool(c.CAFile)
		if err != nil {
			return nil, nil, fmt.Errorf("ca_file: %w", err)
		}
		t.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return t, base, nil
}

// LoadCertPool reads the PEM certificates of a CA file (upstreams'
// ca_file, tls.client_ca_file, messaging.tls.ca_file). A file without a
// certificate is an error, not an empty pool that would trust nothing.
func LoadCertPool(path string) (*x509.CertPool, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no PEM certificates", path)
	}
	return pool, nil
}
