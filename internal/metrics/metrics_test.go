package metrics

import (
	"fmt"
	"io"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil/promlint"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/policy"
)

const chatRoute = "/v1/chat/completions"

// chat is a finished SACP chat request as the pipeline leaves it.
func chat(agent *roster.Agent, reqID, model string) *scope.Exchange {
	return &scope.Exchange{
		RequestID:  reqID,
		SessionID:  "sess-" + reqID,
		Start:      time.Now(),
		Agent:      agent,
		Model:      model,
		Upstream:   "openai",
		Usage:      scope.Usage{PromptTokens: 120, CompletionTokens: 30, TotalTokens: 150},
		UsageKnown: true,
		Attempts:   3,
		Redactions: map[string]int{"email": 2, "iban": 1},
		SACP:       &scope.SACPOutcome{Status: "success", Valid: true, Attempts: 3},
		Checks: []scope.Verdict{
			{Check: scope.CheckAuth, Verdict: "pass", Method: "token"},
			{Check: scope.CheckLimits, Verdict: "pass", Requests: "10/s", Tokens: "none"},
			{Check: scope.CheckPolicy, Verdict: "allow", DecisionID: reqID, Revision: "r1"},
			{Check: scope.CheckProtocol, Verdict: "valid", Attempts: 3},
			{Check: scope.CheckGuardrails, Verdict: "pass", DecisionID: reqID},
		},
	}
}

func TestObserveChat(t *testing.T) {
	m := New(Options{NoRuntime: true, Buckets: []float64{0.5, 2}})
	billing := &roster.Agent{ID: "billing"}

	m.Observe(chat(billing, "req-1", "gpt-4o"), chatRoute, 200, 1500*time.Millisecond)
	m.ObserveUpstream("openai", 1200*time.Millisecond)

	// An invalid answer on the first try, no usage reported.
	ex := chat(billing, "req-2", "gpt-4o")
	ex.UsageKnown, ex.Redactions = false, nil
	ex.SACP = &scope.SACPOutcome{Status: "failure", Valid: false, Attempts: 1}
	m.Observe(ex, chatRoute, 200, 125*time.Millisecond)

	// Denied by policy.
	ex = &scope.Exchange{RequestID: "req-3", Agent: billing, Checks: []scope.Verdict{
		{Check: scope.CheckPolicy, Verdict: "deny", Reasons: []string{"no"}},
	}}
	m.Observe(ex, chatRoute, 403, 250*time.Millisecond)

	// Rejected by the token budget.
	ex = &scope.Exchange{RequestID: "req-4", Agent: billing, Checks: []scope.Verdict{
		{Check: scope.CheckLimits, Verdict: "reject", Dimension: "tokens"},
	}}
	m.Observe(ex, chatRoute, 429, 250*time.Millisecond)

	// Unauthenticated, and a 404 with no route.
	m.Observe(&scope.Exchange{RequestID: "req-5"}, chatRoute, 401, 250*time.Millisecond)
	m.Observe(nil, "", 404, 250*time.Millisecond)

	// An approval decision made outside the proxy.
	m.PolicyDecision("approval", "approved")

	want := `
# HELP gateway_agent_request_duration_seconds End-to-end request latency, by agent and status class (2xx, 4xx, 5xx...).
# TYPE gateway_agent_request_duration_seconds histogram
gateway_agent_request_duration_seconds_bucket{agent="billing",status_class="2xx",le="0.5"} 1
gateway_agent_request_duration_seconds_bucket{agent="billing",status_class="2xx",le="2"} 2
gateway_agent_request_duration_seconds_bucket{agent="billing",status_class="2xx",le="+Inf"} 2
gateway_agent_request_duration_seconds_sum{agent="billing",status_class="2xx"} 1.625
gateway_agent_request_duration_seconds_count{agent="billing",status_class="2xx"} 2
gateway_agent_request_duration_seconds_bucket{agent="billing",status_class="4xx",le="0.5"} 2
gateway_agent_request_duration_seconds_bucket{agent="billing",status_class="4xx",le="2"} 2
gateway_agent_request_duration_seconds_bucket{agent="billing",status_class="4xx",le="+Inf"} 2
gateway_agent_request_duration_seconds_sum{agent="billing",status_class="4xx"} 0.5
gateway_agent_request_duration_seconds_count{agent="billing",status_class="4xx"} 2
gateway_agent_request_duration_seconds_bucket{agent="unidentified",status_class="4xx",le="0.5"} 2
gateway_agent_request_duration_seconds_bucket{agent="unidentified",status_class="4xx",le="2"} 2
gateway_agent_request_duration_seconds_bucket{agent="unidentified",status_class="4xx",le="+Inf"} 2
gateway_agent_request_duration_seconds_sum{agent="unidentified",status_class="4xx"} 0.5
gateway_agent_request_duration_seconds_count{agent="unidentified",status_class="4xx"} 2
# HELP gateway_policy_decisions_total Policy decisions by decision point and verdict.
# TYPE gateway_policy_decisions_total counter
gateway_policy_decisions_total{point="approval",verdict="approved"} 1
gateway_policy_decisions_total{point="chat",verdict="allow"} 2
gateway_policy_decisions_total{point="chat",verdict="deny"} 1
gateway_policy_decisions_total{point="guardrails",verdict="pass"} 2
# HELP gateway_ratelimit_rejections_total Requests rejected by a rate or token limit, by agent and dimension.
# TYPE gateway_ratelimit_rejections_total counter
gateway_ratelimit_rejections_total{agent="billing",dimension="tokens"} 1
# HELP gateway_redactions_total Redacted values by detector.
# TYPE gateway_redactions_total counter
gateway_redactions_total{detector="email"} 2
gateway_redactions_total{detector="iban"} 1
# HELP gateway_request_duration_seconds End-to-end request latency, by route template.
# TYPE gateway_request_duration_seconds histogram
gateway_request_duration_seconds_bucket{route="/v1/chat/completions",le="0.5"} 4
gateway_request_duration_seconds_bucket{route="/v1/chat/completions",le="2"} 5
gateway_request_duration_seconds_bucket{route="/v1/chat/completions",le="+Inf"} 5
gateway_request_duration_seconds_sum{route="/v1/chat/completions"} 2.375
gateway_request_duration_seconds_count{route="/v1/chat/completions"} 5
gateway_request_duration_seconds_bucket{route="unmatched",le="0.5"} 1
gateway_request_duration_seconds_bucket{route="unmatched",le="2"} 1
gateway_request_duration_seconds_bucket{route="unmatched",le="+Inf"} 1
gateway_request_duration_seconds_sum{route="unmatched"} 0.25
gateway_request_duration_seconds_count{route="unmatched"} 1
# HELP gateway_requests_total Requests served, by agent, route template and HTTP status.
# TYPE gateway_requests_total counter
gateway_requests_total{agent="billing",route="/v1/chat/completions",status="200"} 2
gateway_requests_total{agent="billing",route="/v1/chat/completions",status="403"} 1
gateway_requests_total{agent="billing",route="/v1/chat/completions",status="429"} 1
gateway_requests_total{agent="unidentified",route="/v1/chat/completions",status="401"} 1
gateway_requests_total{agent="unidentified",route="unmatched",status="404"} 1
# HELP gateway_sacp_answers_total SACP answers by agent and whether the final one was valid.
# TYPE gateway_sacp_answers_total counter
gateway_sacp_answers_total{agent="billing",valid="false"} 1
gateway_sacp_answers_total{agent="billing",valid="true"} 1
# HELP gateway_sacp_reasks_total SACP re-asks (model calls after the first) by agent.
# TYPE gateway_sacp_reasks_total counter
gateway_sacp_reasks_total{agent="billing"} 2
# HELP gateway_tokens_total Tokens reported by upstreams, by agent and kind (prompt, completion).
# TYPE gateway_tokens_total counter
gateway_tokens_total{agent="billing",kind="completion"} 30
gateway_tokens_total{agent="billing",kind="prompt"} 120
# HELP gateway_upstream_duration_seconds Latency of calls to an upstream model provider, by upstream.
# TYPE gateway_upstream_duration_seconds histogram
gateway_upstream_duration_seconds_bucket{upstream="openai",le="0.5"} 0
gateway_upstream_duration_seconds_bucket{upstream="openai",le="2"} 1
gateway_upstream_duration_seconds_bucket{upstream="openai",le="+Inf"} 1
gateway_upstream_duration_seconds_sum{upstream="openai"} 1.2
gateway_upstream_duration_seconds_count{upstream="openai"} 1
`
	compare(t, m, want)
}

// compare gathers the registry and compares the text exposition of the
// named families (all if none) with want. (testutil is not used: it needs a
// module the gateway's go.sum does not have.)
func compare(t *testing.T, m *Metrics, want string, names ...string) {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, mf := range mfs {
		if len(names) > 0 && !slices.Contains(names, mf.GetName()) {
			continue
		}
		if _, err := expfmt.MetricFamilyToText(&b, mf); err != nil {
			t.Fatal(err)
		}
	}
	if got := b.String(); strings.TrimSpace(got) != strings.TrimSpace(want) {
		t.Fatalf("exposition differs\n--- got:\n%s\n--- want:\n%s", got, strings.TrimSpace(want))
	}
}

// value reads a counter.
func value(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var d dto.Metric
	if err := c.Write(&d); err != nil {
		t.Fatal(err)
	}
	return d.GetCounter().GetValue()
}

// series counts the series (samples of counters, histograms as one) in the
// registry.
func series(t *testing.T, m *Metrics) int {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mf := range mfs {
		n += len(mf.GetMetric())
	}
	return n
}

func scrape(t *testing.T, m *Metrics) string {
	t.Helper()
	rec := httptest.NewRecorder()
	m.Handler().ServeHTTP(rec, httptest.NewRequest("GET", "/metrics", nil))
	if rec.Code != 200 {
		t.Fatalf("scrape: status %d", rec.Code)
	}
	b, _ := io.ReadAll(rec.Body)
	return string(b)
}

// TestTimeToFirstTokenAndGaps: the time to first token is observed once
// per answer that released content, by upstream and stream; each gap
// between a stream's content releases is observed as it happens; an
// answer without content (an error) observes neither.
func TestTimeToFirstTokenAndGaps(t *testing.T) {
	m := New(Options{NoRuntime: true, TTFTBuckets: []float64{0.5, 2}, InterTokenBuckets: []float64{0.01, 0.1}})
	start := time.Now()
	billing := &roster.Agent{ID: "billing"}

	// A stream: first content after 300ms, then gaps of 5ms, 50ms, 5ms.
	ex := &scope.Exchange{Start: start, Agent: billing, Upstream: "openai", Stream: true}
	ex.Pace.Gaps = m
	at := start.Add(300 * time.Millisecond)
	for _, gap := range []time.Duration{0, 5 * time.Millisecond, 50 * time.Millisecond, 5 * time.Millisecond} {
		at = at.Add(gap)
		ex.Content(at)
	}
	m.Observe(ex, chatRoute, 200, time.Second)

	// A JSON answer, released whole after 1.5s: a first token, no gap.
	ex = &scope.Exchange{Start: start, Agent: billing, Upstream: "azure"}
	ex.Pace.Gaps = m
	ex.Content(start.Add(1500 * time.Millisecond))
	m.Observe(ex, chatRoute, 200, 1500*time.Millisecond)

	// An upstream error: no content, nothing observed.
	m.Observe(&scope.Exchange{Start: start, Agent: billing, Upstream: "openai", Stream: true}, chatRoute, 502, time.Second)

	want := `
# HELP gateway_inter_token_seconds Gaps between successive content events of a stream released to the client, by upstream.
# TYPE gateway_inter_token_seconds histogram
gateway_inter_token_seconds_bucket{upstream="openai",le="0.01"} 2
gateway_inter_token_seconds_bucket{upstream="openai",le="0.1"} 3
gateway_inter_token_seconds_bucket{upstream="openai",le="+Inf"} 3
gateway_inter_token_seconds_sum{upstream="openai"} 0.06
gateway_inter_token_seconds_count{upstream="openai"} 3
# HELP gateway_ttft_seconds Time from the request's arrival to the first content of the answer released to the client (a stream's first token; a JSON answer, or a protocol agent's validated answer, whole), by upstream and stream.
# TYPE gateway_ttft_seconds histogram
gateway_ttft_seconds_bucket{stream="false",upstream="azure",le="0.5"} 0
gateway_ttft_seconds_bucket{stream="false",upstream="azure",le="2"} 1
gateway_ttft_seconds_bucket{stream="false",upstream="azure",le="+Inf"} 1
gateway_ttft_seconds_sum{stream="false",upstream="azure"} 1.5
gateway_ttft_seconds_count{stream="false",upstream="azure"} 1
gateway_ttft_seconds_bucket{stream="true",upstream="openai",le="0.5"} 1
gateway_ttft_seconds_bucket{stream="true",upstream="openai",le="2"} 1
gateway_ttft_seconds_bucket{stream="true",upstream="openai",le="+Inf"} 1
gateway_ttft_seconds_sum{stream="true",upstream="openai"} 0.3
gateway_ttft_seconds_count{stream="true",upstream="openai"} 1
`
	compare(t, m, want, "gateway_ttft_seconds", "gateway_inter_token_seconds")
}

// TestSpawnedAgentsShareALabel: agents registered at run time have ids
// made at run time; one series each would grow without bound, so every
// per-agent series counts them under "spawned".
func TestSpawnedAgentsShareALabel(t *testing.T) {
	m := New(Options{NoRuntime: true, Buckets: []float64{1}})
	for i := range 50 {
		a := &roster.Agent{ID: fmt.Sprintf("worker-%d", i), SpawnedBy: "orchestrator"}
		ex := chat(a, fmt.Sprintf("req-%d", i), "gpt-4o")
		ex.Checks = append(ex.Checks, scope.Verdict{Check: scope.CheckLimits, Verdict: "reject", Dimension: "requests"})
		m.Observe(ex, chatRoute, 200, time.Millisecond)
	}
	m.Observe(chat(&roster.Agent{ID: "orchestrator"}, "req-o", "gpt-4o"), chatRoute, 503, time.Millisecond)
	body := scrape(t, m)
	if strings.Contains(body, "worker-") {
		t.Errorf("a spawned agent's id is a label value:\n%s", body)
	}
	for _, line := range []string{
		`gateway_requests_total{agent="spawned",route="/v1/chat/completions",status="200"} 50`,
		`gateway_tokens_total{agent="spawned",kind="prompt"} 6000`,
		`gateway_sacp_answers_total{agent="spawned",valid="true"} 50`,
		`gateway_ratelimit_rejections_total{agent="spawned",dimension="requests"} 50`,
		`gateway_agent_request_duration_seconds_count{agent="spawned",status_class="2xx"} 50`,
		`gateway_agent_request_duration_seconds_count{agent="orchestrator",status_class="5xx"} 1`,
	} {
		if !strings.Contains(body, line) {
			t.Errorf("exposition lacks %s", line)
		}
	}
}

func TestStatusClass(t *testing.T) {
	for status, want := range map[int]string{101: "1xx", 200: "2xx", 204: "2xx", 304: "3xx", 404: "4xx", 499: "4xx", 503: "5xx", 0: "other", 99: "other", 600: "other"} {
		if got := statusClass(status); got != want {
			t.Errorf("statusClass(%d) = %q, want %q", status, got, want)
		}
	}
}

func TestLabelsBounded(t *testing.T) {
	m := New(Options{NoRuntime: true})
	a := &roster.Agent{ID: "billing", Models: []string{"gpt-*"}}
	m.Observe(chat(a, "req-first", "gpt-first"), chatRoute, 200, time.Millisecond)
	m.ObserveUpstream("openai", time.Millisecond)
	before := series(t, m)

	for i := range 1000 {
		id := fmt.Sprintf("req-%d-x", i)
		model := fmt.Sprintf("client-model-%d", i)
		m.Observe(chat(a, id, model), chatRoute, 200, time.Millisecond)
		m.ObserveUpstream("openai", time.Millisecond)
	}
	if after := series(t, m); after != before {
		t.Fatalf("1000 request ids/models made %d series, want %d", after, before)
	}
	body := scrape(t, m)
	for _, s := range []string{"req-", "client-model-", "gpt-first", "sess-"} {
		if strings.Contains(body, s) {
			t.Errorf("exposition contains a per-request value %q", s)
		}
	}
	if !strings.Contains(body, `gateway_requests_total{agent="billing",route="/v1/chat/completions",status="200"} 1001`) {
		t.Errorf("requests not counted:\n%s", body)
	}
}

func TestComponentStatsAtScrape(t *testing.T) {
	m := New(Options{})
	var mu sync.Mutex
	as := audit.Stats{Entries: 10, Batches: 4, Fsyncs: 5, FsyncTime: 250 * time.Millisecond}
	ps := policy.Stats{Reloads: 2, LastReloadOK: true}
	m.AuditStats(func() audit.Stats { mu.Lock(); defer mu.Unlock(); return as })
	m.PolicyStats(func() policy.Stats { mu.Lock(); defer mu.Unlock(); return ps })
	var redisErrs float64 = 3
	m.Counter("gateway_state_redis_errors_total", "Redis errors.", func() float64 { mu.Lock(); defer mu.Unlock(); return redisErrs })
	m.Gauge("gateway_state_redis_up", "1 while Redis answers.", func() float64 { return 1 })

	body := scrape(t, m)
	for _, line := range []string{
		"gateway_audit_entries_total 10",
		"gateway_audit_fsyncs_total 5",
		"gateway_audit_fsync_seconds_total 0.25",
		"gateway_audit_lost_total 0",
		`gateway_policy_reloads_total{result="success"} 2`,
		`gateway_policy_reloads_total{result="failure"} 0`,
		"gateway_policy_reload_failed 0",
		"gateway_policy_shadow_disagreements_total 0",
		"gateway_state_redis_errors_total 3",
		"gateway_state_redis_up 1",
		"go_goroutines ",
	} {
		if !strings.Contains(body, line) {
			t.Errorf("first scrape lacks %q", line)
		}
	}

	// The components move on; the next scrape reads them again.
	mu.Lock()
	as.Entries, as.Lost, as.FsyncTime = 12, 1, 1500*time.Millisecond
	ps.ReloadFailures, ps.LastReloadOK, ps.ShadowDisagreements = 1, false, 7
	redisErrs = 4
	mu.Unlock()

	want := `
# HELP gateway_audit_entries_total Audit entries made durable.
# TYPE gateway_audit_entries_total counter
gateway_audit_entries_total 12
# HELP gateway_audit_fsync_seconds_total Total time spent in audit fsyncs.
# TYPE gateway_audit_fsync_seconds_total counter
gateway_audit_fsync_seconds_total 1.5
# HELP gateway_audit_lost_total Audit appends refused because the trail was unavailable (records the trail does not have).
# TYPE gateway_audit_lost_total counter
gateway_audit_lost_total 1
# HELP gateway_policy_reload_failed 1 while the newest live policy files do not compile (the last good ones keep serving).
# TYPE gateway_policy_reload_failed gauge
gateway_policy_reload_failed 1
# HELP gateway_policy_reloads_total Reloads of the live policies, by result.
# TYPE gateway_policy_reloads_total counter
gateway_policy_reloads_total{result="failure"} 1
gateway_policy_reloads_total{result="success"} 2
# HELP gateway_policy_shadow_disagreements_total Shadow decisions that differed from the live one.
# TYPE gateway_policy_shadow_disagreements_total counter
gateway_policy_shadow_disagreements_total 7
# HELP gateway_state_redis_errors_total Redis errors.
# TYPE gateway_state_redis_errors_total counter
gateway_state_redis_errors_total 4
`
	compare(t, m, want,
		"gateway_audit_entries_total", "gateway_audit_fsync_seconds_total", "gateway_audit_lost_total",
		"gateway_policy_reload_failed", "gateway_policy_reloads_total",
		"gateway_policy_shadow_disagreements_total", "gateway_state_redis_errors_total")
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	if probs, err := promlint.NewWithMetricFamilies(mfs).Lint(); err != nil || len(probs) > 0 {
		t.Fatalf("lint: %v %v", err, probs)
	}
}

func TestCounterNeedsPrefix(t *testing.T) {
	m := New(Options{NoRuntime: true})
	defer func() {
		if recover() == nil {
			t.Fatal("Counter accepted a name without the gateway_ prefix")
		}
	}()
	m.Counter("redis_errors_total", "x", func() float64 { return 0 })
}

func TestObserveConcurrent(t *testing.T) {
	m := New(Options{NoRuntime: true})
	agents := []*roster.Agent{{ID: "a"}, {ID: "b"}, {ID: "c"}, nil}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 500 {
				a := agents[(g+i)%len(agents)]
				m.Observe(chat(a, "r", "m"), chatRoute, 200+(i%3), time.Millisecond)
				m.ObserveUpstream(fmt.Sprintf("up%d", i%2), time.Millisecond)
				if i%50 == 0 {
					_ = scrape(t, m)
				}
			}
		})
	}
	wg.Wait()
	if got := value(t, m.requests.WithLabelValues("a", chatRoute, "200")) +
		value(t, m.requests.WithLabelValues("a", chatRoute, "201")) +
		value(t, m.requests.WithLabelValues("a", chatRoute, "202")); got != 1000 {
		t.Fatalf("agent a: %v requests, want 1000", got)
	}
	if got := value(t, m.tokens.WithLabelValues(Unidentified, "prompt")); got != 1000*120 {
		t.Fatalf("unidentified prompt tokens %v", got)
	}
}

func BenchmarkObserve(b *testing.B) {
	m := New(Options{NoRuntime: true})
	ex := chat(&roster.Agent{ID: "billing"}, "req-1", "gpt-4o")
	b.ReportAllocs()
	for b.Loop() {
		m.Observe(ex, chatRoute, 200, 3*time.Millisecond)
	}
}

func BenchmarkObserveParallel(b *testing.B) {
	m := New(Options{NoRuntime: true})
	var exs []*scope.Exchange
	for _, id := range []string{"a", "b", "c", "d"} {
		exs = append(exs, chat(&roster.Agent{ID: id}, "r", "m"))
	}
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		i := 0
		for pb.Next() {
			m.Observe(exs[i%len(exs)], chatRoute, 200, 3*time.Millisecond)
			i++
		}
	})
}

// The approval service's measurements: decisions by status (the policy
// decisions counter, point "approval"), escalations by outcome (bounded:
// anything unknown is "other"), and the policy's evaluation time.
func TestApprovalMetrics(t *testing.T) {
	m := New(Options{NoRuntime: true})
	for _, v := range []string{"approved", "approved", "rejected", "escalated"} {
		m.PolicyDecision("approval", v)
	}
	for _, o := range []string{"approved", "expired", "expired", "req-123"} {
		m.ApprovalEscalation(o)
	}
	m.ApprovalValidation(300 * time.Microsecond)
	m.ApprovalValidation(20 * time.Millisecond)
	m.ApprovalValidation(6 * time.Second)
	want := `
# HELP gateway_approval_escalations_total Escalations decided, by outcome (approved, rejected by a person, expired).
# TYPE gateway_approval_escalations_total counter
gateway_approval_escalations_total{outcome="approved"} 1
gateway_approval_escalations_total{outcome="expired"} 2
gateway_approval_escalations_total{outcome="other"} 1
# HELP gateway_approval_validation_seconds Time the approval policy took to decide one request.
# TYPE gateway_approval_validation_seconds histogram
gateway_approval_validation_seconds_bucket{le="0.0001"} 0
gateway_approval_validation_seconds_bucket{le="0.00025"} 0
gateway_approval_validation_seconds_bucket{le="0.0005"} 1
gateway_approval_validation_seconds_bucket{le="0.001"} 1
gateway_approval_validation_seconds_bucket{le="0.0025"} 1
gateway_approval_validation_seconds_bucket{le="0.005"} 1
gateway_approval_validation_seconds_bucket{le="0.01"} 1
gateway_approval_validation_seconds_bucket{le="0.025"} 2
gateway_approval_validation_seconds_bucket{le="0.05"} 2
gateway_approval_validation_seconds_bucket{le="0.1"} 2
gateway_approval_validation_seconds_bucket{le="0.25"} 2
gateway_approval_validation_seconds_bucket{le="0.5"} 2
gateway_approval_validation_seconds_bucket{le="1"} 2
gateway_approval_validation_seconds_bucket{le="2.5"} 2
gateway_approval_validation_seconds_bucket{le="5"} 2
gateway_approval_validation_seconds_bucket{le="+Inf"} 3
gateway_approval_validation_seconds_sum 6.0203
gateway_approval_validation_seconds_count 3
# HELP gateway_policy_decisions_total Policy decisions by decision point and verdict.
# TYPE gateway_policy_decisions_total counter
gateway_policy_decisions_total{point="approval",verdict="approved"} 2
gateway_policy_decisions_total{point="approval",verdict="escalated"} 1
gateway_policy_decisions_total{point="approval",verdict="rejected"} 1
`
	compare(t, m, want, "gateway_approval_escalations_total", "gateway_approval_validation_seconds", "gateway_policy_decisions_total")
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	if probs, err := promlint.NewWithMetricFamilies(mfs).Lint(); err != nil || len(probs) > 0 {
		t.Fatalf("lint: %v %v", err, probs)
	}
}
