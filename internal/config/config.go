// Package config loads and validates the gateway's three configuration files
// (gateway.yaml, agents.yaml, protocol.yaml), as docs/reference.md,
// Configuration, describes them.
//
// Loading has no side effects: it reads files and the environment and returns
// either a complete Config or every problem found, each as "file:line: message".
package config

import (
	"github.com/sacpgw/gateway/approval/approvalconf"
	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/audit/ship"
	"github.com/sacpgw/gateway/audit/siem"
	"github.com/sacpgw/gateway/dialect/responses"
	"github.com/sacpgw/gateway/internal/mcpauth"
	"github.com/sacpgw/gateway/internal/people"
	"github.com/sacpgw/gateway/internal/pricing"
	"github.com/sacpgw/gateway/internal/protocol"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/stateconf"
	"github.com/sacpgw/gateway/internal/team"
	"github.com/sacpgw/gateway/internal/tracing"
	"github.com/sacpgw/gateway/mcp/mcpconf"
	"github.com/sacpgw/gateway/messaging/relayconf"
	"github.com/sacpgw/gateway/policy"
	"github.com/sacpgw/gateway/server/listenconf"
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
	TLS       listenconf.TLS           `yaml:"tls"`
	Policy    policy.Config            `yaml:"policy"`
	Approval  approvalconf.Settings    `yaml:"approval"`
	Tracing   tracing.Config           `yaml:"tracing"`
	Audit     Audit                    `yaml:"audit"`
	State     stateconf.Settings       `yaml:"state"`
	Messaging relayconf.Settings       `yaml:"messaging"`
	// HTTP bounds the connections clients hold open.
	HTTP listenconf.HTTP `yaml:"http"`
	// Responses is the stored state of the Responses API
	// (previous_response_id).
	Responses responses.Settings `yaml:"responses"`
	// MCP are the Model Context Protocol servers agents reach through the
	// gateway, at /mcp/{name} (docs/mcp.md).
	MCP mcpconf.Settings `yaml:"mcp"`
	// People is how people sign in to the pages (docs/people.md).
	People people.Settings `yaml:"people"`
	// MCPClients is the authorization server for people's MCP clients
	// (docs/mcp.md). Nil: /mcp/{server} takes agents' credentials only.
	MCPClients *mcpauth.Settings `yaml:"mcp_clients"`
}

// The mcp section is the MCP door's (mcp/mcpconf); these names keep the
// composite's spelling for the code that builds a Config's servers.
type (
	MCPServer = mcpconf.Server
	MCPMember = mcpconf.Member
	Env       = mcpconf.Env
)

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
