// Package protocol is config/protocol.yaml: the approval protocol's
// timeouts, limits and compliance flags, with the SACP and redaction
// settings their own packages own, and the defaults and checks of the
// file. The policies read it as input.protocol; the front doors take their
// timeouts and limits from it.
package protocol

import (
	"time"

	"github.com/sacpgw/gateway/internal/confkit"
	"github.com/sacpgw/gateway/redact"
	"github.com/sacpgw/gateway/sacp"
)

// Config is config/protocol.yaml: the approval protocol's settings plus the
// gateway's SACP and redaction settings.
type Config struct {
	Version    string        `yaml:"version"`
	Timeouts   Timeouts      `yaml:"timeouts"`
	Limits     Limits        `yaml:"limits"`
	Compliance Compliance    `yaml:"compliance"`
	SACP       sacp.Config   `yaml:"sacp"`
	Redaction  redact.Config `yaml:"redaction"`
}

// Timeouts of the approval protocol.
type Timeouts struct {
	// Validation bounds a policy decision. Default 5000ms.
	Validation confkit.Duration `yaml:"validation"`
	// Response bounds an upstream call (headers for streams). Default 10000ms.
	Response confkit.Duration `yaml:"response"`
	// Escalation: escalations older than this become REJECTED. Default 24h.
	Escalation confkit.Duration `yaml:"escalation"`
	// ApprovalValidity: an APPROVED request expires (EXPIRED) this long
	// after its approval unless REPORTed. Default 24h.
	ApprovalValidity confkit.Duration `yaml:"approval_validity"`
	// StreamIdle ends a stream whose upstream sends nothing for this long
	// with an error event. Default 30s.
	StreamIdle confkit.Duration `yaml:"stream_idle"`
}

// Limits of the approval protocol.
type Limits struct {
	MaxContentSize   confkit.Size `yaml:"max_content_size"`
	MaxReferences    int          `yaml:"max_references"`
	MaxDeviations    int          `yaml:"max_deviations"`
	MaxRetryAttempts int          `yaml:"max_retry_attempts"`
	// MaxInlineBinary: a base64 value larger than this in a workflow
	// step's data is moved to the blob store. Default 64KB.
	MaxInlineBinary confkit.Size `yaml:"max_inline_binary"`
}

// Compliance flags of the approval protocol.
type Compliance struct {
	StrictMode        bool `yaml:"strict_mode"`
	AllowDeviations   bool `yaml:"allow_deviations"`
	RequireRationale  bool `yaml:"require_rationale"`
	EnforceReferences bool `yaml:"enforce_references"`
}

// Check fills in the defaults and reports what is wrong through r, whose
// keys are below protocol.
func (p *Config) Check(r confkit.Reporter) {
	if p.Version == "" {
		p.Version = "1.0"
	}
	p.Timeouts.check(r)
	// The approval protocol's compliance defaults are the strict ones: a key
	// left out keeps the protection on, never silently off.
	for key, field := range map[string]*bool{"strict_mode": &p.Compliance.StrictMode, "require_rationale": &p.Compliance.RequireRationale,
		"enforce_references": &p.Compliance.EnforceReferences} {
		if !r.Has("compliance", key) {
			*field = true
		}
	}
	p.Limits.check(r)
	p.SACP.Check(confkit.Sub(r, "sacp"))
	p.Redaction.Check(confkit.Sub(r, "redaction"), sacp.Fields())
}

func (t *Timeouts) check(r confkit.Reporter) {
	if t.Validation == 0 {
		t.Validation = confkit.Duration(5000 * time.Millisecond)
	}
	if t.Response == 0 {
		t.Response = confkit.Duration(10000 * time.Millisecond)
	}
	if t.Escalation == 0 {
		t.Escalation = confkit.Duration(24 * time.Hour)
	}
	if t.ApprovalValidity == 0 {
		t.ApprovalValidity = confkit.Duration(24 * time.Hour)
	}
	if t.ApprovalValidity < 0 {
		r.Add(r.Line("timeouts", "approval_validity"), "protocol.timeouts.approval_validity: must be positive")
	}
	if t.StreamIdle == 0 {
		t.StreamIdle = confkit.Duration(30 * time.Second)
	}
	if t.StreamIdle < 0 {
		r.Add(r.Line("timeouts", "stream_idle"), "protocol.timeouts.stream_idle: must be positive")
	}
}

func (lim *Limits) check(r confkit.Reporter) {
	if lim.MaxContentSize == 0 {
		lim.MaxContentSize = 100 << 10
	}
	if lim.MaxReferences == 0 {
		lim.MaxReferences = 20
	}
	if lim.MaxInlineBinary == 0 {
		lim.MaxInlineBinary = 64 << 10
	}
	if lim.MaxDeviations == 0 {
		lim.MaxDeviations = 5
	}
	if lim.MaxRetryAttempts == 0 {
		lim.MaxRetryAttempts = 3
	}
	for name, v := range map[string]int{"max_references": lim.MaxReferences, "max_deviations": lim.MaxDeviations, "max_retry_attempts": lim.MaxRetryAttempts} {
		if v < 0 {
			r.Add(r.Line("limits", name), "protocol.limits.%s: must not be negative", name)
		}
	}
	if lim.MaxRetryAttempts > 10 {
		r.Add(r.Line("limits", "max_retry_attempts"), "protocol.limits.max_retry_attempts %d: at most 10 (each attempt is a paid model call)", lim.MaxRetryAttempts)
	}
}
