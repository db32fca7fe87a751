// Package mcpconf is gateway.yaml's mcp section: the MCP servers agents
// reach through the gateway, their defaults and their checks. The MCP door
// owns it; the loader (internal/config) hands it its section and composes
// it, as it does every part's.
package mcpconf

import (
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/sacpgw/gateway/internal/confkit"
)

// Settings configures the MCP front door.
type Settings struct {
	// Servers are the upstream MCP servers. None: /mcp/{name} serves nothing.
	Servers []Server `yaml:"servers"`
	// TokenKey encrypts the people's delegated tokens at rest (in the
	// state backend): 32 random bytes in base64, written as ${VAR}.
	// Required when a server has oauth.delegated.
	TokenKey string `yaml:"token_key"`
	// PreviousTokenKey still decrypts tokens stored under the token_key
	// before (rotation); nothing is encrypted with it.
	PreviousTokenKey string `yaml:"previous_token_key"`
}

// Server is one upstream MCP server: one speaking the Streamable HTTP
// transport (URL) or a program the gateway runs and speaks stdio to
// (Command).
type Server struct {
	// Name is the server's name in /mcp/{name}, in agents' mcp_tools and in
	// the audit trail: 1-64 of a-z, 0-9, '_' and '-', unique.
	Name string `yaml:"name"`
	// URL is the server's MCP endpoint, http or https, without credentials
	// (they go in Headers).
	URL string `yaml:"url"`
	// Command, instead of URL, is a stdio server: the program and its
	// arguments, run without a shell, one process per session.
	Command []string `yaml:"command"`
	// Env is the stdio server's environment besides PATH (its credentials,
	// ${VAR} from the gateway's): it inherits nothing else of the gateway's.
	Env Env `yaml:"env"`
	// Dir is the stdio server's working directory. Default: the gateway's.
	Dir string `yaml:"dir"`
	// MaxMemory bounds a stdio server process's address space
	// (RLIMIT_AS). Default 4GB.
	MaxMemory confkit.Size `yaml:"max_memory"`
	// Servers, instead of URL or Command, make a virtual server: one
	// endpoint combining the tools of these servers, each under its
	// prefix, each call governed as a call of its own server.
	Servers []Member `yaml:"servers"`
	// Headers are added to every request the gateway sends the server: the
	// credentials the gateway holds for it. Agents never see them; they are
	// never logged, and config check --explain shows their names only.
	Headers Secrets `yaml:"headers"`
	// Timeout bounds every call to the server: a request's whole answer
	// (a stream's too), a stream's response headers. Default 30s.
	Timeout confkit.Duration `yaml:"timeout"`
	// ToolLimits bound, per agent, the calls of one tool ("10/hour"), on
	// top of the agent's rate_limit. None: rate_limit alone.
	ToolLimits map[string]confkit.Rate `yaml:"tool_limits"`
	// Hold, when set, holds an escalated tools/call open until a person
	// decides or this long has passed (then the call fails; an approval
	// after lets the same call through again, as without hold), sending
	// progress while it waits. None: an escalated call fails at once.
	Hold confkit.Duration `yaml:"hold"`
	// ToolHold is Hold per tool, over the server's ("0s": not held).
	ToolHold map[string]confkit.Duration `yaml:"tool_hold"`
	// Pins are the SHA-256 of tools' approved definitions (as the review
	// page and the log show them), by tool: another definition served is
	// withheld until a person approves it. A tool without a pin is pinned
	// as first seen.
	Pins map[string]string `yaml:"pins"`
	// OAuth, on a Streamable HTTP server, is how the gateway obtains the
	// bearer token it sends the server. Nil: Headers alone.
	OAuth *OAuth `yaml:"oauth"`
}

// OAuth is a server's oauth: one of its two kinds.
type OAuth struct {
	// ClientCredentials: one token of the gateway's own for every call.
	ClientCredentials *ClientCredentials `yaml:"client_credentials"`
	// Delegated: each person's own token, obtained once through the
	// server's authorization flow; a call made on nobody's behalf, or for
	// a person who has not connected, is refused.
	Delegated *Delegated `yaml:"delegated"`
}

// ClientCredentials is the OAuth 2.0 client credentials grant.
type ClientCredentials struct {
	// TokenURL is the authorization server's token endpoint: https (http
	// only on a loopback address).
	TokenURL string `yaml:"token_url"`
	// ClientID and ClientSecret are the gateway's registration there
	// (write the secret as ${VAR}).
	ClientID     string   `yaml:"client_id"`
	ClientSecret string   `yaml:"client_secret"`
	Scopes       []string `yaml:"scopes"`
	// Resource, when set, asks for a token for this resource (RFC 8707).
	Resource string `yaml:"resource"`
}

// Delegated is a person's authorization code grant (with PKCE) at the
// server's authorization server.
type Delegated struct {
	// AuthorizationURL and TokenURL are the authorization server's
	// endpoints. Empty: discovered from the server's protected resource
	// metadata (RFC 9728) and its authorization server's metadata
	// (RFC 8414).
	AuthorizationURL string `yaml:"authorization_url"`
	TokenURL         string `yaml:"token_url"`
	// ClientID is the gateway's registration; ClientSecret is empty for a
	// public client.
	ClientID     string   `yaml:"client_id"`
	ClientSecret string   `yaml:"client_secret"`
	Scopes       []string `yaml:"scopes"`
}

// Secrets maps names to credentials (an MCP server's headers). Printed
// (config check --explain, a %v in a log line), it shows the names only.
type Secrets map[string]string

// Member is one server of a virtual MCP server: written as its name
// alone or as {name, prefix}.
type Member struct {
	// Name is a configured server (not a virtual one).
	Name string `yaml:"name"`
	// Prefix goes before its tools' names on the virtual server. Default:
	// the name and "_".
	Prefix string `yaml:"prefix"`
}

// Env is a stdio MCP server's environment: names to values that may be
// credentials. Printed, it shows the names only.
type Env map[string]string

func (e Env) String() string { return Secrets(e).String() }

func (s Secrets) String() string {
	names := slices.Sorted(maps.Keys(s))
	for i, n := range names {
		names[i] = n + ": [set]"
	}
	return "{" + strings.Join(names, ", ") + "}"
}

// Virtual reports whether s combines other servers.
func (s *Server) Virtual() bool { return s.Servers != nil }

// Names are the servers' names: the real ones (which agents' mcp_tools may
// name), then whether each name is a virtual server.
func (m *Settings) Names() (real []string, virtual map[string]bool) {
	virtual = map[string]bool{}
	for _, s := range m.Servers {
		if s.Virtual() {
			virtual[s.Name] = true
			continue
		}
		real = append(real, s.Name)
	}
	return real, virtual
}

// maxHold bounds how long a held call may wait for a person: a client
// holds a request open that long.
const maxHold = time.Hour

// defaultStdioMemory bounds a stdio server's address space by default:
// generous, as runtimes such as Node reserve far more than they use.
const defaultStdioMemory = 4 << 30

// defaultTimeout bounds a call to a server by default.
const defaultTimeout = confkit.Duration(30 * time.Second)
