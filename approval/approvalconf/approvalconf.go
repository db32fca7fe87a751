// Package approvalconf is gateway.yaml's approval section: the approval
// protocol's catalogue, its external URL, its webhook and its rate. It owns
// the section's defaults and checks, below the loader, which only composes
// it.
package approvalconf

import (
	"time"

	"github.com/sacpgw/gateway/internal/confkit"
)

// Settings configures the approval protocol (docs/approval.md).
type Settings struct {
	// CatalogueDir holds the specification catalogue (Markdown files with an
	// id in front matter). Default "specs".
	CatalogueDir string `yaml:"catalogue_dir"`
	// BaseURL is the gateway's external URL, for human_review_url. Empty:
	// the review URL is a path ("/review/{id}").
	BaseURL string `yaml:"base_url"`
	// Webhook receives a Slack-compatible notification per escalation. Empty: none.
	Webhook string `yaml:"webhook"`
	// RateLimit bounds /agent/request per agent. Default 60/minute, the
	// approval protocol's limit (docs/approval.md, Limits).
	RateLimit confkit.Rate `yaml:"rate_limit"`
}

// Check fills in the defaults (the catalogue in specs/, 60 requests a
// minute) and checks the directory and the URLs.
func (a *Settings) Check(r confkit.Reporter) {
	if a.CatalogueDir == "" {
		// The default may be absent (an empty catalogue); a configured one must exist.
		a.CatalogueDir = "specs"
		r.Resolve(&a.CatalogueDir)
	} else {
		r.Resolve(&a.CatalogueDir)
		confkit.FileExists(r, r.Line("catalogue_dir"), "approval.catalogue_dir", a.CatalogueDir)
	}
	if a.RateLimit.IsZero() {
		a.RateLimit = confkit.Rate{N: 60, Period: time.Minute}
	}
	for name, u := range map[string]string{"base_url": a.BaseURL, "webhook": a.Webhook} {
		if u != "" && !confkit.HTTPURL(u) {
			r.Add(r.Line(name), "approval.%s %q: want an http(s) URL", name, u)
		}
	}
}
