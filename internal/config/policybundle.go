package config

import "github.com/sacpgw/gateway/policy"

// policyBundle completes and checks policy.bundle (its type and rules are
// package bundle's): file paths resolve against the config directory like
// every other, and each problem carries the line of its key.
func (l *loader) policyBundle(at func(...string) int, p *policy.Config) {
	b := p.Bundle
	if b == nil {
		return
	}
	l.resolve(&b.PublicKeyFile)
	l.resolve(&b.CAFile)
	b.SetDefaults()
	for _, pr := range b.Check() {
		key, name := []string{"policy", "bundle"}, "policy.bundle"
		if pr.Key != "" {
			key, name = append(key, pr.Key), name+"."+pr.Key
		}
		l.add(GatewayFile, at(key...), "%s: %s", name, pr.Msg)
	}
	if !p.DirDefaulted {
		l.add(GatewayFile, at("policy", "dir"), "policy.dir and policy.bundle: set one; the bundle replaces the directory's policies")
	}
}
