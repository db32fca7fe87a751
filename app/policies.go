package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/egress"
	"github.com/sacpgw/gateway/policy"
	"github.com/sacpgw/gateway/policy/bundle"
	policyfs "github.com/sacpgw/gateway/rego"
)

// newPolicies loads the Rego of policy.dir; with an audit trail (serving),
// it watches the directory and audits every reload and shadow disagreement.
func newPolicies(cfg *config.Config, log *slog.Logger, auditLog *audit.Log) (*policy.Engine, error) {
	opts := policy.Options{
		Dir:       cfg.Gateway.Policy.Dir,
		ShadowDir: cfg.Gateway.Policy.ShadowDir,
		Logger:    log,
		Timeout:   cfg.Protocol.Timeouts.Validation.D(),
		NoWatch:   auditLog == nil,
	}
	if b := cfg.Gateway.Policy.Bundle; b != nil {
		// The bundle server is reached like every outbound call of the
		// gateway's own (messaging.allowed_networks opens private ranges).
		src, err := bundle.NewSource(*b, egress.Policy{Allowed: cfg.Gateway.Messaging.AllowedPrefixes})
		if err != nil {
			return nil, err
		}
		if auditLog != nil {
			// Serving: the bundle replaces the directory. config check
			// (no trail) reads the key but fetches nothing.
			opts.Dir, opts.Bundle = "", src
		}
	}
	if _, err := os.Stat(opts.Dir); opts.Bundle == nil && os.IsNotExist(err) && cfg.Gateway.Policy.DirDefaulted {
		// Only the default location may be absent (a binary run outside the
		// repository): it then serves the policies built into the binary.
		// A configured directory that is missing is an error.
		log.Warn("policy dir not found: serving the built-in default policies (not hot-reloaded)", "dir", opts.Dir)
		opts.Dir, opts.FS = "", policyfs.FS
	}
	if auditLog != nil {
		record := func(kind string, summary *audit.Object) {
			if _, err := auditLog.Append(context.Background(), audit.Record{Kind: kind, Object: summary}); err != nil {
				log.Error("audit entry not written", "kind", kind, "error", err.Error())
			}
		}
		opts.OnReload = func(ev policy.ReloadEvent) {
			record("policy.reload", audit.Members("ok", ev.OK, "shadow", ev.Shadow, "dir", ev.Dir, "revision", ev.Revision,
				"attempted", ev.Attempted, "error", ev.Error, "files", ev.Files, "bundle_revision", ev.BundleRevision))
		}
		opts.OnShadowDisagreement = func(ev policy.ShadowEvent) {
			record("policy.shadow", audit.Members("point", ev.Point, "live", ev.Live, "shadow", ev.Shadow,
				"live_decision_id", ev.LiveDecisionID, "shadow_decision_id", ev.ShadowDecisionID,
				"live_revision", ev.LiveRevision, "shadow_revision", ev.ShadowRevision))
		}
	}
	e, err := policy.New(opts)
	if err != nil {
		where := cfg.Gateway.Policy.Dir
		if opts.Bundle != nil {
			where = opts.Bundle.Display()
		}
		return nil, fmt.Errorf("policies (%s): %w", where, err)
	}
	return e, nil
}
