package app

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sacpgw/gateway/admin"
	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/server"
)

// Serve runs the gateway of cfg until ctx ends: the audit trail, the
// components, the background work, the config watcher and the listener.
func Serve(ctx context.Context, cfg *config.Config, o Options, stderr io.Writer) error {
	sidecar := o.Sidecar
	fileListen := cfg.Gateway.Listen
	if o.Listen != "" {
		cfg.Gateway.Listen = o.Listen
	}
	log := newLogger(cfg.Gateway.Log, stderr)
	if sidecar != "" && !loopback(cfg.Gateway.Listen) {
		return &UsageError{fmt.Sprintf("sidecar mode requires a loopback listen address (e.g. 127.0.0.1:8080), not %q: use --listen", cfg.Gateway.Listen)}
	}
	if _, ok := cfg.Agents[sidecar]; sidecar != "" && !ok {
		return &UsageError{fmt.Sprintf("--sidecar-agent %q: no such agent in %s/agents.yaml", sidecar, cfg.Dir)}
	}
	// The ports come first: a start that cannot serve (the port is taken)
	// must leave no audit chain behind, not even a startup entry an
	// auditor would ask about.
	ln, healthLn, err := listen(cfg.Gateway.Listen, cfg.Gateway.HealthListen)
	if err != nil {
		return err
	}
	serving := false
	defer func() {
		if !serving {
			closeListeners(ln, healthLn)
		}
	}()
	auditLog, err := openAudit(cfg, log)
	if err != nil {
		return err
	}
	shipper, finishShipping, err := startShipping(cfg, log)
	if err != nil {
		_ = auditLog.Close()
		return err
	}
	// Closed last, after the server drained: it writes the final checkpoint,
	// which the last shipping pass then takes with the open segment.
	defer func() {
		if err := auditLog.Close(); err != nil {
			log.Error("closing the audit trail", "error", err.Error())
		}
		finishShipping()
	}()
	a, err := Build(cfg, Options{Sidecar: sidecar, Log: log, Audit: auditLog, Version: o.Version, Shipper: shipper})
	if err != nil {
		return err
	}
	defer a.Close()
	a.fileListen = fileListen
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	runDone := make(chan struct{})
	go func() { a.Run(runCtx); close(runDone) }()
	// The last summaries of failed authentications go in before the trail
	// closes (deferred earlier, so run later).
	defer func() { stopRun(); <-runDone }()
	if err := a.watchConfig(runCtx, cfg.Dir, cfg); err != nil {
		log.Warn("config hot reload disabled", "error", err.Error())
	}
	if _, err := auditLog.Append(ctx, audit.Record{Kind: audit.KindConfigReload, Object: audit.Members(
		"event", "startup", "version", o.Version, "files", configDigest(cfg.Dir), "agents", len(cfg.Agents), "sidecar_agent", sidecar)}); err != nil {
		return fmt.Errorf("audit trail: first entry: %w", err)
	}
	warnings(cfg, log)
	serving = true
	// health_listen (app/health.go); deferred here, it stops once the main
	// server has drained.
	if healthLn != nil {
		defer a.serveHealth(healthLn)()
	}
	log.Info("gateway listening", "addr", ln.Addr().String(), "agents", len(cfg.Agents),
		"upstreams", len(cfg.Gateway.Upstreams), "sidecar_agent", sidecar, "version", o.Version)
	fmt.Fprint(stderr, quickstartBanner(cfg, ln.Addr().String(), cfg.Gateway.TLS.CertFile != ""))
	return a.ServeListener(ctx, ln)
}

func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return server.NewJSONLogger(w, opts)
}

// openAudit opens this instance's chain of the audit trail.
func openAudit(cfg *config.Config, log *slog.Logger) (*audit.Log, error) {
	a := cfg.Gateway.Audit
	l, err := audit.Open(audit.Config{
		Dir:                a.Dir,
		Chain:              a.Chain,
		SigningKeyFile:     a.SigningKeyFile,
		SegmentMaxBytes:    int64(a.SegmentMaxSize),
		CheckpointEvery:    a.CheckpointEvery,
		CheckpointInterval: a.CheckpointInterval.D(),
		CommitDelay:        commitDelay(a.CommitDelay),
		Logger:             log,
	})
	if errors.Is(err, audit.ErrChainInUse) {
		// The usual cause: a second gateway started with the first one's
		// gateway.yaml, in the same folder or on a shared volume.
		return nil, &UsageError{fmt.Sprintf("audit.chain %q in %s is in use: another gateway is writing this chain (%s is locked); "+
			"stop that gateway, or give this one its own audit.chain in gateway.yaml (empty means $POD_NAME, else the host name) or its own audit.dir",
			a.Chain, a.Dir, filepath.Join(a.Dir, a.Chain+".lock"))}
	}
	if err != nil {
		return nil, fmt.Errorf("audit trail (%s): %w", a.Dir, err)
	}
	return l, nil
}

// commitDelay maps the configured delay to audit.Config's: "0s" (off) is
// negative there, where zero means the default.
func commitDelay(d *config.Duration) time.Duration {
	switch {
	case d == nil:
		return 0
	case *d == 0:
		return -1
	}
	return d.D()
}

// configDigest is the SHA-256 of each config file, recorded at startup so
// the trail shows which rules were in force.
func configDigest(dir string) map[string]any {
	out := map[string]any{"dir": dir}
	for _, name := range []string{config.GatewayFile, config.AgentsFile, config.ProtocolFile, config.RegistryFile, config.WorkflowsFile, config.TeamsFile} {
		if b, err := os.ReadFile(filepath.Join(dir, name)); err == nil {
			sum := sha256.Sum256(b)
			out[name] = hex.EncodeToString(sum[:])
		}
	}
	return out
}

// warnings says loudly what an operator must not ship.
func warnings(cfg *config.Config, log *slog.Logger) {
	if demo := cfg.DemoCredentials(); len(demo) > 0 {
		log.Warn("!!! DEMO TOKENS ACTIVE: anyone who read the README can act as these identities; replace their token_sha256 before exposing this gateway !!!",
			"identities", strings.Join(demo, ", "))
	}
	for _, u := range cfg.Gateway.Upstreams {
		if u.Type == "openai" && u.APIKey == "" && strings.Contains(u.BaseURL, "api.openai.com") {
			log.Warn("upstream has no api_key: requests routed to it will be refused by the provider", "upstream", u.Name)
		}
	}
}

// loopback reports whether addr listens on loopback only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || host == "" {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Check builds everything a server would, without serving. It does not
// open the audit trail (a running gateway holds its lock), but it loads the
// signing key.
func Check(cfg *config.Config) error {
	if f := cfg.Gateway.Audit.SigningKeyFile; f != "" {
		if _, err := audit.LoadPrivateKey(f); err != nil {
			return fmt.Errorf("%s: audit.signing_key_file: %w", filepath.Join(cfg.Dir, config.GatewayFile), err)
		}
	}
	a, err := Build(cfg, Options{Log: slog.New(slog.DiscardHandler)})
	if err != nil {
		return err
	}
	defer a.Close()
	return runtimeClash(cfg, a.state.admin)
}

// runtimeClash reports the run-time agents (admin API) whose names
// agents.yaml now also defines: the file may not silently take over an
// agent whose keys were issued at run time (the identify stage refuses
// those keys meanwhile). A state backend that cannot be read is not a
// problem of the files: nothing is reported then.
func runtimeClash(cfg *config.Config, store *admin.Store) error {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	stored, err := store.Agents(ctx)
	if err != nil {
		return nil
	}
	var ps config.Problems
	for _, s := range stored {
		if cfg.Agents[s.Name] != nil {
			ps = append(ps, config.Problem{File: filepath.Join(cfg.Dir, config.AgentsFile),
				Msg: fmt.Sprintf("agent %q is also an agent created through the admin API (state backend): its run-time keys are refused while both exist; delete one (gateway agents delete %s, or remove the entry)", s.Name, s.Name)})
		}
	}
	if len(ps) == 0 {
		return nil
	}
	return ps
}
