// Package metrics exports the gateway's Prometheus metrics at /metrics.
//
// A Metrics owns its own registry (no global state): the per-request series
// are derived from the request's scope.Exchange in one Observe call, the
// components' counters (audit log, policy engine, Redis state, ...) are read
// at scrape time through the functions given to AuditStats, PolicyStats,
// Counter and Gauge.
//
// Labels are bounded by construction:
//   - agent is the configured agent's id (agents.yaml), "unidentified"
//     before/without identification, or "spawned" for every agent
//     registered at run time (their ids are made at run time, so they
//     share one value); never a client-supplied value;
//   - route is the router's route template (echo's c.Path()), never the raw
//     URL path; an empty route is "unmatched";
//   - upstream is the configured provider name the request was routed to;
//   - status_class is the status's class (1xx … 5xx), stream "true" or
//     "false";
//   - detector, point, verdict, dimension and kind come from the gateway's
//     code and configuration.
//
// The model is deliberately not a label: it comes from the client's request
// body, and an agent's allow-list is made of globs (empty means any routed
// model), so even "allowed" models are unbounded. The routed upstream is the
// bounded stand-in (gateway_upstream_duration_seconds{upstream},
// gateway_ttft_seconds{upstream, stream}). Request, session and
// correlation ids are never labels.
package metrics

import (
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/policy"
	"github.com/sacpgw/gateway/upstream"
)

// Label values used when the real one is missing.
const (
	// Unidentified is the agent label of requests with no identified agent
	// (rejected before or by authentication, health checks, 404s).
	Unidentified = "unidentified"
	// Unmatched is the route label of requests that matched no route.
	Unmatched = "unmatched"
	// Spawned is the agent label of every agent registered at run time:
	// they come and go without a config change, so one series each would
	// grow without bound.
	Spawned = "spawned"
)

// DefaultBuckets are the latency buckets (seconds) of the request and
// upstream histograms: from the gateway's own sub-millisecond paths to
// multi-minute streamed answers.
var DefaultBuckets = []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300}

// TTFTBuckets are the buckets (seconds) of the time to first token: from a
// cached or tiny model's tens of milliseconds to a reasoning model (or a
// protocol agent's validated answer, released whole) taking minutes.
var TTFTBuckets = []float64{.025, .05, .1, .25, .5, .75, 1, 1.5, 2, 3, 5, 7.5, 10, 15, 20, 30, 60, 120}

// InterTokenBuckets are the buckets (seconds) of the gaps between a
// stream's content events: a few milliseconds per token when the model is
// fast, up to the seconds of a stalled provider.
var InterTokenBuckets = []float64{.001, .0025, .005, .01, .02, .03, .05, .075, .1, .15, .2, .3, .5, 1, 2.5, 5, 10}

// statusClasses are the status_class label values, by status / 100.
var statusClasses = [...]string{"other", "1xx", "2xx", "3xx", "4xx", "5xx"}

// ValidationBuckets are the buckets (seconds) of the approval policy's
// evaluation time: mostly well under a millisecond, bounded by
// timeouts.validation (5s by default).
var ValidationBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// escalationOutcomes are the outcome label values of
// gateway_approval_escalations_total; anything else is counted as "other",
// so a caller's mistake cannot grow the series.
var escalationOutcomes = map[string]bool{"approved": true, "rejected": true, "expired": true}

// policyPoints maps the Exchange's check names that record a policy
// decision to the point label. Approval and spawn decisions happen outside
// a proxied Exchange; their callers use PolicyDecision.
var policyPoints = map[string]string{
	scope.CheckPolicy:     "chat",
	scope.CheckGuardrails: "guardrails",
}

// Options configure New.
type Options struct {
	// Buckets are the request duration buckets in seconds; nil: DefaultBuckets.
	Buckets []float64
	// UpstreamBuckets are the upstream duration buckets; nil: Buckets.
	UpstreamBuckets []float64
	// TTFTBuckets and InterTokenBuckets are the buckets of the time to
	// first token and of the gaps between tokens; nil: the defaults above.
	TTFTBuckets, InterTokenBuckets []float64
	// NoRuntime leaves out the Go and process collectors (tests).
	NoRuntime bool
}

// Metrics holds the gateway's metrics and their registry. Its methods are
// safe for concurrent use.
type Metrics struct {
	reg *prometheus.Registry

	requests    *prometheus.CounterVec
	duration    *prometheus.HistogramVec
	agentDur    *prometheus.HistogramVec
	upstream    *prometheus.HistogramVec
	ttft        *prometheus.HistogramVec
	interToken  *prometheus.HistogramVec
	tokens      *prometheus.CounterVec
	sacpAnswers *prometheus.CounterVec
	sacpReasks  *prometheus.CounterVec
	redactions  *prometheus.CounterVec
	decisions   *prometheus.CounterVec
	rejections  *prometheus.CounterVec
	escalations *prometheus.CounterVec
	// validation has no labels; a vec, so that it is exported only once
	// something was observed, like every other per-event series.
	validation *prometheus.HistogramVec

	// Caches of label-bound children: label sets are bounded, so each
	// cache only grows to the number of series, and a hit costs an atomic
	// load and a map lookup instead of hashing label values into the vec.
	reqC   cache[reqKey, prometheus.Counter]
	durC   cache[string, prometheus.Observer]
	aDurC  cache[pair, prometheus.Observer]
	upC    cache[string, prometheus.Observer]
	ttftC  cache[pair, prometheus.Observer]
	itlC   cache[string, prometheus.Observer]
	agentC cache[string, *agentSeries]
	redC   cache[string, prometheus.Counter]
	decC   cache[pair, prometheus.Counter]
	rejC   cache[pair, prometheus.Counter]
}

// agentSeries are the per-agent children every Observe of that agent uses.
type agentSeries struct {
	prompt, completion prometheus.Counter
	sacpValid, sacpBad prometheus.Counter
	reasks             prometheus.Counter
}

type reqKey struct {
	agent, route string
	status       int
}

type pair struct{ a, b string }

// New returns metrics registered on a new registry together with the Go and
// process collectors.
func New(o Options) *Metrics {
	if o.Buckets == nil {
		o.Buckets = DefaultBuckets
	}
	if o.UpstreamBuckets == nil {
		o.UpstreamBuckets = o.Buckets
	}
	if o.TTFTBuckets == nil {
		o.TTFTBuckets = TTFTBuckets
	}
	if o.InterTokenBuckets == nil {
		o.InterTokenBuckets = InterTokenBuckets
	}
	m := &Metrics{reg: prometheus.NewRegistry()}
	if !o.NoRuntime {
		m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	counter := func(name, help string, labels ...string) *prometheus.CounterVec {
		v := prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, labels)
		m.reg.MustRegister(v)
		return v
	}
	histogram := func(name, help string, buckets []float64, labels ...string) *prometheus.HistogramVec {
		v := prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: name, Help: help, Buckets: buckets}, labels)
		m.reg.MustRegister(v)
		return v
	}
	m.requests = counter("gateway_requests_total", "Requests served, by agent, route template and HTTP status.", "agent", "route", "status")
	m.duration = histogram("gateway_request_duration_seconds", "End-to-end request latency, by route template.", o.Buckets, "route")
	// By agent in a histogram of its own: with the route as well, the
	// series would be routes × agents × classes × buckets.
	m.agentDur = histogram("gateway_agent_request_duration_seconds", "End-to-end request latency, by agent and status class (2xx, 4xx, 5xx...).", o.Buckets, "agent", "status_class")
	m.upstream = histogram("gateway_upstream_duration_seconds", "Latency of calls to an upstream model provider, by upstream.", o.UpstreamBuckets, "upstream")
	m.ttft = histogram("gateway_ttft_seconds", "Time from the request's arrival to the first content of the answer released to the client (a stream's first token; a JSON answer, or a protocol agent's validated answer, whole), by upstream and stream.", o.TTFTBuckets, "upstream", "stream")
	m.interToken = histogram("gateway_inter_token_seconds", "Gaps between successive content events of a stream released to the client, by upstream.", o.InterTokenBuckets, "upstream")
	m.tokens = counter("gateway_tokens_total", "Tokens reported by upstreams, by agent and kind (prompt, completion).", "agent", "kind")
	m.sacpAnswers = counter("gateway_sacp_answers_total", "SACP answers by agent and whether the final one was valid.", "agent", "valid")
	m.sacpReasks = counter("gateway_sacp_reasks_total", "SACP re-asks (model calls after the first) by agent.", "agent")
	m.redactions = counter("gateway_redactions_total", "Redacted values by detector.", "detector")
	m.decisions = counter("gateway_policy_decisions_total", "Policy decisions by decision point and verdict.", "point", "verdict")
	m.rejections = counter("gateway_ratelimit_rejections_total", "Requests rejected by a rate or token limit, by agent and dimension.", "agent", "dimension")
	m.escalations = counter("gateway_approval_escalations_total", "Escalations decided, by outcome (approved, rejected by a person, expired).", "outcome")
	m.validation = histogram("gateway_approval_validation_seconds", "Time the approval policy took to decide one request.", ValidationBuckets)

	m.reqC.mk = func(k reqKey) prometheus.Counter {
		return m.requests.WithLabelValues(k.agent, k.route, strconv.Itoa(k.status))
	}
	m.durC.mk = func(route string) prometheus.Observer { return m.duration.WithLabelValues(route) }
	m.aDurC.mk = func(p pair) prometheus.Observer { return m.agentDur.WithLabelValues(p.a, p.b) }
	m.upC.mk = func(name string) prometheus.Observer { return m.upstream.WithLabelValues(name) }
	m.ttftC.mk = func(p pair) prometheus.Observer { return m.ttft.WithLabelValues(p.a, p.b) }
	m.itlC.mk = func(name string) prometheus.Observer { return m.interToken.WithLabelValues(name) }
	m.agentC.mk = func(agent string) *agentSeries {
		return &agentSeries{
			prompt:     m.tokens.WithLabelValues(agent, "prompt"),
			completion: m.tokens.WithLabelValues(agent, "completion"),
			sacpValid:  m.sacpAnswers.WithLabelValues(agent, "true"),
			sacpBad:    m.sacpAnswers.WithLabelValues(agent, "false"),
			reasks:     m.sacpReasks.WithLabelValues(agent),
		}
	}
	m.redC.mk = func(d string) prometheus.Counter { return m.redactions.WithLabelValues(d) }
	m.decC.mk = func(p pair) prometheus.Counter { return m.decisions.WithLabelValues(p.a, p.b) }
	m.rejC.mk = func(p pair) prometheus.Counter { return m.rejections.WithLabelValues(p.a, p.b) }
	return m
}

// Registry returns the registry, for tests and extra collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition formats.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// Observe records one finished request: route is the route template (echo's
// c.Path(), not the URL path), status the HTTP status sent and d the
// end-to-end latency. Everything else is derived from ex, which may be nil.
// Children series of gateway_requests_total, gateway_tokens_total and
// gateway_sacp_answers_total are created on first use, so a series exists
// once something happened for its labels.
//
// The time to first token is observed here, from ex.Pace.First; the gaps
// between tokens are observed as they happen (ContentGap), as a stream
// has any number of them.
func (m *Metrics) Observe(ex *scope.Exchange, route string, status int, d time.Duration) {
	if route == "" {
		route = Unmatched
	}
	agent := agentLabel(ex)
	m.reqC.get(reqKey{agent, route, status}).Inc()
	m.durC.get(route).Observe(d.Seconds())
	m.aDurC.get(pair{agent, statusClass(status)}).Observe(d.Seconds())
	if ex == nil {
		return
	}
	if first := ex.Pace.First; !first.IsZero() {
		m.ttftC.get(pair{upstreamLabel(ex), strconv.FormatBool(ex.Stream)}).Observe(first.Sub(ex.Start).Seconds())
	}

	var as *agentSeries
	if ex.UsageKnown {
		as = m.agentC.get(agent)
		if ex.Usage.PromptTokens > 0 {
			as.prompt.Add(float64(ex.Usage.PromptTokens))
		}
		if ex.Usage.CompletionTokens > 0 {
			as.completion.Add(float64(ex.Usage.CompletionTokens))
		}
	}
	if o := ex.SACP; o != nil {
		if as == nil {
			as = m.agentC.get(agent)
		}
		if o.Valid {
			as.sacpValid.Inc()
		} else {
			as.sacpBad.Inc()
		}
		if o.Attempts > 1 {
			as.reasks.Add(float64(o.Attempts - 1))
		}
	}
	for det, n := range ex.Redactions {
		if n > 0 {
			m.redC.get(det).Add(float64(n))
		}
	}
	for _, v := range ex.Checks {
		if point, ok := policyPoints[v.Check]; ok && v.Verdict != "" {
			m.decC.get(pair{point, v.Verdict}).Inc()
		}
		if v.Check == scope.CheckLimits && v.Verdict == "reject" {
			dim := v.Dimension
			if dim == "" {
				dim = "unknown"
			}
			m.rejC.get(pair{agent, dim}).Inc()
		}
	}
}

// ContentGap observes one gap between two successive content events of a
// stream released to the client, in gateway_inter_token_seconds{upstream}.
// It implements scope.GapObserver: the server sets the Metrics as each
// exchange's Pace.Gaps.
func (m *Metrics) ContentGap(ex *scope.Exchange, gap time.Duration) {
	m.itlC.get(upstreamLabel(ex)).Observe(gap.Seconds())
}

var _ scope.GapObserver = (*Metrics)(nil)

// agentLabel is the agent label of an exchange (see the package comment).
func agentLabel(ex *scope.Exchange) string {
	switch {
	case ex == nil || ex.Agent == nil || ex.Agent.ID == "":
		return Unidentified
	case ex.Agent.SpawnedBy != "":
		// SpawnedBy is set only on agents registered at run time.
		return Spawned
	}
	return ex.Agent.ID
}

// upstreamLabel is the upstream an exchange's answer came from; content is
// only released after routing, so "unknown" marks a wiring bug.
func upstreamLabel(ex *scope.Exchange) string {
	if ex.Upstream == "" {
		return "unknown"
	}
	return ex.Upstream
}

// statusClass is the status_class label of an HTTP status.
func statusClass(status int) string {
	if c := status / 100; c >= 1 && c < len(statusClasses) {
		return statusClasses[c]
	}
	return statusClasses[0]
}

// ObserveUpstream records the latency of one call to the named upstream
// (a configured provider name).
func (m *Metrics) ObserveUpstream(name string, d time.Duration) {
	m.upC.get(name).Observe(d.Seconds())
}

// PolicyDecision counts a policy decision made outside a proxied request
// (approval, spawn) in gateway_policy_decisions_total{point, verdict}: the
// approval service counts each decision as point "approval" with its
// status as verdict. point and verdict must come from code, not input.
func (m *Metrics) PolicyDecision(point, verdict string) {
	m.decC.get(pair{point, verdict}).Inc()
}

// ApprovalEscalation counts a decided escalation in
// gateway_approval_escalations_total{outcome}: approved, rejected (by a
// person) or expired. Any other value is counted as "other".
func (m *Metrics) ApprovalEscalation(outcome string) {
	if !escalationOutcomes[outcome] {
		outcome = "other"
	}
	m.escalations.WithLabelValues(outcome).Inc()
}

// ApprovalValidation observes one approval policy evaluation in
// gateway_approval_validation_seconds.
func (m *Metrics) ApprovalValidation(d time.Duration) {
	m.validation.WithLabelValues().Observe(d.Seconds())
}

// AuditStats exports the audit log's counters, read from f at each scrape:
// gateway_audit_entries_total, _batches_total, _fsyncs_total,
// _fsync_seconds_total, _lost_total and _checkpoint_errors_total.
// Register one audit log per Metrics (a second call panics).
func (m *Metrics) AuditStats(f func() audit.Stats) {
	m.reg.MustRegister(&statsCollector[audit.Stats]{
		read: f,
		descs: []*prometheus.Desc{
			desc("gateway_audit_entries_total", "Audit entries made durable."),
			desc("gateway_audit_batches_total", "Audit group commits that wrote entries."),
			desc("gateway_audit_fsyncs_total", "Fsyncs of audit segments."),
			desc("gateway_audit_fsync_seconds_total", "Total time spent in audit fsyncs."),
			desc("gateway_audit_lost_total", "Audit appends refused because the trail was unavailable (records the trail does not have)."),
			desc("gateway_audit_checkpoint_errors_total", "Audit checkpoint writes that failed."),
		},
		emit: func(ch chan<- prometheus.Metric, d []*prometheus.Desc, s audit.Stats) {
			ch <- prometheus.MustNewConstMetric(d[0], prometheus.CounterValue, float64(s.Entries))
			ch <- prometheus.MustNewConstMetric(d[1], prometheus.CounterValue, float64(s.Batches))
			ch <- prometheus.MustNewConstMetric(d[2], prometheus.CounterValue, float64(s.Fsyncs))
			ch <- prometheus.MustNewConstMetric(d[3], prometheus.CounterValue, s.FsyncTime.Seconds())
			ch <- prometheus.MustNewConstMetric(d[4], prometheus.CounterValue, float64(s.Lost))
			ch <- prometheus.MustNewConstMetric(d[5], prometheus.CounterValue, float64(s.CheckpointErrors))
		},
	})
}

// PolicyStats exports the policy engine's counters, read from f at each
// scrape: gateway_policy_reloads_total{result=success|failure},
// gateway_policy_shadow_reloads_total{result}, gateway_policy_reload_failed
// (1 while the newest live policies do not compile),
// gateway_policy_fail_closed_total, gateway_policy_shadow_disagreements_total
// and gateway_policy_shadow_dropped_total.
func (m *Metrics) PolicyStats(f func() policy.Stats) {
	m.reg.MustRegister(&statsCollector[policy.Stats]{
		read: f,
		descs: []*prometheus.Desc{
			prometheus.NewDesc("gateway_policy_reloads_total", "Reloads of the live policies, by result.", []string{"result"}, nil),
			prometheus.NewDesc("gateway_policy_shadow_reloads_total", "Reloads of the shadow policies, by result.", []string{"result"}, nil),
			desc("gateway_policy_reload_failed", "1 while the newest live policy files do not compile (the last good ones keep serving)."),
			desc("gateway_policy_fail_closed_total", "Decisions the engine denied on the policy's behalf (error, undefined or malformed result)."),
			desc("gateway_policy_shadow_disagreements_total", "Shadow decisions that differed from the live one."),
			desc("gateway_policy_shadow_dropped_total", "Shadow evaluations skipped because the shadow queue was full."),
		},
		emit: func(ch chan<- prometheus.Metric, d []*prometheus.Desc, s policy.Stats) {
			ch <- prometheus.MustNewConstMetric(d[0], prometheus.CounterValue, float64(s.Reloads), "success")
			ch <- prometheus.MustNewConstMetric(d[0], prometheus.CounterValue, float64(s.ReloadFailures), "failure")
			ch <- prometheus.MustNewConstMetric(d[1], prometheus.CounterValue, float64(s.ShadowReloads), "success")
			ch <- prometheus.MustNewConstMetric(d[1], prometheus.CounterValue, float64(s.ShadowReloadFailures), "failure")
			failed := 0.0
			if !s.LastReloadOK {
				failed = 1
			}
			ch <- prometheus.MustNewConstMetric(d[2], prometheus.GaugeValue, failed)
			ch <- prometheus.MustNewConstMetric(d[3], prometheus.CounterValue, float64(s.FailClosed))
			ch <- prometheus.MustNewConstMetric(d[4], prometheus.CounterValue, float64(s.ShadowDisagreements))
			ch <- prometheus.MustNewConstMetric(d[5], prometheus.CounterValue, float64(s.ShadowDropped))
		},
	})
}

// UpstreamStats exports each upstream's counters, read from f at each
// scrape: gateway_upstream_failovers_total{upstream} (requests that moved
// on from it to another upstream) and
// gateway_upstream_breaker_opens_total{upstream}. The label's values are
// the configured upstreams' names, so the series stay few.
func (m *Metrics) UpstreamStats(f func() map[string]upstream.Counts) {
	m.reg.MustRegister(&statsCollector[map[string]upstream.Counts]{
		read: f,
		descs: []*prometheus.Desc{
			prometheus.NewDesc("gateway_upstream_failovers_total", "Requests moved on from this upstream to another after it failed before answering (connect error, timeout, 429, 5xx).", []string{"upstream"}, nil),
			prometheus.NewDesc("gateway_upstream_breaker_opens_total", "Times this upstream's circuit breaker opened (a failed probe included), in this replica.", []string{"upstream"}, nil),
		},
		emit: func(ch chan<- prometheus.Metric, d []*prometheus.Desc, by map[string]upstream.Counts) {
			for name, c := range by {
				ch <- prometheus.MustNewConstMetric(d[0], prometheus.CounterValue, float64(c.Failovers), name)
				ch <- prometheus.MustNewConstMetric(d[1], prometheus.CounterValue, float64(c.BreakerOpens), name)
			}
		},
	})
}

// Counter exports a cumulative count read from f at each scrape, e.g.
// Counter("gateway_state_redis_errors_total", ..., redis.Errors). name must
// be a valid metric name starting with "gateway_"; Counter panics otherwise,
// as for a duplicate name, since both are wiring bugs.
func (m *Metrics) Counter(name, help string, f func() float64) {
	mustPrefix(name)
	m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f))
}

// Gauge exports a value read from f at each scrape, e.g. whether Redis is
// reachable. The same rules as for Counter apply to name.
func (m *Metrics) Gauge(name, help string, f func() float64) {
	mustPrefix(name)
	m.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
}

func mustPrefix(name string) {
	if !strings.HasPrefix(name, "gateway_") {
		panic("metrics: metric name " + strconv.Quote(name) + " must start with gateway_")
	}
}

func desc(name, help string) *prometheus.Desc { return prometheus.NewDesc(name, help, nil, nil) }

// statsCollector reads a component's stats once per scrape and emits them
// as constant metrics, so one scrape makes one Stats call.
type statsCollector[S any] struct {
	read  func() S
	descs []*prometheus.Desc
	emit  func(chan<- prometheus.Metric, []*prometheus.Desc, S)
}

func (c *statsCollector[S]) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range c.descs {
		ch <- d
	}
}

func (c *statsCollector[S]) Collect(ch chan<- prometheus.Metric) { c.emit(ch, c.descs, c.read()) }

// cache maps a bounded key to a label-bound child. Reads are lock-free (an
// atomic load of an immutable map); a miss copies the map under mu, which
// happens once per series.
type cache[K comparable, V any] struct {
	m  atomic.Pointer[map[K]V]
	mu sync.Mutex
	mk func(K) V
}

func (c *cache[K, V]) get(k K) V {
	if p := c.m.Load(); p != nil {
		if v, ok := (*p)[k]; ok {
			return v
		}
	}
	return c.miss(k)
}

func (c *cache[K, V]) miss(k K) V {
	c.mu.Lock()
	defer c.mu.Unlock()
	var old map[K]V
	if p := c.m.Load(); p != nil {
		old = *p
		if v, ok := old[k]; ok {
			return v
		}
	}
	v := c.mk(k)
	next := make(map[K]V, len(old)+1)
	for k2, v2 := range old {
		next[k2] = v2
	}
	next[k] = v
	c.m.Store(&next)
	return v
}
