package roster

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"os"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/sacpgw/gateway/internal/confkit"
	"github.com/sacpgw/gateway/internal/names"
)

var (
	targetTypes     = [...]string{"architecture", "design", "code", "test", "docs"}
	responseFormats = [...]string{"none", "json_standard", "sacp_compact"}
)

// TargetTypes lists the approval protocol's target types; an agent's
// allowed_targets may also say "all".
func TargetTypes() []string { return slices.Clone(targetTypes[:]) }

// ParseHash reads a token_sha256: 64 hex digits, either case.
func ParseHash(s string) ([32]byte, error) {
	var h [32]byte
	if len(s) != 64 {
		return h, fmt.Errorf("want 64 hex digits (sha256 of the token), got %d characters", len(s))
	}
	if _, err := hex.Decode(h[:], []byte(strings.ToLower(s))); err != nil {
		return h, fmt.Errorf("want 64 hex digits (sha256 of the token)")
	}
	return h, nil
}

// Check fills in the agents' ids and defaults, reads their data schemas and
// reports what is wrong with the file on its own through r, whose keys are
// below agents. An empty entry is reported and dropped. What the entries
// name in the other files (models, verbs, MCP servers) the loader checks.
func Check(r confkit.Reporter, agents map[string]*Agent) {
	if len(agents) == 0 {
		r.Add(r.Line(), "agents: at least one agent is required")
		return
	}
	byHash := map[[32]byte]string{}
	bySPIFFE := map[string]string{}
	for _, id := range IDs(agents) {
		a := agents[id]
		if a == nil {
			r.Add(r.Line(id), "agent %q: empty entry", id)
			delete(agents, id)
			continue
		}
		a.ID = id
		if err := names.Check(id); err != nil {
			r.Add(r.Line(id), "agents: %v", err)
		}
		a.checkRoles(r)
		a.checkIdentity(r, byHash, bySPIFFE)
		a.checkProtocol(r)
		a.checkDataSchema(r)
	}
	// Once every entry is in (the empty ones dropped): what an agent
	// names of the others.
	var embedding *Agent // the first with a precomputed embedding
	for _, id := range IDs(agents) {
		a := agents[id]
		a.checkLinks(r)
		embedding = a.checkEmbedding(r, embedding)
		a.checkMessages(r, agents)
	}
}

// IDs are the agents' ids in order.
func IDs(agents map[string]*Agent) []string {
	ids := make([]string, 0, len(agents))
	for id := range agents {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// at is the line of a key of the agent's entry.
func (a *Agent) at(r confkit.Reporter, p ...string) int {
	return r.Line(append([]string{a.ID}, p...)...)
}

// checkRoles: each role a name an envelope can carry (what a role is
// checked against must be one), none twice.
func (a *Agent) checkRoles(r confkit.Reporter) {
	seen := map[string]bool{}
	for i, role := range a.Roles {
		switch {
		case strings.TrimSpace(role) == "":
			r.Add(a.at(r, "roles", strconv.Itoa(i)), "agent %q: roles: an empty role", a.ID)
		case seen[role]:
			r.Add(a.at(r, "roles", strconv.Itoa(i)), "agent %q: roles: duplicate role %q", a.ID, role)
		}
		seen[role] = true
	}
}

// checkIdentity: a token or a SPIFFE id, neither shared with another agent.
func (a *Agent) checkIdentity(r confkit.Reporter, byHash map[[32]byte]string, bySPIFFE map[string]string) {
	id := a.ID
	if a.TokenSHA256 == "" && a.SPIFFEID == "" {
		r.Add(a.at(r), "agent %q: token_sha256 or spiffe_id is required", id)
	}
	if a.TokenSHA256 != "" {
		h, err := ParseHash(a.TokenSHA256)
		if err != nil {
			r.Add(a.at(r, "token_sha256"), "agent %q: token_sha256: %v", id, err)
		} else if other, dup := byHash[h]; dup {
			r.Add(a.at(r, "token_sha256"), "agent %q: token_sha256 is also agent %q's: each agent needs its own token", id, other)
		} else {
			byHash[h] = id
			a.TokenHash = h
		}
	}
	if a.SPIFFEID != "" {
		if !strings.HasPrefix(a.SPIFFEID, "spiffe://") {
			r.Add(a.at(r, "spiffe_id"), "agent %q: spiffe_id %q: want spiffe://trust-domain/path", id, a.SPIFFEID)
		} else if other, dup := bySPIFFE[a.SPIFFEID]; dup {
			r.Add(a.at(r, "spiffe_id"), "agent %q: spiffe_id is also agent %q's", id, other)
		}
		bySPIFFE[a.SPIFFEID] = id
	}
}

// checkProtocol: the response format, the limits and what the agent may
// ask for.
func (a *Agent) checkProtocol(r confkit.Reporter) {
	id := a.ID
	if a.ResponseFormat == "" {
		a.ResponseFormat = "none"
		if a.UseStandardProtocol {
			a.ResponseFormat = "json_standard"
		}
	}
	if !confkit.OneOf(a.ResponseFormat, responseFormats[:]...) {
		r.Add(a.at(r, "response_format"), "agent %q: response_format %q: want one of %s%s", id, a.ResponseFormat, strings.Join(responseFormats[:], ", "), confkit.DidYouMean(a.ResponseFormat, responseFormats[:]))
	} else if a.UseStandardProtocol && a.ResponseFormat != "json_standard" {
		r.Add(a.at(r, "use_standard_protocol"), "agent %q: use_standard_protocol: true contradicts response_format %q", id, a.ResponseFormat)
	}
	if a.MaxRequestSize == 0 {
		a.MaxRequestSize = 1 << 20
	}
	if a.CompletionEstimate == 0 {
		a.CompletionEstimate = 1024
	}
	if a.CompletionEstimate < 0 {
		r.Add(a.at(r, "completion_estimate"), "agent %q: completion_estimate: must be positive", id)
	}
	for i, t := range a.AllowedTargets {
		if targets := append(TargetTypes(), "all"); !confkit.OneOf(t, targets...) {
			r.Add(a.at(r, "allowed_targets", strconv.Itoa(i)), "agent %q: allowed_targets: unknown target %q (want %s)%s", id, t, strings.Join(targets, ", "), confkit.DidYouMean(t, targets))
		}
	}
	for i, m := range a.Models {
		if _, err := path.Match(m, ""); err != nil || m == "" {
			r.Add(a.at(r, "models", strconv.Itoa(i)), "agent %q: models: bad glob %q", id, m)
		}
	}
}

// checkDataSchema reads the agent's data schema, which must be JSON.
func (a *Agent) checkDataSchema(r confkit.Reporter) {
	if a.DataSchemaFile == "" {
		return
	}
	p := r.Shown(a.DataSchemaFile) // as the operator wrote it, beside the config dir
	r.Resolve(&a.DataSchemaFile)
	raw, err := os.ReadFile(a.DataSchemaFile)
	switch {
	case err != nil:
		r.Add(a.at(r, "data_schema_file"), "agent %q: data_schema_file %s: %v", a.ID, p, errors.Unwrap(err))
	case !json.Valid(raw):
		r.Add(a.at(r, "data_schema_file"), "agent %q: data_schema_file %s: not valid JSON", a.ID, p)
	default:
		a.DataSchema = raw
	}
}

// checkLinks: where the agent receives messages and events, and the
// confidence the operator gives it.
func (a *Agent) checkLinks(r confkit.Reporter) {
	if a.Endpoint != "" && !confkit.HTTPURL(a.Endpoint) {
		r.Add(a.at(r, "endpoint"), "agent %q: endpoint %q: want an http or https URL", a.ID, a.Endpoint)
	}
	if a.CallbackURL != "" && !confkit.HTTPURL(a.CallbackURL) {
		r.Add(a.at(r, "callback_url"), "agent %q: callback_url %q: want an http or https URL", a.ID, a.CallbackURL)
	}
	a.checkA2A(r)
	if c := a.ConfidenceScore; c != nil && (*c < 0 || *c > 1 || math.IsNaN(*c)) {
		r.Add(a.at(r, "confidence_score"), "agent %q: confidence_score %v: want a number from 0 to 1", a.ID, *c)
	}
}

// checkA2A: an A2A agent's base URL is an http(s) URL without
// credentials, query or fragment (the card's path is appended to it).
func (a *Agent) checkA2A(r confkit.Reporter) {
	if a.A2A == nil {
		return
	}
	u, err := url.Parse(a.A2A.URL)
	switch {
	case a.A2A.URL == "" || !confkit.HTTPURL(a.A2A.URL) || err != nil:
		// Not quoted: a URL may carry a credential.
		r.Add(a.at(r, "a2a", "url"), "agent %q: a2a.url: want an http or https URL", a.ID)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		r.Add(a.at(r, "a2a", "url"), "agent %q: a2a.url: want a base URL without credentials, query or fragment", a.ID)
	}
}

// checkEmbedding: finite numbers, of the dimension of first's (the first
// agent with an embedding, nil before it); it returns the new first.
func (a *Agent) checkEmbedding(r confkit.Reporter, first *Agent) *Agent {
	if len(a.Embedding) == 0 {
		return first
	}
	if first == nil {
		first = a
	} else if len(a.Embedding) != len(first.Embedding) {
		r.Add(a.at(r, "embedding"), "agent %q: embedding has %d dimensions, agent %q's has %d: they must be of one model", a.ID, len(a.Embedding), first.ID, len(first.Embedding))
	}
	for _, x := range a.Embedding {
		if math.IsNaN(x) || math.IsInf(x, 0) {
			r.Add(a.at(r, "embedding"), "agent %q: embedding holds a value that is not a finite number", a.ID)
			break
		}
	}
	return first
}

// checkMessages: each rule names recipients that exist and actions.
func (a *Agent) checkMessages(r confkit.Reporter, agents map[string]*Agent) {
	id := a.ID
	for i, m := range a.Messages {
		idx := strconv.Itoa(i)
		if len(m.To) == 0 {
			r.Add(a.at(r, "messages", idx, "actions"), "agent %q: messages[%d].to is required", id, i)
		}
		if len(m.Actions) == 0 {
			r.Add(a.at(r, "messages", idx, "to"), "agent %q: messages[%d].actions is required", id, i)
		}
		for j, to := range m.To {
			if to != "*" && to != "broadcast" && agents[to] == nil {
				r.Add(a.at(r, "messages", idx, "to", strconv.Itoa(j)), "agent %q: messages[%d].to: unknown agent %q (want an agent id, \"*\" or \"broadcast\")%s", id, i, to, confkit.DidYouMean(to, append(IDs(agents), "broadcast")))
			}
		}
		for j, act := range m.Actions {
			if act != "*" && !names.Symbol(act) {
				r.Add(a.at(r, "messages", idx, "actions", strconv.Itoa(j)), "agent %q: messages[%d].actions: bad action %q", id, i, act)
			}
		}
	}
}
