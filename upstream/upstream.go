// Package upstream holds the model providers the gateway forwards to: each
// is an http.RoundTripper (a pooled HTTP transport for OpenAI-compatible APIs,
// or the built-in deterministic mock) behind a retry policy, plus the model
// globs that route to it.
package upstream

import (
	"cmp"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sacpgw/gateway/internal/confkit"
	"github.com/sacpgw/gateway/upstream/mock"
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
	// FirstByte bounds the wait for the provider's response headers; when
	// it passes, the request fails over to the model's next upstream.
	// Zero: no bound of its own.
	FirstByte time.Duration

	base *url.URL
	// authHeader and authValue carry the provider's key: Authorization
	// "Bearer <key>", Anthropic's x-api-key or Azure's api-key; empty
	// without a key.
	authHeader, authValue string
	// azure: requests go to Azure OpenAI's deployments path (see Target).
	azure    *Azure
	patterns []string
	idle     interface{ CloseIdleConnections() }
	priority int
	weight   int
	brk      *breaker
	counts   *counters
}

// constructor builds the base transport and API root of one upstream type.
type constructor func(c Config) (http.RoundTripper, *url.URL, error)

// constructors maps config types to implementations; adding a provider type
// is adding an entry, not growing a switch.
func constructors() map[string]constructor {
	return map[string]constructor{
		"openai":    newHTTP,
		"anthropic": newAnthropic,
		"mock":      newMock,
	}
}

// newMock builds the built-in mock provider (package mock), which answers
// in process and needs nothing of the config.
func newMock(Config) (http.RoundTripper, *url.URL, error) {
	base, err := url.Parse(mock.Base)
	return mock.Provider{}, base, err
}

// Set is the configured upstreams. The upstreams whose globs match a model
// are its candidates (Candidates): the lowest priority first, spread by
// weight within a priority; a request tries them in that order while its
// failures allow (see proxy's send), skipping those whose breaker is open.
type Set struct {
	list []*Upstream
	// byPriority is list sorted by priority, config order kept within one.
	byPriority []*Upstream
	stats      *Stats
	now        func() time.Time
	rnd        *lockedRand // nil: math/rand/v2's global source
}

// Option configures New.
type Option func(*Set)

// WithStats counts failovers and breaker openings into st (the app's,
// kept across reloads) rather than into the Set's own Stats.
func WithStats(st *Stats) Option { return func(s *Set) { s.stats = st } }

// WithClock sets the breakers' clock (tests); default time.Now.
func WithClock(now func() time.Time) Option { return func(s *Set) { s.now = now } }

// WithRand sets the random source of the weighted order (tests); default
// math/rand/v2's global source. The Set serialises its use of src.
func WithRand(src rand.Source) Option {
	return func(s *Set) { s.rnd = &lockedRand{r: rand.New(src)} }
}

type lockedRand struct {
	mu sync.Mutex
	r  *rand.Rand
}

// Breaker defaults, for configs Check did not fill in.
const (
	defaultFailures = 5
	defaultCooldown = 30 * time.Second
)

// New builds every upstream of the config.
func New(cfgs []Config, log *slog.Logger, opts ...Option) (*Set, error) {
	ctors := constructors()
	s := &Set{now: time.Now}
	for _, o := range opts {
		o(s)
	}
	if s.stats == nil {
		s.stats = NewStats()
	}
	for _, c := range cfgs {
		ctor, ok := ctors[c.Type]
		if !ok {
			return nil, fmt.Errorf("upstream %q: unknown type %q", c.Name, c.Type)
		}
		rt, base, err := ctor(c)
		if err != nil {
			return nil, fmt.Errorf("upstream %q: %w", c.Name, err)
		}
		u := &Upstream{Name: c.Name, Type: c.Type, base: base, patterns: c.Models, azure: c.Azure}
		u.authHeader, u.authValue = credentials(c)
		if idle, ok := rt.(interface{ CloseIdleConnections() }); ok {
			u.idle = idle
		}
		u.Transport = &retrying{next: rt, max: c.Retries(), backoff: 100 * time.Millisecond, name: c.Name, log: log}
		u.priority, u.weight = c.Priority, c.Weight
		u.FirstByte = c.FirstByteTimeout.D()
		if u.weight <= 0 {
			u.weight = 1
		}
		u.counts = s.stats.of(c.Name)
		u.brk = &breaker{name: c.Name, threshold: c.Breaker.Failures, cooldown: c.Breaker.Cooldown.D(),
			now: s.now, counts: u.counts, log: log}
		if u.brk.threshold <= 0 {
			u.brk.threshold = defaultFailures
		}
		if u.brk.cooldown <= 0 {
			u.brk.cooldown = defaultCooldown
		}
		s.list = append(s.list, u)
	}
	s.byPriority = slices.Clone(s.list)
	slices.SortStableFunc(s.byPriority, func(a, b *Upstream) int { return cmp.Compare(a.priority, b.priority) })
	return s, nil
}

// Route returns the preferred upstream of model, or nil: the first, in
// config order, of the lowest priority whose glob matches. It is
// deterministic (the model listing's owner); requests use Candidates.
func (s *Set) Route(model string) *Upstream {
	for _, u := range s.byPriority {
		if u.Serves(model) {
			return u
		}
	}
	return nil
}

// Candidates returns the upstreams serving model in the order a request
// tries them: by priority, the lowest first; within one priority in a
// random order weighted by weight, so that each is first in proportion to
// its weight (equal weights spread evenly). A model that one upstream
// serves gets that one, and no random number is drawn.
func (s *Set) Candidates(model string) []*Upstream {
	var out []*Upstream
	for _, u := range s.byPriority {
		if u.Serves(model) {
			out = append(out, u)
		}
	}
	for i := 0; i < len(out); {
		j := i + 1
		for j < len(out) && out[j].priority == out[i].priority {
			j++
		}
		s.shuffle(out[i:j])
		i = j
	}
	return out
}

// shuffle orders g by weighted sampling without replacement: each place
// goes to one of the upstreams left with probability weight/sum of the
// weights left.
func (s *Set) shuffle(g []*Upstream) {
	total := 0
	for _, u := range g {
		total += u.weight
	}
	for k := 0; k < len(g)-1; k++ {
		r := s.intN(total)
		m := k
		for ; r >= g[m].weight; m++ {
			r -= g[m].weight
		}
		g[k], g[m] = g[m], g[k]
		total -= g[k].weight
	}
}

func (s *Set) intN(n int) int {
	if s.rnd == nil {
		return rand.IntN(n)
	}
	s.rnd.mu.Lock()
	defer s.rnd.mu.Unlock()
	return s.rnd.r.IntN(n)
}

// Stats returns the counters the Set counts into.
func (s *Set) Stats() *Stats { return s.stats }

// OpenBreakers counts the upstreams whose breaker is open (or half-open)
// now, in this process.
func (s *Set) OpenBreakers() int {
	n := 0
	for _, u := range s.list {
		if u.brk.open() {
			n++
		}
	}
	return n
}

// Admit asks u's circuit breaker for leave to send one request: refused
// while open, and while half-open to all but one probe. The caller reports
// the outcome on the Permit.
func (u *Upstream) Admit() (Permit, bool) { return u.brk.admit() }

// Force admits one request whatever the breaker's state, for a request
// whose every candidate is open; its outcome counts as a probe's.
func (u *Upstream) Force() Permit { return u.brk.force() }

// Reopens is when u's open breaker lets a probe through (in the past when
// it is half-open); zero when it is closed.
func (u *Upstream) Reopens() time.Time { return u.brk.reopens() }

// FailedOver counts one request that moved on from u to another upstream.
func (u *Upstream) FailedOver() { u.counts.failovers.Add(1) }

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
// "/v1/chat/completions" and a model: the path after /v1 is appended to the
// base URL, so a base of https://host/openai/v1 works as well as
// https://api.openai.com/v1. An Azure upstream with an api_version is
// asked at {base}/openai/deployments/{deployment}/chat/completions
// ?api-version=..., the deployment being the model's (its own name
// unless azure.deployments maps it).
func (u *Upstream) Target(apiPath, model string) *url.URL {
	t := *u.base
	op := strings.TrimPrefix(apiPath, "/v1")
	if u.azure != nil && u.azure.APIVersion != "" {
		dep := model
		if d, ok := u.azure.Deployments[model]; ok {
			dep = d
		}
		// The deployment is one path segment whatever the model's name
		// holds ("/", ".."): escaped in RawPath, which String() uses.
		base := strings.TrimRight(t.Path, "/") + "/openai/deployments/"
		t.Path = base + dep + op
		t.RawPath = (&url.URL{Path: base}).EscapedPath() + url.PathEscape(dep) + (&url.URL{Path: op}).EscapedPath()
		t.RawQuery = "api-version=" + url.QueryEscape(u.azure.APIVersion)
		return &t
	}
	t.Path = strings.TrimRight(t.Path, "/") + op
	t.RawPath = ""
	return &t
}

// Authorize sets the provider's credentials on an outgoing request, and
// removes any other credential header.
func (u *Upstream) Authorize(h http.Header) {
	for _, k := range credentialHeaders {
		delete(h, k)
	}
	if u.authValue != "" {
		h[u.authHeader] = []string{u.authValue}
	}
}

// credentialHeaders are every header a provider reads a key from.
var credentialHeaders = [...]string{"Authorization", "X-Api-Key", "Api-Key"}

// credentials is the header that carries c's key to its provider.
func credentials(c Config) (header, value string) {
	switch {
	case c.APIKey == "":
		return "", ""
	case c.Type == "anthropic":
		return "X-Api-Key", c.APIKey
	case c.Azure != nil:
		return "Api-Key", c.APIKey
	}
	return "Authorization", "Bearer " + c.APIKey
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

func newHTTP(c Config) (http.RoundTripper, *url.URL, error) {
	base, err := url.Parse(c.BaseURL)
	if err != nil {
		return nil, nil, fmt.Errorf("base_url: %w", err)
	}
	t := NewTransport(c.MaxIdleConns)
	if c.CAFile != "" {
		conf, err := confkit.ClientTLS(c.CAFile)
		if err != nil {
			return nil, nil, fmt.Errorf("ca_file: %w", err)
		}
		t.TLSClientConfig = conf
	}
	return t, base, nil
}
