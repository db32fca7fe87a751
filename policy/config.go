package policy

import (
	"github.com/sacpgw/gateway/internal/confkit"
	"github.com/sacpgw/gateway/policy/bundle"
)

// Config is gateway.yaml's policy: where the Rego policies are.
type Config struct {
	// Dir holds the Rego files. Default "rego" (beside the config files;
	// when that is absent, the policies built into the binary serve).
	Dir string `yaml:"dir"`
	// DirDefaulted: Dir was not set; set by Check.
	DirDefaulted bool `yaml:"-"`
	// ShadowDir holds candidate policies evaluated without effect. Empty: none.
	ShadowDir string `yaml:"shadow_dir"`
	// Bundle, when set, replaces Dir's policies with a signed OPA bundle
	// fetched over HTTP(S) or from an OCI registry (docs/policy-authoring.md).
	Bundle *bundle.Config `yaml:"bundle"`
}

// Check fills in the default directory and resolves both beside the
// config file.
func (c *Config) Check(r confkit.Reporter) {
	if c.Dir == "" {
		// The default may be absent: the policies built into the binary
		// then serve (a binary run outside the repository).
		c.Dir, c.DirDefaulted = "rego", true
	}
	r.Resolve(&c.Dir)
	r.Resolve(&c.ShadowDir)
}
