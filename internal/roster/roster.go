// Package roster is config/agents.yaml: the entry of one agent (its
// credentials, limits, protocol, registry fields and the messages it may
// send), its defaults and the checks of the file on its own. It sits below
// every part that serves an agent, so identity, the front doors and the
// policy read one Agent type without importing the loader; the loader
// (internal/config) checks the entries against the other files.
package roster

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"github.com/sacpgw/gateway/internal/confkit"
)

// Agent is one entry of config/agents.yaml.
type Agent struct {
	// ID is the key of the entry in agents.yaml.
	ID   string `yaml:"-"`
	Type string `yaml:"type"`
	// Team is the team the agent belongs to: its limits and budgets apply
	// on top of the agent's, and its reviewers decide the agent's
	// escalations. Empty: no team.
	Team string `yaml:"team"`
	// Roles are the roles the agent may claim in a message (sender_type,
	// SAM sender.role) besides its Type: SAM roles such as initiator or
	// validator belong to a conversation, not to the agent. Empty: Type only.
	Roles        []string `yaml:"roles"`
	Capabilities []string `yaml:"capabilities"`
	// RateLimit bounds requests. Zero: unlimited.
	RateLimit confkit.Rate `yaml:"rate_limit"`
	// Budget bounds the agent's spend on models ("25USD/day"), reserved
	// and settled like tokens. Zero: unlimited.
	Budget confkit.Money `yaml:"budget"`
	// TokenLimit bounds prompt+completion tokens. Zero: unlimited.
	TokenLimit confkit.Rate `yaml:"token_limit"`
	// MaxRequestSize bounds the request body. Default 1MB.
	MaxRequestSize confkit.Size `yaml:"max_request_size"`
	AllowedTargets []string     `yaml:"allowed_targets"`
	// TokenSHA256 is the lowercase hex SHA-256 of the agent's bearer token.
	TokenSHA256 string `yaml:"token_sha256"`
	// ResponseFormat is json_standard, sacp_compact or none. Default none.
	ResponseFormat      string `yaml:"response_format"`
	UseStandardProtocol bool   `yaml:"use_standard_protocol"`
	// DataSchemaFile is a JSON Schema for SACP "data", relative to the config dir.
	DataSchemaFile string `yaml:"data_schema_file"`
	// Models is an allow-list of model globs. Empty: any routed model.
	Models []string `yaml:"models"`
	// CompletionEstimate is the completion tokens a token budget reserves
	// for a request that sets no max_tokens. Default 1024.
	CompletionEstimate int    `yaml:"completion_estimate"`
	SPIFFEID           string `yaml:"spiffe_id"`

	// Profile is what the agent can do, for POST /registry/query and the
	// sacp_compact prompt; its keys are the entry's own.
	Profile `yaml:",inline"`
	// Endpoint is the http(s) URL where the agent receives messages
	// (POST /relay/messages relays to it). Empty: the agent receives none.
	Endpoint string `yaml:"endpoint"`
	// SpawnedBy, set only on an agent registered at run time (never read
	// from agents.yaml), is the agent that spawned it: the one it may send
	// messages to.
	SpawnedBy string `yaml:"-"`
	// Owns are the Global Context entities the agent may write in the
	// relay threads it takes part in (payload.context.entities), as a
	// workflow node's owns. None: it writes none.
	Owns []string `yaml:"owns"`
	// Messages are the agent-to-agent messages this agent may send (RBAC).
	// None: it may send none.
	Messages []MessageRule `yaml:"messages"`
	// The capability registry's optional fields: a precomputed embedding
	// of the agent (used as given for semantic selection; its dimension
	// must match the configured model's), a confidence the operator gives
	// the agent (0..1), its version and where it runs.
	Embedding       []float64 `yaml:"embedding"`
	ConfidenceScore *float64  `yaml:"confidence_score"`
	Version         string    `yaml:"version"`
	AgentLocation   string    `yaml:"agent_location"`
	// CallbackURL, if set, receives the agent's approval request events
	// (POST, JSON), checked by the egress rules like an endpoint.
	CallbackURL string `yaml:"callback_url"`
	// MCPTools are, per MCP server (a name of gateway.yaml's mcp.servers),
	// globs (path.Match) of the tools the agent may use: {files: ["read_*"]}.
	// A server not listed is one the agent may not connect to; an empty
	// list connects it without tools (resources and prompts, as the policy
	// allows).
	MCPTools map[string][]string `yaml:"mcp_tools"`
	// A2A, when set, is the agent's Agent2Agent endpoint: the gateway
	// reads its Agent Card and serves it at /a2a/{id} (docs/a2a.md).
	A2A *A2A `yaml:"a2a"`

	// TokenHash is TokenSHA256 decoded; set by Check.
	TokenHash [sha256.Size]byte `yaml:"-"`
	// DataSchema is the content of DataSchemaFile; set by Check.
	DataSchema []byte `yaml:"-"`
}

// Profile is compact SACP's registry fields of an agent
// (docs/agent-messaging.md, Configuration): what it can do. agents.yaml,
// the registry's entries and GET /agent/capabilities name them alike, so
// one type serves all three.
type Profile struct {
	SupportedVerbs []string `yaml:"supported_verbs" json:"supported_verbs"`
	SupportedTools []string `yaml:"supported_tools" json:"supported_tools"`
	Inputs         []string `yaml:"inputs" json:"inputs"`
	Outputs        []string `yaml:"outputs" json:"outputs"`
	Description    string   `yaml:"description" json:"description"`
	Tags           []string `yaml:"tags" json:"tags"`
}

// Shown is p as an answer shows it: a list left unset is empty ([]), not
// null, so agents read one shape.
func (p Profile) Shown() Profile {
	return Profile{SupportedVerbs: nonNil(p.SupportedVerbs), SupportedTools: nonNil(p.SupportedTools),
		Inputs: nonNil(p.Inputs), Outputs: nonNil(p.Outputs), Description: p.Description, Tags: nonNil(p.Tags)}
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// MessageRule allows an agent to send the listed actions to the listed
// recipients through POST /relay/messages.
type MessageRule struct {
	// To are recipient agent ids; "*" is any agent, "broadcast" a message
	// without a recipient.
	To []string `yaml:"to" json:"to"`
	// Actions are the envelope actions allowed; "*" is any action.
	Actions []string `yaml:"actions" json:"actions"`
}

// A2A is where an agent speaks the Agent2Agent protocol.
type A2A struct {
	// URL is the agent's A2A base URL, http or https: its card is at
	// <url>/.well-known/agent-card.json. Callers never see it.
	URL string `yaml:"url"`
	// HumanInput sends the agent's questions to a person: a task of this
	// agent that enters input-required or auth-required waits on the
	// review page, and the person's answer is its next message. False:
	// the caller answers, as A2A has it.
	HumanInput bool `yaml:"human_input"`
}

// DefaultModel is the model a workflow node of this agent calls when it
// names none: the first entry of models that is a name, not a glob.
func (a *Agent) DefaultModel() string {
	for _, m := range a.Models {
		if !strings.ContainsAny(m, "*?[\\") {
			return m
		}
	}
	return ""
}

// StandardProtocol reports whether the agent gets the SACP JSON protocol.
func (a *Agent) StandardProtocol() bool {
	return a.ResponseFormat == "json_standard" || a.UseStandardProtocol
}

// HashToken returns the SHA-256 of a bearer token, as stored in the config.
func HashToken(token string) [sha256.Size]byte { return sha256.Sum256([]byte(token)) }

// HashTokenHex is HashToken in lowercase hex.
func HashTokenHex(token string) string {
	h := HashToken(token)
	return hex.EncodeToString(h[:])
}
