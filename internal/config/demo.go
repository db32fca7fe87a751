package config

import "github.com/sacpgw/gateway/internal/roster"

// demoTokens are the tokens README publishes for the quickstart. Their
// hashes in a running config mean anyone can act as that agent.
var demoTokens = []string{"gw-demo-claude-3", "gw-demo-copilot-2", "gw-demo-gemini-pro", "gw-demo-admin", "gw-demo-reviewer"}

// DemoCredential is an identity of the config whose token is a published
// demo token (which is public, so it may be shown).
type DemoCredential struct {
	// Who is "agent ID", "admin" or "reviewer NAME".
	Who string
	// Agent is the agent's id, for an agent.
	Agent string
	// Token is the demo token.
	Token string
}

// DemoCredentials names every agent, admin or reviewer whose token is one of
// the published demo tokens; the server warns loudly while any is active.
func (c *Config) DemoCredentials() []string {
	var out []string
	for _, d := range c.DemoTokens() {
		out = append(out, d.Who)
	}
	return out
}

// DemoTokens is every identity of the config that a published demo token
// acts as: agents (in id order), then the admin, then reviewers.
func (c *Config) DemoTokens() []DemoCredential {
	demo := map[[32]byte]string{}
	for _, t := range demoTokens {
		demo[roster.HashToken(t)] = t
	}
	token := func(hexHash string) string {
		h, err := roster.ParseHash(hexHash)
		if err != nil {
			return ""
		}
		return demo[h]
	}
	var out []DemoCredential
	for _, id := range sortedKeys(c.Agents) {
		if t := token(c.Agents[id].TokenSHA256); t != "" {
			out = append(out, DemoCredential{Who: "agent " + id, Agent: id, Token: t})
		}
	}
	if t := token(c.Gateway.Admin.TokenSHA256); t != "" {
		out = append(out, DemoCredential{Who: "admin", Token: t})
	}
	for _, r := range c.Gateway.Admin.Reviewers {
		if t := token(r.TokenSHA256); t != "" {
			out = append(out, DemoCredential{Who: "reviewer " + r.Name, Token: t})
		}
	}
	return out
}

// IsDemoHash reports whether hexHash (a token_sha256) is the hash of a
// published demo token.
func IsDemoHash(hexHash string) bool {
	for _, t := range demoTokens {
		if roster.HashTokenHex(t) == hexHash {
			return true
		}
	}
	return false
}
