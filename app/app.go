package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"

	a2adoor "github.com/sacpgw/gateway/a2a"
	"github.com/sacpgw/gateway/admin"
	"github.com/sacpgw/gateway/approval"
	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/audit/ship"
	"github.com/sacpgw/gateway/audit/siem"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/egress"
	"github.com/sacpgw/gateway/internal/ledger"
	"github.com/sacpgw/gateway/internal/mcpauth"
	"github.com/sacpgw/gateway/internal/metrics"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/sourceguard"
	"github.com/sacpgw/gateway/internal/tracing"
	"github.com/sacpgw/gateway/mcp"
	"github.com/sacpgw/gateway/messaging"
	"github.com/sacpgw/gateway/oauthserver"
	"github.com/sacpgw/gateway/policy"
	"github.com/sacpgw/gateway/proxy"
	"github.com/sacpgw/gateway/registry"
	"github.com/sacpgw/gateway/server"
	"github.com/sacpgw/gateway/server/listenconf"
	"github.com/sacpgw/gateway/upstream"
	"github.com/sacpgw/gateway/workflow"
)

// UsageError marks a refusal to start that is the operator's to fix (the
// command exits 2).
type UsageError struct{ msg string }

func (e *UsageError) Error() string { return e.msg }

// Options are what Build takes besides the configuration.
type Options struct {
	// Sidecar, when set, is the agent that token-less requests act as.
	Sidecar string
	Log     *slog.Logger
	// Audit is the open audit trail; nil builds everything without serving
	// (config check): no approval service, agent messaging or watcher.
	Audit *audit.Log
	// Version is written in the startup audit entry.
	Version string
	// KeepAlive is the interval of SSE keep-alive comments while a
	// protocol answer is gathered; zero: 5s.
	KeepAlive time.Duration
	// Tracer, when set, replaces the exporter of gateway.yaml's tracing.
	Tracer *tracing.Tracer
	// Listen, when set, overrides gateway.yaml's listen for this run
	// (serve --listen).
	Listen string
	// Shipper, when set, ships the trail (audit.ship); its numbers are
	// exported as metrics.
	Shipper *ship.Shipper
}

// App is every component, built from one config.
type App struct {
	server    *server.Server
	audit     *audit.Log
	policies  *policy.Engine
	approval  *approval.Service
	messaging *messaging.Service
	// a2a is the A2A door, which reads its agents' cards in the background.
	a2a       *a2adoor.Door
	registry  *registry.Registry
	workflows *workflow.Engine
	// keys are the admin API's issued keys and run-time teams, as the
	// identify stage and the limits read them.
	keys    *admin.Keys
	state   *state
	sidecar string
	log     *slog.Logger
	// sources summarizes failed authentications in front of the audit
	// trail and limits them per source address (nil without a trail).
	sources *sourceguard.Guard
	// oauth keeps the clients, codes and tokens of the authorization
	// server for people's MCP clients (oauth.go).
	oauth mcpauth.Store
	// rec is the one audit recorder every door writes through: the trail
	// behind sources, with audit.fail_mode (nil without a trail).
	rec *door.Recorder
	// frame identifies and meters the callers of every door's agent
	// routes; doors are the front doors (doors.go), openai among them.
	frame   *door.Frame
	doors   []door.Door
	openai  *proxy.Door
	mcp     *mcp.Door // ends its stdio servers' processes on Close
	metrics *metrics.Metrics
	checks  []server.Check
	// egress is where the gateway's own outbound calls may go.
	egress    egress.Policy
	tracer    *tracing.Tracer
	siem      *siem.Exporter // audit.otlp; nil when off
	keepAlive time.Duration
	// embedModel is the registry's embeddings model (registry.embeddings),
	// swapped on reload.
	embedModel atomic.Pointer[string]
	// embedSelf is the gateway's own identity for the registry's profile
	// embeddings (nil without registry.embeddings); it changes on reload.
	embedSelf atomic.Pointer[roster.Agent]
	// upstreamStats (failovers, breakers) and spend count across reloads.
	upstreamStats *upstream.Stats
	spend         *proxy.Spend
	// usage is the usage per day per agent and team (the state backend's),
	// flushed by Run.
	usage *ledger.Recorder
	// running is the configuration the gateway started with, and
	// fileListen the listen address its gateway.yaml gave; pending is
	// what the last successful reload changed of the restart-only
	// settings (see restartOnly in reload.go).
	running    *config.Config
	fileListen string
	pending    atomic.Pointer[[]string]
	// reloadsOK and reloadsFailed count config reloads by result, for /metrics.
	reloadsOK, reloadsFailed atomic.Int64
}

// Handler is the gateway's HTTP handler, for a server the caller runs.
func (a *App) Handler() http.Handler { return a.server.Handler() }

// ServeListener serves on ln (TLS when configured) until ctx ends, then
// drains.
func (a *App) ServeListener(ctx context.Context, ln net.Listener) error {
	return a.server.Serve(ctx, ln)
}

// Run does the background work until ctx ends: approval expiries, message
// deliveries, the summaries of failed authentications (the last ones are
// written before Run returns).
func (a *App) Run(ctx context.Context) {
	var wg sync.WaitGroup
	if a.approval != nil {
		wg.Go(func() { a.approval.Run(ctx) })
	}
	if a.messaging != nil {
		wg.Go(func() { a.messaging.Run(ctx) })
	}
	if a.workflows != nil {
		wg.Go(func() { a.workflows.Run(ctx) })
	}
	wg.Go(func() { a.usage.Run(ctx, ledger.FlushEvery) })
	if a.a2a != nil {
		wg.Go(func() { a.a2a.Run(ctx) })
	}
	wg.Go(func() { a.sweepSpawned(ctx) })
	if a.siem != nil {
		wg.Go(func() { a.siem.Run(ctx) })
	}
	if a.sources != nil {
		wg.Go(func() { a.sources.Run(ctx) })
	}
	wg.Wait()
}

// sweepSpawned removes, at start and then hourly, the spawned agents whose
// TTL passed unused (they stopped authenticating at once; this frees their
// names and storage).
func (a *App) sweepSpawned(ctx context.Context) {
	t := time.NewTicker(time.Hour)
	defer t.Stop()
	for {
		sctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		n, err := a.registry.Sweep(sctx)
		cancel()
		switch {
		case err != nil:
			a.log.Warn("spawned agents: sweep failed", "error", err.Error())
		case n > 0:
			a.log.Info("spawned agents: expired unused agents removed", "count", n)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// trail is where the front doors write: the audit trail behind the
// failed-authentication summarizer.
func (a *App) trail() door.Appender {
	if a.sources == nil {
		return appender(a.audit)
	}
	return a.sources
}

// Close releases what Build started (the policy watcher, pooled connections).
func (a *App) Close() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = a.tracer.Shutdown(ctx) // flushes the last spans
	if a.workflows != nil {
		a.workflows.Close()
	}
	a.policies.Close()
	if a.openai != nil {
		a.openai.Close()
	}
	if a.mcp != nil {
		a.mcp.Close()
	}
	if a.state != nil && a.state.redis != nil {
		_ = a.state.redis.Close()
	}
}

// Build wires the components from cfg; it fails on anything that would
// leave a half-working server. The command and every end-to-end test build
// the gateway this way.
func Build(cfg *config.Config, o Options) (*App, error) {
	sidecar, log, auditLog := o.Sidecar, o.Log, o.Audit
	if sidecar != "" {
		if _, ok := cfg.Agents[sidecar]; !ok {
			return nil, &UsageError{fmt.Sprintf("--sidecar-agent %q: no such agent in %s/agents.yaml", sidecar, cfg.Dir)}
		}
	}
	// The counters outlive config reloads (each builds a new upstream set).
	upStats := upstream.NewStats()
	ups, err := upstream.New(cfg.Gateway.Upstreams, log, upstream.WithStats(upStats))
	if err != nil {
		return nil, &UsageError{err.Error()}
	}
	engine, err := newPolicies(cfg, log, auditLog)
	if err != nil {
		ups.Close()
		return nil, &UsageError{err.Error()}
	}
	a := &App{upstreamStats: upStats, spend: proxy.NewSpend(), audit: auditLog, policies: engine, keepAlive: o.KeepAlive,
		running: cfg, fileListen: cfg.Gateway.Listen, sidecar: sidecar, log: log,
		// Outbound calls of the gateway's own (endpoints, webhooks) reach
		// only what messaging.allowed_networks adds to the public addresses.
		egress: egress.Policy{Allowed: cfg.Gateway.Messaging.AllowedPrefixes}}
	if auditLog != nil {
		un := cfg.Gateway.HTTP.Unauthenticated
		a.sources = sourceguard.New(auditLog, sourceguard.Options{
			Rate: rate.Limit(float64(un.RateLimit.N) / un.RateLimit.Period.Seconds()), Burst: un.RateLimit.N,
			Window: un.AuditWindow.D(),
			// An agent's MCP notifications are summarized the same way.
			Folds: []sourceguard.Fold{mcp.MessageFold},
		})
	}
	a.rec = door.NewRecorder(a.trail(), cfg.Gateway.Audit, log)
	fail := func(err error) (*App, error) {
		if a.openai == nil {
			ups.Close() // else the OpenAI door's to close
		}
		a.Close()
		return nil, err
	}
	if a.state, err = newState(cfg, log); err != nil {
		return fail(&UsageError{err.Error()})
	}
	a.state.responses = newResponseState(cfg, a.state.redis)
	a.usage = ledger.NewRecorder(a.state.usage, log)
	a.metrics, a.checks = a.newMetrics(), a.baseChecks()
	a.embedModel.Store(embeddingsModel(cfg))
	a.embedSelf.Store(embeddingsSelf(cfg))
	if a.registry, err = a.newRegistry(cfg); err != nil {
		return fail(&UsageError{err.Error()})
	}
	a.keys = admin.NewKeys(a.state.admin, log)
	a.oauth = oauthStore(a.state, cfg)
	if a.frame, err = door.NewFrame(cfg, door.GateDeps{Sidecar: sidecar, Spawned: a.registry, Keys: a.keys, Teams: a.keys, Requests: a.state.limiter, Audit: a.rec, Log: log,
		Clients: oauthserver.Tokens{Store: a.oauth}}); err != nil {
		return fail(err)
	}
	for _, build := range a.doorList(ups) {
		d, err := build(cfg)
		if err != nil {
			return fail(err)
		}
		if d != nil {
			a.doors = append(a.doors, d)
		}
	}
	a.stateMetrics()
	if o.Shipper != nil {
		a.metrics.ShipStats(o.Shipper.Stats)
	}
	if err := a.wireSIEM(cfg, auditLog, a.egress, a.metrics, o.Version); err != nil {
		return fail(err)
	}
	if a.server, err = a.newServer(cfg, o.Tracer); err != nil {
		return fail(err)
	}
	return a, nil
}

// newServer is the HTTP shell with every door's routes.
func (a *App) newServer(cfg *config.Config, tracer *tracing.Tracer) (*server.Server, error) {
	tlsConfig, err := server.TLSConfig(cfg.Gateway.TLS, a.log)
	if err != nil {
		return nil, &UsageError{err.Error()}
	}
	if a.tracer = tracer; a.tracer == nil {
		a.tracer, err = tracing.New(cfg.Gateway.Tracing.OTLPEndpoint, cfg.Gateway.Tracing.ServiceName, 0)
		if err != nil {
			return nil, &UsageError{err.Error()}
		}
	}
	var routes []door.Route
	for _, d := range a.doors {
		routes = append(routes, d.Routes()...)
	}
	return server.New(server.Options{
		TLS:             tlsConfig,
		Tracer:          a.tracer,
		Frame:           a.frame,
		Routes:          routes,
		Log:             a.log,
		Metrics:         a.metrics,
		ShutdownTimeout: cfg.Gateway.ShutdownTimeout.D(),
		Checks:          a.checks,
		Bounds:          bounds(cfg.Gateway.HTTP, a.sources),
	})
}

// newRegistry builds the registry of agents, verbs and tools, with the
// spawned agents of the state backend.
func (a *App) newRegistry(cfg *config.Config) (*registry.Registry, error) {
	opts := []registry.Option{registry.WithLogger(a.log),
		registry.WithEmbedder(embedder{handler: a.Handler, model: func() string { return *a.embedModel.Load() }, self: a.embedSelf.Load})}
	if a.state.redis != nil {
		opts = append(opts, registry.WithVectorCache(registry.NewRedisVectorCache(a.state.redis,
			registry.RedisVectorCacheOptions{Timeout: cfg.Gateway.State.Timeout.D()})))
	}
	return registry.New(cfg, a.state.spawned, opts...)
}

// bounds are the server's connection limits from gateway.yaml's http.
func bounds(h listenconf.HTTP, sources *sourceguard.Guard) server.Bounds {
	return server.Bounds{
		ReadHeaderTimeout: h.ReadHeaderTimeout.D(), BodyIdle: h.BodyIdleTimeout.D(), WriteIdle: h.WriteIdleTimeout.D(),
		IdleTimeout: h.IdleTimeout.D(), ConnsPerSource: h.Unauthenticated.ConnsPerSource, Sources: sources,
	}
}

// appender keeps a nil *audit.Log from becoming a non-nil interface.
func appender(l *audit.Log) door.Appender {
	if l == nil {
		return nil
	}
	return l
}
