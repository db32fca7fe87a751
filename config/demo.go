package config

// demoTokens are the tokens README publishes for the quickstart. Their
// hashes in a running config mean anyone can act as that agent.
var demoTokens = []string{"gw-demo-claude-3", "gw-demo-copilot-2", "gw-demo-gemini-pro", "gw-demo-admin", "gw-demo-reviewer"}

// DemoCredentials names every agent, admin or reviewer whose token is one of
// the published demo tokens; the server warns loudly while any is active.
func (c *Config) DemoCredentials() []string {
	demo := map[[32]byte]bool{}
	for _, t := range demoTokens {
		demo[HashToken(t)] = true
	}
	isDemo := func(hexHash string) bool {
		h, err := decodeHash(hexHash)
		return err == nil && demo[h]
	}
	var out []string
	for _, id := range sortedKeys(c.Agents) {
		if isDemo(c.Agents[id].TokenSHA256) {
			out = append(out, "agent "+id)
		}
	}
	if isDemo(c.Gateway.Admin.TokenSHA256) {
		out = append(out, "admin")
	}
	for _, r := range c.Gateway.Admin.Reviewers {
		if isDemo(r.TokenSHA256) {
			out = append(out, "reviewer "+r.Name)
		}
	}
	return out
}
