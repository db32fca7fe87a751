// Package archtest holds the test that keeps the import flow of
// docs/architecture.md true: every package has a layer, imports go down
// (or sideways within a layer where the table allows), and the three front
// doors import none of each other, and the HTTP shell imports no door.
package archtest

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/sacpgw/gateway/"

// layers are the packages of docs/architecture.md, bottom (0) to top. A
// package may import packages of a lower layer, or of its own layer when
// sideways lists the pair.
var layers = map[string]int{
	// 0: leaves, no project imports of their own.
	"internal/strictjson": 0, "internal/jsonlex": 0, "internal/names": 0, "internal/globalctx": 0, "internal/egress": 0,
	"internal/testcert": 0, "internal/textdiff": 0, "internal/testredis": 0, "internal/redisx": 0, "internal/tracing": 0, "internal/apierror": 0, "redact": 0, "sacp": 0,
	"compact": 0, "envelope": 0, "mailbox": 0, "audit": 0, "audit/ship": 0, "rego": 0, "workflow/definition": 0, "dialect/anthropic": 0, "dialect/responses": 0,
	"dialect/internal/neutral": 0, "dialect/internal/dialecttest": 0, "internal/usage": 0,
	"upstream/mock": 0, "upstream/internal/inproc": 0,
	"policy/bundle":       0, // fetches and verifies signed OPA bundles; package policy compiles them
	"internal/confkit":    0, // the units, did-you-mean and problem reporter every part's config is written with
	"internal/roster":     0, // agents.yaml: the Agent entry every part that serves an agent reads
	"internal/protocol":   0, // protocol.yaml: the approval protocol's settings, with the SACP and redaction ones
	"internal/pricing":    0, // what models cost, gateway.yaml's pricing with it
	"internal/team":       0, // a team of agents: its shared limits, from teams.yaml and the admin API
	"internal/ledger":     0, // usage per day per agent and team, in the state backend
	"internal/people":     0, // gateway.yaml's people: the OpenID Connect sign-in and the roles groups hold
	"mcp/mcpconf":         0, // gateway.yaml's mcp: the MCP door's servers, their defaults and checks
	"internal/doctest":    0, // the docs' snippets test: a package comment, no imports
	"internal/atomicfile": 0, // a state file replaced whole or not at all
	"internal/pagekit":    0, // the style and headers of every server-rendered page
	// The parts' own config sections, below the loader that composes them.
	"server/listenconf":     0, // gateway.yaml's tls and http: how the server listens
	"internal/stateconf":    0, // gateway.yaml's state: memory or Redis
	"messaging/relayconf":   0, // gateway.yaml's messaging: the relay's deliveries and outbound networks
	"approval/approvalconf": 0, // gateway.yaml's approval: the approval protocol's catalogue, URL, webhook, rate
	"internal/mcpauth":      0, // mcp_clients: the settings, URLs and store of the authorization server for people's MCP clients

	"github.com/sacpgw/gateway": 0, // the module's root: the shipped config/ embedded, data only
	"internal/browsertest":      0, // headless Chromium for the browser tests, imported by tests only
	"internal/testotlp":         0, // an OTLP logs receiver for tests, imported by tests only
	"internal/testoidc":         0, // an OpenID Connect provider for tests, imported by tests only
	// 1: configuration and what is built from it.
	"internal/config": 1, "audit/siem": 1, "upstream": 1, "internal/scope": 1, "limit": 1, "policy": 1,
	"internal/testkit": 1, // test doubles, imported by tests only
	// 2: plumbing shared by the front doors.
	"internal/httpx": 2, "internal/escalation": 2, "internal/sourceguard": 2, "internal/metrics": 2,
	// 3: the door frame every front door stands in (identity, rate gate,
	// journal, the door contract).
	"internal/door": 3,
	// 4: the front doors.
	"proxy": 4, "approval": 4, "registry": 4, "messaging": 4, "workflow": 4, "mcp": 4, "usagepage": 4, "a2a": 4,
	"admin":       4, // the admin API and console: run-time agents, keys and teams
	"oauthserver": 4, // the authorization server for people's MCP clients
	// 5: the HTTP shell; 6: the wiring (Build); 7: the command.
	"server": 5, "app": 6, "cmd/gateway": 7,
}

// sideways are the imports allowed within a layer.
var sideways = map[[2]string]bool{
	{"internal/scope", "upstream"}:  true,
	{"internal/config", "upstream"}: true,
	{"internal/config", "policy"}:   true,
	// The SIEM stream owns its settings; the loader composes them.
	{"internal/config", "audit/siem"}: true,
	// The one set of JSON lexical rules, under the hand-written readers.
	{"sacp", "internal/jsonlex"}:     true,
	{"compact", "internal/jsonlex"}:  true,
	{"envelope", "internal/jsonlex"}: true,
	{"redact", "internal/jsonlex"}:   true,
	// The bundle fetcher's outbound calls pass the one outbound guard.
	{"policy/bundle", "internal/egress"}: true,
	// Each part owns its config type, written with the units and the
	// problem reporter every part's config shares.
	{"redact", "internal/confkit"}:                true,
	{"sacp", "internal/confkit"}:                  true,
	{"audit", "internal/confkit"}:                 true,
	{"internal/tracing", "internal/confkit"}:      true,
	{"internal/pricing", "internal/confkit"}:      true,
	{"internal/roster", "internal/confkit"}:       true,
	{"internal/roster", "internal/names"}:         true,
	{"internal/team", "internal/confkit"}:         true,
	{"internal/people", "internal/confkit"}:       true,
	{"internal/protocol", "internal/confkit"}:     true,
	{"server/listenconf", "internal/confkit"}:     true,
	{"internal/stateconf", "internal/confkit"}:    true,
	{"internal/stateconf", "internal/redisx"}:     true,
	{"messaging/relayconf", "internal/confkit"}:   true,
	{"approval/approvalconf", "internal/confkit"}: true,
	{"dialect/responses", "internal/confkit"}:     true,
	{"internal/protocol", "sacp"}:                 true,
	{"internal/protocol", "redact"}:               true,
	{"internal/mcpauth", "internal/confkit"}:      true,
	{"mcp/mcpconf", "internal/confkit"}:           true,
	{"internal/redisx", "internal/confkit"}:       true,
	// The neutral form under both dialects.
	{"dialect/anthropic", "dialect/internal/neutral"}: true,
	{"dialect/responses", "dialect/internal/neutral"}: true,
	// The one reader of a provider's usage report, under the books and
	// the dialects that show the counts.
	{"dialect/anthropic", "internal/usage"}:        true,
	{"dialect/internal/neutral", "internal/usage"}: true,
	// A dialect's refusal of a field is the strict reading's error.
	{"dialect/internal/neutral", "internal/strictjson"}: true,
	// Shipping reads the trail's files by audit's rules and dials through
	// the outbound guard.
	{"audit/ship", "audit"}:           true,
	{"audit/ship", "internal/egress"}: true,
	// The mock provider answers in process as the Anthropic translation does.
	{"upstream/mock", "upstream/internal/inproc"}: true,
	// The agent-messaging door is one relay made of parts.
	{"messaging", "registry"}: true,
}

// doors groups the front doors; no door imports another's packages.
var doors = map[string]string{
	"proxy": "openai", "approval": "approval", "messaging": "relay", "registry": "relay", "mailbox": "relay", "envelope": "relay",
	"workflow": "workflow", "mcp": "mcp", "usagepage": "usage", "a2a": "a2a", "admin": "admin",
	"oauthserver": "oauth",
}

// imports lists the non-test imports of every package with go list, one
// line per package: its path, then its imports.
func imports(t *testing.T) []byte {
	t.Helper()
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	return out
}

// TestShellImportsNoDoor: the HTTP shell mounts every door's routes
// through the door frame, knowing none of them, so a new door changes
// nothing in server; and no door imports another (TestImportFlow).
func TestShellImportsNoDoor(t *testing.T) {
	sc := bufio.NewScanner(bytes.NewReader(imports(t)))
	found := false
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if fields[0] != module+"server" {
			continue
		}
		found = true
		for _, imp := range fields[1:] {
			if d := doors[strings.TrimPrefix(imp, module)]; d != "" && strings.HasPrefix(imp, module) {
				t.Errorf("server imports %s, a package of the %s door: mount its routes through internal/door instead", imp, d)
			}
		}
	}
	if !found {
		t.Fatal("go list did not list server")
	}
}

// TestImportFlow reads the non-test imports of every package with go list.
func TestImportFlow(t *testing.T) {
	out := imports(t)
	sc := bufio.NewScanner(bytes.NewReader(out))
	seen := 0
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		pkg := strings.TrimPrefix(fields[0], module)
		if strings.HasPrefix(pkg, "bench/") || strings.HasPrefix(pkg, "charts/") || pkg == "internal/archtest" {
			continue // load tools and test-only packages stand outside the flow
		}
		seen++
		from, ok := layers[pkg]
		if !ok {
			t.Errorf("%s has no layer: add it to docs/architecture.md and to this table", pkg)
			continue
		}
		for _, imp := range fields[1:] {
			if !strings.HasPrefix(imp, module) {
				continue
			}
			dep := strings.TrimPrefix(imp, module)
			to, ok := layers[dep]
			switch {
			case !ok:
				t.Errorf("%s imports %s, which has no layer", pkg, dep)
			case to > from:
				t.Errorf("%s (layer %d) imports %s (layer %d): imports go down", pkg, from, dep, to)
			case to == from && !sideways[[2]string{pkg, dep}]:
				t.Errorf("%s imports %s in its own layer %d: not an allowed sideways import", pkg, dep, from)
			}
			if d1, d2 := doors[pkg], doors[dep]; d1 != "" && d2 != "" && d1 != d2 {
				t.Errorf("front door %s (%s) imports %s (%s): the doors share plumbing, not each other", pkg, d1, dep, d2)
			}
		}
	}
	if seen < 20 {
		t.Fatalf("only %d packages listed: %s", seen, out)
	}
}
