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
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	a2adoor "github.com/sacpgw/gateway/a2a"
	"github.com/sacpgw/gateway/server/listenconf"

	"github.com/fsnotify/fsnotify"
	"github.com/redis/go-redis/v9"
	"golang.org/x/time/rate"

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
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/mailbox"
	"github.com/sacpgw/gateway/mcp"
	"github.com/sacpgw/gateway/messaging"
	"github.com/sacpgw/gateway/oauthserver"
	"github.com/sacpgw/gateway/policy"
	"github.com/sacpgw/gateway/policy/bundle"
	"github.com/sacpgw/gateway/proxy"
	"github.com/sacpgw/gateway/registry"
	policyfs "github.com/sacpgw/gateway/rego"
	"github.com/sacpgw/gateway/server"
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

// state is where limits and approval states live: this process (memory),
// or Redis shared by every replica, with the configured fallback.
type state struct {
	limiter  limit.Limiter
	budget   limit.Budget
	store    approval.Store
	fallback *limit.Fallback
	redis    redis.UniversalClient
	// Agent-to-agent traffic: the delivery queue, the message history and
	// the agents registered at run time.
	queue   mailbox.Queue
	history mailbox.History
	spawned registry.Store
	// runs are the workflow runs; blobs the binary values moved out of
	// their answers.
	runs  workflow.Store
	blobs workflow.BlobStore
	// responses are the Responses API's kept conversations (responses_state.go).
	responses *proxy.ResponseState
	// usage is the usage per day (a file of state.dir, or Redis hashes).
	usage ledger.Store
	// admin holds the agents, keys and teams of the admin API.
	admin *admin.Store
}

func newState(cfg *config.Config, log *slog.Logger) (*state, error) {
	msg := cfg.Gateway.Messaging
	hist := mailbox.HistoryOptions{Retention: msg.HistoryRetention.D(), Timeout: cfg.Gateway.State.Timeout.D()}
	// A delivery left unacknowledged (its worker could not record it, or
	// the replica died) is handed out again only after it could have
	// finished all its attempts.
	attempts := time.Duration(max(1, cfg.Protocol.Limits.MaxRetryAttempts))
	claimIdle := max(time.Minute, 2*attempts*(msg.Timeout.D()+msg.RetryBackoff.D()))
	if cfg.Gateway.State.Backend != "redis" {
		// The agents spawned at run time outlive a restart: they are in a
		// file of state.dir.
		spawned, err := registry.NewFileStore(cfg.Gateway.State.Dir)
		if err != nil {
			return nil, fmt.Errorf("state.dir: %w", err)
		}
		usage, err := ledger.NewFileStore(cfg.Gateway.State.Dir)
		if err != nil {
			return nil, fmt.Errorf("state.dir: %w", err)
		}
		adm, err := admin.NewMemoryStore(cfg.Gateway.State.Dir)
		if err != nil {
			return nil, fmt.Errorf("state.dir: %w", err)
		}
		return &state{limiter: limit.NewMemory(), budget: limit.NewMemoryBudget(), store: approval.NewMemoryStore(), usage: usage,
			queue:   mailbox.NewMemoryQueueWithOptions(mailbox.MemoryQueueOptions{Capacity: msg.QueueCapacity, ClaimIdle: claimIdle}),
			history: mailbox.NewMemoryHistory(hist), spawned: spawned, runs: workflow.NewMemoryStore(),
			blobs: workflow.NewMemoryBlobStore(0), admin: adm}, nil
	}
	client, err := limit.NewStateClient(cfg.Gateway.State.RedisSettings(), cfg.Gateway.State.Timeout.D())
	if err != nil {
		return nil, fmt.Errorf("state: %w", err)
	}
	fb := &limit.Fallback{
		Primary: limit.NewRedis(client), Local: limit.NewMemory(),
		PrimaryBudget: limit.NewRedisBudget(client), LocalBudget: limit.NewMemoryBudget(),
		OnFailure: cfg.Gateway.State.OnFailure, Log: log,
	}
	// The consumer name must be unique per replica: the audit chain id is
	// (the chart sets it to the pod name).
	queue, err := mailbox.NewRedisQueue(client, mailbox.RedisQueueOptions{Consumer: cfg.Gateway.Audit.Chain, MaxLen: int64(msg.QueueCapacity), ClaimIdle: claimIdle,
		Timeout: cfg.Gateway.State.Timeout.D()})
	if err != nil {
		log.Warn("message queue: Redis not ready at startup; the queue retries on use", "error", err.Error())
	}
	return &state{limiter: fb, budget: fb, store: approval.NewRedisStore(client), fallback: fb, redis: client, usage: ledger.NewRedisStore(client, ""),
		queue: queue, history: mailbox.NewRedisHistory(client, hist), spawned: registry.NewRedisStore(client, ""),
		runs: workflow.NewRedisStore(client, "", cfg.Gateway.State.Timeout.D()), blobs: workflow.NewRedisBlobStore(client, "", cfg.Gateway.State.Timeout.D(), 0),
		admin: admin.NewRedisStore(client, cfg.Gateway.State.Timeout.D())}, nil
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

func newLogger(c config.Log, w io.Writer) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(c.Level))
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "text" {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return server.NewJSONLogger(w, opts)
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

// newMetrics is /metrics with what outlives reloads: the policies, spend,
// upstreams, config reloads and the Responses API's state.
func (a *App) newMetrics() *metrics.Metrics {
	m := metrics.New(metrics.Options{})
	m.PolicyStats(a.policies.Stats)
	m.Registry().MustRegister(a.spend)
	m.UpstreamStats(a.upstreamStats.ByUpstream)
	m.Counter("gateway_config_reloads_total", "Config reloads applied (a refused one is gateway_config_reload_failures_total).", func() float64 { return float64(a.reloadsOK.Load()) })
	m.Counter("gateway_config_reload_failures_total", "Config reloads refused: the last good configuration keeps serving.", func() float64 { return float64(a.reloadsFailed.Load()) })
	m.Gauge("gateway_config_restart_pending", "Settings a config reload changed that take effect only after a restart (0: the running configuration is the files').", func() float64 {
		if p := a.pending.Load(); p != nil {
			return float64(len(*p))
		}
		return 0
	})
	responsesMetrics(m, a.state.responses)
	m.Gauge("gateway_upstream_breakers_open", "Upstreams whose circuit breaker is open or half-open now, in this replica.", func() float64 {
		if a.openai == nil {
			return 0
		}
		return float64(a.openai.OpenBreakers())
	})
	return m
}

// baseChecks are the /readyz checks of the config and the policies.
func (a *App) baseChecks() []server.Check {
	engine := a.policies
	return []server.Check{
		{Name: "config", Ready: func(context.Context) error { return nil }, Detail: func() string {
			if p := a.pending.Load(); p != nil && len(*p) > 0 {
				return "reloaded, but these settings take effect only after a restart: " + strings.Join(*p, ", ")
			}
			return ""
		}},
		{Name: "policies", Ready: func(context.Context) error { return engine.Ready() }, Detail: func() string {
			if p := engine.ReloadProblem(); p != "" {
				// A refused bundle reads "policy bundle refused: ..." here.
				return "the last reload was rejected and the last good policies serve: " + p
			}
			return ""
		}},
	}
}

// stateMetrics adds the audit trail's and the shared state's checks and
// metrics, after the doors'.
func (a *App) stateMetrics() {
	m, auditLog := a.metrics, a.audit
	if auditLog != nil && a.running.Gateway.Audit.FailMode == "closed" {
		// Closed mode cannot answer without the trail: out of the Service.
		a.checks = append(a.checks, server.Check{Name: "audit", Ready: func(context.Context) error { return auditLog.Ready() }})
	}
	if fb := a.state.fallback; fb != nil {
		m.Counter("gateway_state_redis_fallbacks_total", "Limit decisions served by the local limiter because Redis failed.", func() float64 { return float64(fb.Fallbacks()) })
		m.Counter("gateway_state_redis_errors_total", "Redis errors of the shared limits.", func() float64 { return float64(fb.Errors()) })
		a.checks = append(a.checks, server.Check{Name: "state", Ready: func(ctx context.Context) error {
			ctx, cancel := context.WithTimeout(ctx, time.Second)
			defer cancel()
			return fb.Ready(ctx)
		}})
	}
	if auditLog != nil {
		m.AuditStats(auditLog.Stats)
	}
	if g := a.sources; g != nil {
		m.Gauge("gateway_unauthenticated_sources", "Source addresses tracked for failed authentications (summarized and limited per address).", func() float64 { return float64(g.Sources()) })
	}
}

// embeddingsModel is the model of registry.embeddings ("" when unset: the
// registry then ranks text lexically and never calls the embedder).
func embeddingsModel(cfg *config.Config) *string {
	m := ""
	if e := cfg.Registry.Embeddings; e != nil {
		m = e.Model
	}
	return &m
}

// embeddingsSelf is the identity the gateway embeds agents' profiles as:
// allowed the embeddings model and nothing else, under
// registry.embeddings' own limits. Nil without registry.embeddings.
func embeddingsSelf(cfg *config.Config) *roster.Agent {
	e := cfg.Registry.Embeddings
	if e == nil {
		return nil
	}
	rate, tokens := e.RateLimit, e.TokenLimit
	if rate.N == 0 {
		rate = config.Rate{N: 600, Period: time.Minute}
	}
	if tokens.N == 0 {
		tokens = config.Rate{N: 2_000_000, Period: time.Hour}
	}
	return &roster.Agent{ID: registry.ProfileCaller, Type: "gateway", Models: []string{e.Model},
		RateLimit: rate, TokenLimit: tokens, MaxRequestSize: 1 << 20}
}

// bounds are the server's connection limits from gateway.yaml's http.
func bounds(h listenconf.HTTP, sources *sourceguard.Guard) server.Bounds {
	return server.Bounds{
		ReadHeaderTimeout: h.ReadHeaderTimeout.D(), BodyIdle: h.BodyIdleTimeout.D(), WriteIdle: h.WriteIdleTimeout.D(),
		IdleTimeout: h.IdleTimeout.D(), ConnsPerSource: h.Unauthenticated.ConnsPerSource, Sources: sources,
	}
}

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

// appender keeps a nil *audit.Log from becoming a non-nil interface.
func appender(l *audit.Log) door.Appender {
	if l == nil {
		return nil
	}
	return l
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

// Reload loads the config directory again and, if it is valid, swaps in a
// new OpenAI front door built from it (agents, tokens, limits, models,
// upstreams, protocol and redaction settings). A bad config keeps the last
// good one and says why. Either way the attempt is audited. What is bound
// at startup (listen address, TLS, audit, state backend, policy dir, the
// approval service) needs a restart.
func (a *App) Reload(dir string, current *config.Config) *config.Config {
	cfg, err := config.Load(dir)
	summary := audit.Members("event", "reload", "files", configDigest(dir))
	var pending []string
	if err == nil {
		pending = restartPending(a.running, cfg, a.fileListen)
		cfg.Gateway.Listen = current.Gateway.Listen
		err = a.reconfigure(cfg)
	}
	if err != nil {
		a.reloadsFailed.Add(1)
	} else {
		a.reloadsOK.Add(1)
		a.pending.Store(&pending)
		summary.Any("restart_pending", pending)
		if len(pending) > 0 {
			a.log.Warn("config reloaded, but these settings take effect only after a restart; the running values stay", "dir", dir, "restart_pending", strings.Join(pending, ", "))
		}
	}
	summary.Bool("ok", err == nil)
	if err != nil {
		summary.Str("error", err.Error())
		a.log.Error("config reload failed; the last good configuration keeps serving", "dir", dir, "error", err.Error())
	} else {
		a.log.Info("config reloaded", "dir", dir, "agents", len(cfg.Agents))
	}
	if _, aerr := a.audit.Append(context.Background(), audit.Record{Kind: audit.KindConfigReload, Object: summary}); aerr != nil {
		a.log.Error("audit entry not written", "kind", audit.KindConfigReload, "error", aerr.Error())
	}
	if err != nil {
		return current
	}
	return cfg
}

// Reconfigurer is a component that takes a new configuration without a
// restart, all or nothing: Prepare builds and checks everything cfg needs
// and returns apply, which swaps it in and cannot fail. Requests in flight
// finish under the configuration they began with. Every door is one
// (door.Door), and so is the door frame.
type Reconfigurer interface {
	Prepare(cfg *config.Config) (apply func(), err error)
}

var _ Reconfigurer = (*door.Frame)(nil)

// reconfigure prepares the frame and every door for cfg, in the order of
// doorList (the OpenAI door last: it holds the new upstream pools), and
// applies them all only when every one is ready: a config that fails
// anywhere keeps the last good one everywhere.
func (a *App) reconfigure(cfg *config.Config) error {
	rs := []Reconfigurer{a.frame}
	for _, d := range a.doors {
		rs = append(rs, d)
	}
	applies := make([]func(), 0, len(rs))
	for _, r := range rs {
		apply, err := r.Prepare(cfg)
		if err != nil {
			return err
		}
		applies = append(applies, apply)
	}
	for _, apply := range applies {
		apply()
	}
	a.embedModel.Store(embeddingsModel(cfg))
	a.embedSelf.Store(embeddingsSelf(cfg))
	return nil
}

// watchConfig reloads on changes to the config directory, debounced so an
// editor's write-rename (or a ConfigMap's symlink swap) is one reload.
func (a *App) watchConfig(ctx context.Context, dir string, cfg *config.Config) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("config watch: %w", err)
	}
	if err := w.Add(dir); err != nil {
		w.Close()
		return fmt.Errorf("config watch %s: %w", dir, err)
	}
	go func() {
		defer w.Close()
		var timer <-chan time.Time
		for {
			select {
			case <-ctx.Done():
				return
			case ev, ok := <-w.Events:
				if !ok {
					return
				}
				if ev.Op&(fsnotify.Write|fsnotify.Create|fsnotify.Rename|fsnotify.Remove) != 0 {
					timer = time.After(300 * time.Millisecond)
				}
			case err, ok := <-w.Errors:
				if !ok {
					return
				}
				a.log.Warn("config watch", "error", err.Error())
			case <-timer:
				timer = nil
				cfg = a.Reload(dir, cfg)
			}
		}
	}()
	return nil
}
