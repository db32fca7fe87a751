// Package config loads and validates the gateway's three configuration files
// (gateway.yaml, agents.yaml, protocol.yaml), as docs/reference.md,
// Configuration, describes them.
//
// Loading has no side effects: it reads files and the environment and returns
// either a complete Config or every problem found, each as "file:line: message".
package config

import (
	"net/netip"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/audit/ship"
	"github.com/sacpgw/gateway/audit/siem"
	"github.com/sacpgw/gateway/internal/people"
	"github.com/sacpgw/gateway/internal/pricing"
	"github.com/sacpgw/gateway/internal/protocol"
	"github.com/sacpgw/gateway/internal/redisx"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/team"
	"github.com/sacpgw/gateway/internal/tracing"
	"github.com/sacpgw/gateway/mcp/mcpconf"
	"github.com/sacpgw/gateway/policy"
	"github.com/sacpgw/gateway/upstream"
	"github.com/sacpgw/gateway/workflow/definition"
)

// Config is the whole, validated configuration.
type Config struct {
	// Dir is the directory the files were read from.
	Dir      string
	Gateway  Gateway
	Agents   map[string]*roster.Agent
	Protocol protocol.Config
	// Registry is config/registry.yaml (empty when the file is absent).
	Registry Registry
	// Workflows is config/workflows.yaml (empty when the file is absent).
	Workflows *definition.Set
	// Teams is config/teams.yaml, by name (nil when the file is absent).
	Teams map[string]*team.Team
}

// Gateway is config/gateway.yaml: the server itself.
type Gateway struct {
	// Listen is the address to serve on. Default ":8080".
	Listen string `yaml:"listen"`
	// HealthListen, when set, also serves /healthz and /readyz (and
	// nothing else) in plain HTTP on this address, for probes that cannot
	// present a client certificate when tls.client_ca_file makes the main
	// port mTLS-only. Empty: none.
	HealthListen string `yaml:"health_listen"`
	// ShutdownTimeout bounds how long SIGTERM waits for in-flight requests. Default 30s.
	ShutdownTimeout Duration `yaml:"shutdown_timeout"`
	// Log sets the structured log output.
	Log       Log               `yaml:"log"`
	Admin     Admin             `yaml:"admin"`
	Upstreams []upstream.Config `yaml:"upstreams"`
	// Pricing is what models cost (per model name; the shipped table for
	// common models applies to the others), for spend and budgets.
	Pricing   map[string]pricing.Price `yaml:"pricing"`
	TLS       TLS                      `yaml:"tls"`
	Policy    policy.Config            `yaml:"policy"`
	Approval  Approval                 `yaml:"approval"`
	Tracing   tracing.Config           `yaml:"tracing"`
	Audit     Audit                    `yaml:"audit"`
	State     State                    `yaml:"state"`
	Messaging Messaging                `yaml:"messaging"`
	// HTTP bounds the connections clients hold open.
	HTTP HTTP `yaml:"http"`
	// Responses is the stored state of the Responses API
	// (previous_response_id).
	Responses Responses `yaml:"responses"`
	// MCP are the Model Context Protocol servers agents reach through the
	// gateway, at /mcp/{name} (docs/mcp.md).
	MCP mcpconf.Settings `yaml:"mcp"`
	// People is how people sign in to the pages (docs/people.md).
	People people.Settings `yaml:"people"`
}

// The mcp section is the MCP door's (mcp/mcpconf); these names keep the
// composite's spelling for the code that builds a Config's servers.
type (
	MCPServer = mcpconf.Server
	MCPMember = mcpconf.Member
	Env       = mcpconf.Env
)

// Responses configures the conversations the gateway keeps so that a
// Responses API request may continue an earlier one (previous_response_id).
type Responses struct {
	// StoreTTL is how long an answered response can be continued. Default
	// 24h; a request's store: false keeps nothing.
	StoreTTL Duration `yaml:"store_ttl"`
	// MaxStoredSize bounds one stored conversation; a longer one is not
	// kept (continuing it is refused, never truncated). Default 1MB.
	MaxStoredSize Size `yaml:"max_stored_size"`
}

// HTTP bounds what a client connection may hold: slow headers and bodies,
// readers that take nothing, and the traffic of clients that have not
// authenticated (limited per source before any work: docs/security.md,
// "Flooding, connections and the state backend").
type HTTP struct {
	// ReadHeaderTimeout bounds the wait for a request's headers. Default 5s.
	ReadHeaderTimeout Duration `yaml:"read_header_timeout"`
	// BodyIdleTimeout cuts a request body that sends no byte for this long.
	// Default 15s.
	BodyIdleTimeout Duration `yaml:"body_idle_timeout"`
	// WriteIdleTimeout cuts a client that accepts no byte of the answer for
	// this long (streams included: each write extends it). Default 60s.
	WriteIdleTimeout Duration `yaml:"write_idle_timeout"`
	// IdleTimeout closes a keep-alive connection without requests. Default 120s.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// Unauthenticated limits the traffic of sources that have not
	// authenticated.
	Unauthenticated Unauthenticated `yaml:"unauthenticated"`
}

// Unauthenticated bounds what a source that has not authenticated can cost:
// connections, refused requests, and audit entries.
type Unauthenticated struct {
	// ConnsPerSource caps the connections one source address holds before
	// one of them authenticates. Default 64.
	ConnsPerSource int `yaml:"conns_per_source"`
	// RateLimit bounds the failed authentications of one source address;
	// past it the source gets 429 before any work. Default 10/second.
	RateLimit Rate `yaml:"rate_limit"`
	// AuditWindow: the first failure of a source in a window is audited at
	// once, the repeats as one counted entry per source per window. Default 60s.
	AuditWindow Duration `yaml:"audit_window"`
}

// Messaging configures agent-to-agent traffic (POST /relay/messages).
type Messaging struct {
	// Timeout bounds a REQUEST's round trip when its metadata.timeout_ms is
	// absent, and each delivery attempt of a queued message. Default 10s.
	Timeout Duration `yaml:"timeout"`
	// MaxTimeout caps metadata.timeout_ms. Default 60s.
	MaxTimeout Duration `yaml:"max_timeout"`
	// RetryBackoff is the wait before the second delivery attempt of a
	// queued message; it doubles after each failure. Attempts in all are
	// protocol limits.max_retry_attempts. Default 200ms.
	RetryBackoff Duration `yaml:"retry_backoff"`
	// Workers deliver queued messages. Default 4.
	Workers int `yaml:"workers"`
	// QueueCapacity bounds queued deliveries; over it a message is refused
	// (503) rather than dropped later. Default 10000.
	QueueCapacity int `yaml:"queue_capacity"`
	// HistoryRetention keeps a workflow's history this long after its last
	// message. Default 168h.
	HistoryRetention Duration `yaml:"history_retention"`
	// MaxClockSkew refuses envelopes whose timestamp is further than this
	// from the gateway's clock. Default 5m.
	MaxClockSkew Duration `yaml:"max_clock_skew"`
	// TLS is how the gateway connects to https endpoints.
	TLS MessagingTLS `yaml:"tls"`
	// AllowedNetworks are CIDRs that outbound calls (agent endpoints,
	// webhooks, spawned agents) may reach although they are loopback,
	// link-local or private. Empty: only public addresses.
	AllowedNetworks []string `yaml:"allowed_networks"`
	// AllowedPrefixes is AllowedNetworks parsed; set by Load.
	AllowedPrefixes []netip.Prefix `yaml:"-"`
}

// MessagingTLS authenticates the gateway to the agents' endpoints and them
// to it (the agent communication patterns have agents authenticate via mTLS;
// docs/agent-messaging.md, Configuration).
type MessagingTLS struct {
	// CAFile verifies the endpoints' certificates. Empty: system roots.
	CAFile string `yaml:"ca_file"`
	// CertFile and KeyFile are the client certificate the gateway
	// presents (re-read on each new connection, so rotation needs no
	// restart). Empty: none.
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// Log configures log/slog output.
type Log struct {
	// Level is debug, info, warn or error. Default info.
	Level string `yaml:"level"`
	// Format is json or text. Default json.
	Format string `yaml:"format"`
}

// Admin holds the hashes of the operators' and reviewers' tokens.
type Admin struct {
	TokenSHA256 string     `yaml:"token_sha256"`
	Reviewers   []Reviewer `yaml:"reviewers"`
}

// ReviewerNames are the reviewers' names, in the file's order.
func (a Admin) ReviewerNames() []string {
	names := make([]string, 0, len(a.Reviewers))
	for _, r := range a.Reviewers {
		names = append(names, r.Name)
	}
	return names
}

// Reviewer is a person who may decide escalations.
type Reviewer struct {
	Name        string `yaml:"name"`
	TokenSHA256 string `yaml:"token_sha256"`
}

// TLS configures TLS termination.
type TLS struct {
	CertFile     string `yaml:"cert_file"`
	KeyFile      string `yaml:"key_file"`
	ClientCAFile string `yaml:"client_ca_file"`
	// MinVersion is "1.2" or "1.3". Default "1.3".
	MinVersion string `yaml:"min_version"`
}

// Approval configures the approval protocol (docs/approval.md).
type Approval struct {
	// CatalogueDir holds the specification catalogue (Markdown files with an
	// id in front matter). Default "specs".
	CatalogueDir string `yaml:"catalogue_dir"`
	// BaseURL is the gateway's external URL, for human_review_url. Empty:
	// the review URL is a path ("/review/{id}").
	BaseURL string `yaml:"base_url"`
	// Webhook receives a Slack-compatible notification per escalation. Empty: none.
	Webhook string `yaml:"webhook"`
	// RateLimit bounds /agent/request per agent. Default 60/minute, the
	// approval protocol's limit (docs/approval.md, Limits).
	RateLimit Rate `yaml:"rate_limit"`
}

// Audit is gateway.yaml's audit: the trail's own settings (audit.Settings,
// which the audit package owns and checks) and the two ways the trail
// leaves the machine, whose packages import audit and so cannot be fields
// of its settings.
type Audit struct {
	audit.Settings `yaml:",inline"`
	// OTLP sends every entry to a SIEM's OpenTelemetry collector as well
	// (audit/siem). Absent: nothing is sent.
	OTLP *siem.Config `yaml:"otlp"`
	// Ship uploads closed segments and checkpoints to object storage
	// (docs/compliance.md). Nil: not shipped.
	Ship *ship.Config `yaml:"ship"`
}

// State selects where rate limits and approval states live.
type State struct {
	// Backend is memory or redis. Default memory.
	Backend string `yaml:"backend"`
	// RedisURL is one Redis node; Redis says the same and more (Sentinel,
	// Cluster, TLS, ACL). Give one of the two with backend redis.
	RedisURL string           `yaml:"redis_url"`
	Redis    *redisx.Settings `yaml:"redis"`
	// OnFailure is closed (503 while Redis is down) or local (fall back to
	// in-memory limits). Default local.
	OnFailure string `yaml:"on_failure"`
	// Timeout is the deadline of every call to the state backend; a slower
	// backend counts as down. Default 50ms.
	Timeout Duration `yaml:"timeout"`
	// Dir keeps what the memory backend must not lose at a restart (the
	// agents spawned at run time). Default data/state, relative to the
	// config file like every path.
	Dir string `yaml:"dir"`
}

// RedisSettings is where the redis backend connects: the redis block, or
// the one node of redis_url.
func (s State) RedisSettings() redisx.Settings {
	if s.Redis != nil {
		return *s.Redis
	}
	return redisx.Settings{URL: s.RedisURL}
}

// Registry is config/registry.yaml: compact SACP's verb and tool library,
// which compact SACP plans are validated against.
type Registry struct {
	Verbs []Verb `yaml:"verbs"`
	Tools []Tool `yaml:"tools"`
	// Embeddings, if set, ranks free-text registry queries by the cosine
	// similarity of embeddings made through this upstream and model (a
	// governed embeddings call); unset: a lexical ranking (BM25).
	Embeddings *RegistryEmbeddings `yaml:"embeddings"`
	// Spawn configures the agents registered at run time.
	Spawn Spawn `yaml:"spawn"`
}

// Spawn configures spawned agents.
type Spawn struct {
	// TTL: a spawned agent that has not authenticated for this long is
	// retired. Default 168h (7 days).
	TTL Duration `yaml:"ttl"`
}

// RegistryEmbeddings names the embeddings model of semantic selection.
type RegistryEmbeddings struct {
	Upstream string `yaml:"upstream"`
	Model    string `yaml:"model"`
	// RateLimit and TokenLimit bound the gateway's own embeddings calls for
	// agents' profiles (it calls as "gateway:registry", on the trail by
	// that name). Default 600/minute and 2000000/hour.
	RateLimit  Rate `yaml:"rate_limit"`
	TokenLimit Rate `yaml:"token_limit"`
}

// Verb is a compact SACP verb definition. An input is "name" or "name:type"
// (string, number, integer, boolean, array, object, any); typed inputs are
// checked in plan params.
type Verb struct {
	Name string `yaml:"name"`
	// Aliases are other names of the verb in plans (compact SACP's
	// abbreviations: "s" for search).
	Aliases     []string `yaml:"aliases"`
	Description string   `yaml:"description"`
	Inputs      []string `yaml:"inputs"`
	Outputs     string   `yaml:"outputs"`
}

// Tool is a compact SACP tool definition.
type Tool struct {
	ID             string   `yaml:"id"`
	Description    string   `yaml:"description"`
	Interface      string   `yaml:"interface"`
	SupportedVerbs []string `yaml:"supported_verbs"`
}
