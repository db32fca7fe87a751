package redact

import (
	"strconv"
	"strings"

	"github.com/sacpgw/gateway/internal/confkit"
)

// Check fills in the defaults (every detector, every field) and reports
// what is wrong through r. fields are the SACP fields apply_to may name:
// the protocol's, which this package does not know.
func (c *Config) Check(r confkit.Reporter, fields []string) {
	if c.Detectors == nil {
		c.Detectors = Names()
	}
	for i, d := range c.Detectors {
		if !confkit.OneOf(d, Names()...) {
			r.Add(r.Line("detectors", strconv.Itoa(i)), "protocol.redaction.detectors: unknown detector %q (want %s)%s", d, strings.Join(Names(), ", "), confkit.DidYouMean(d, Names()))
		}
	}
	for i, d := range c.Block {
		if !confkit.OneOf(d, c.Detectors...) {
			r.Add(r.Line("block", strconv.Itoa(i)), "protocol.redaction.block: %q is not an enabled detector%s", d, confkit.DidYouMean(d, c.Detectors))
		}
	}
	if c.Replacement == "" {
		c.Replacement = DefaultReplacement
	}
	if c.ApplyTo == nil {
		// Every field by default: thought and next_step_hint reach the
		// client and the audit trail like message and data.
		c.ApplyTo = fields
	}
	for i, a := range c.ApplyTo {
		if !confkit.OneOf(a, fields...) {
			r.Add(r.Line("apply_to", strconv.Itoa(i)), "protocol.redaction.apply_to: unknown SACP field %q (want %s)%s", a, strings.Join(fields, ", "), confkit.DidYouMean(a, fields))
		}
	}
}
