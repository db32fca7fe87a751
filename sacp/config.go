package sacp

import "github.com/sacpgw/gateway/internal/confkit"

// Config is protocol.yaml's sacp: the JSON response protocol's settings.
type Config struct {
	// TemplateFile overrides the built-in template, relative to the config dir.
	TemplateFile string `yaml:"template_file"`
	// Reask asks the model again on invalid output. Default true.
	Reask *bool `yaml:"reask"`
}

// ReaskEnabled reports whether invalid SACP answers are re-asked.
func (c Config) ReaskEnabled() bool { return c.Reask == nil || *c.Reask }

// Check resolves the template's path and reports one that cannot be read.
func (c *Config) Check(r confkit.Reporter) {
	if c.TemplateFile != "" {
		r.Resolve(&c.TemplateFile)
		confkit.FileExists(r, r.Line("template_file"), "protocol.sacp.template_file", c.TemplateFile)
	}
}
