package upstream

import (
	"path"
	"strconv"
	"strings"

	"github.com/sacpgw/gateway/internal/confkit"
)

// types are the upstream types, one per constructor.
var types = [...]string{"anthropic", "mock", "openai"}

// Types lists the upstream types.
func Types() []string { return append([]string(nil), types[:]...) }

// Config is one entry of gateway.yaml's upstreams: one model provider.
type Config struct {
	// Name identifies the upstream in logs and audit entries.
	Name string `yaml:"name"`
	// Type selects the implementation: "openai" (any OpenAI-compatible
	// API), "anthropic" (Anthropic's Messages API, translated both ways)
	// or "mock".
	Type string `yaml:"type"`
	// BaseURL is the API root including the version, e.g. https://api.openai.com/v1.
	// Required for type openai; ignored for mock.
	BaseURL string `yaml:"base_url"`
	// APIKey is sent as the bearer token to the provider (as x-api-key to
	// an anthropic upstream, as api-key to Azure). Empty sends none (local
	// models). Never logged.
	APIKey string `yaml:"api_key"`
	// Models are globs (path.Match syntax) of the model names routed here
	// ("*" matches any); among the upstreams that match, Priority and
	// Weight decide (docs/providers.md).
	Models []string `yaml:"models"`
	// MaxRetries is how many times a connection failure or 5xx is retried,
	// with backoff, while nothing has reached the client yet. Default 2; 0 disables.
	MaxRetries *int `yaml:"max_retries"`
	// MaxIdleConns is the keep-alive pool size to this upstream. Default 512.
	MaxIdleConns int `yaml:"max_idle_conns"`
	// CAFile is a PEM bundle trusted for this upstream (self-hosted models). Empty: system roots.
	CAFile string `yaml:"ca_file"`
	// Priority orders the upstreams that serve a model: the lowest first,
	// the next ones only as failover. Default 0.
	Priority int `yaml:"priority"`
	// Weight spreads the requests among upstreams of one priority that
	// serve a model. Default 1.
	Weight int `yaml:"weight"`
	// Breaker opens after Failures failures in a row (no request goes
	// there) and lets one probe through after Cooldown. Defaults 5, 30s.
	Breaker Breaker `yaml:"breaker"`
	// FirstByteTimeout bounds the wait for this upstream's response
	// headers; when it passes, the request moves on to the model's next
	// upstream (failover before the first byte). Zero: only
	// timeouts.response bounds the exchange.
	FirstByteTimeout confkit.Duration `yaml:"first_byte_timeout"`
	// Azure, when set, speaks Azure OpenAI's form of the API on an openai
	// upstream: the key goes in the api-key header and, with APIVersion,
	// requests go to the deployments path.
	Azure *Azure `yaml:"azure"`
	// AnthropicVersion is the anthropic-version header sent to an
	// anthropic upstream. Default 2023-06-01.
	AnthropicVersion string `yaml:"anthropic_version"`
	// DefaultMaxTokens is the max_tokens sent to an anthropic upstream
	// for a request that set none (Anthropic requires one). Default 4096.
	DefaultMaxTokens int `yaml:"default_max_tokens"`
	// PromptCache, on an anthropic upstream, marks each request's system
	// prompt (with the tools before it) for Anthropic's prompt cache.
	// Default false: a cache write costs more than plain input, which a
	// prompt used once never earns back.
	PromptCache bool `yaml:"prompt_cache"`
}

// Azure is an openai upstream's Azure OpenAI settings.
type Azure struct {
	// APIVersion is the api-version query parameter. Set, requests go to
	// {base_url}/openai/deployments/{deployment}/{operation}; empty, to
	// {base_url}/{operation} (Azure's v1 API, base_url ending in
	// /openai/v1).
	APIVersion string `yaml:"api_version"`
	// Deployments maps a model name to its deployment name; a model not
	// listed is its own deployment name.
	Deployments map[string]string `yaml:"deployments"`
}

// Breaker is an upstream's circuit breaker.
type Breaker struct {
	Failures int              `yaml:"failures"`
	Cooldown confkit.Duration `yaml:"cooldown"`
}

// Retries is the configured retry count.
func (c Config) Retries() int {
	if c.MaxRetries == nil {
		return 2
	}
	return *c.MaxRetries
}

// Check fills in the defaults of gateway.yaml's upstreams and reports what
// is wrong through r, whose keys are below upstreams.
func Check(r confkit.Reporter, ups []Config) {
	if len(ups) == 0 {
		r.Add(r.Line(), "upstreams: at least one upstream is required")
	}
	seen := map[string]bool{}
	for i := range ups {
		u := &ups[i]
		switch {
		case u.Name == "":
			r.Add(r.Line(strconv.Itoa(i)), "upstreams[%d].name is required", i)
		case seen[u.Name]:
			r.Add(r.Line(strconv.Itoa(i), "name"), "upstreams: duplicate upstream %q", u.Name)
		}
		seen[u.Name] = true
		u.check(r, i)
	}
}

// check fills in and checks the i-th upstream.
func (u *Config) check(r confkit.Reporter, i int) {
	idx := strconv.Itoa(i)
	field := func(name string) int { return r.Line(idx, name) }
	r.Resolve(&u.CAFile)
	u.placement(r, i)
	if !confkit.OneOf(u.Type, types[:]...) {
		r.Add(field("type"), "upstreams[%d].type %q: want one of %s%s", i, u.Type, strings.Join(types[:], ", "), confkit.DidYouMean(u.Type, types[:]))
	}
	if (u.Type == "openai" || u.Type == "anthropic") && !confkit.HTTPURL(u.BaseURL) {
		r.Add(field("base_url"), "upstreams[%d].base_url %q: want an http(s) URL such as https://api.openai.com/v1", i, u.BaseURL)
	}
	u.checkAzure(r, i)
	u.checkAnthropic(r, i)
	if u.FirstByteTimeout < 0 {
		r.Add(field("first_byte_timeout"), "upstreams[%d].first_byte_timeout: must not be negative", i)
	}
	if len(u.Models) == 0 {
		r.Add(field("models"), "upstreams[%d].models: at least one model glob is required (\"*\" = any)", i)
	}
	for j, m := range u.Models {
		if _, err := path.Match(m, ""); err != nil || m == "" {
			r.Add(r.Line(idx, "models", strconv.Itoa(j)), "upstreams[%d].models: bad glob %q", i, m)
		}
	}
	if u.MaxRetries != nil && (*u.MaxRetries < 0 || *u.MaxRetries > 10) {
		r.Add(field("max_retries"), "upstreams[%d].max_retries %d: want 0 to 10", i, *u.MaxRetries)
	}
	if u.MaxIdleConns == 0 {
		u.MaxIdleConns = 512
	}
	if u.MaxIdleConns < 0 {
		r.Add(field("max_idle_conns"), "upstreams[%d].max_idle_conns: must be positive", i)
	}
	confkit.FileExists(r, field("ca_file"), "upstreams["+idx+"].ca_file", u.CAFile)
}

// placement fills in and checks where the i-th upstream stands among those
// serving a model: priority, weight, breaker.
func (u *Config) placement(r confkit.Reporter, i int) {
	idx := strconv.Itoa(i)
	if u.Weight == 0 {
		u.Weight = 1
	}
	if !r.Has(idx, "priority") {
		// Without priorities the order of the file decides, as it
		// always did: the first upstream serving a model is its
		// primary, the later ones its failover. Weights spread
		// traffic only among upstreams given the same priority.
		u.Priority = i
	}
	if u.Weight < 0 || u.Priority < 0 {
		r.Add(r.Line(idx), "upstreams[%d]: priority and weight must not be negative", i)
	}
	if u.Breaker.Failures == 0 {
		u.Breaker.Failures = defaultFailures
	}
	if u.Breaker.Cooldown == 0 {
		u.Breaker.Cooldown = confkit.Duration(defaultCooldown)
	}
	if u.Breaker.Failures < 0 || u.Breaker.Cooldown < 0 {
		r.Add(r.Line(idx, "breaker"), "upstreams[%d].breaker: failures and cooldown must be positive", i)
	}
}

func (u *Config) checkAzure(r confkit.Reporter, i int) {
	if u.Azure == nil {
		return
	}
	idx := strconv.Itoa(i)
	if u.Type != "openai" {
		r.Add(r.Line(idx, "azure"), "upstreams[%d].azure: only an openai upstream speaks Azure OpenAI", i)
	}
	for m, d := range u.Azure.Deployments {
		if d == "" || strings.ContainsAny(d, "/?#%") {
			r.Add(r.Line(idx, "azure", "deployments", m), "upstreams[%d].azure.deployments.%s: want a deployment name (no / ? # %%)", i, m)
		}
	}
}

func (u *Config) checkAnthropic(r confkit.Reporter, i int) {
	idx := strconv.Itoa(i)
	if u.Type == "anthropic" {
		if u.AnthropicVersion == "" {
			u.AnthropicVersion = "2023-06-01"
		}
		if u.DefaultMaxTokens == 0 {
			u.DefaultMaxTokens = 4096
		}
	} else if u.AnthropicVersion != "" || u.DefaultMaxTokens != 0 || u.PromptCache {
		r.Add(r.Line(idx, "type"), "upstreams[%d]: anthropic_version, default_max_tokens and prompt_cache apply to an anthropic upstream only", i)
	}
	if u.DefaultMaxTokens < 0 {
		r.Add(r.Line(idx, "default_max_tokens"), "upstreams[%d].default_max_tokens: must be positive", i)
	}
}
