package proxy_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/pricing"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/internal/team"
	"github.com/sacpgw/gateway/internal/testkit"
	"github.com/sacpgw/gateway/internal/testredis"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/proxy"
	"github.com/sacpgw/gateway/upstream"
)

// The dollar budget and the spend through the Limits stage alone: a chain
// of a stage that plays the earlier stages (the exchange's agent, model and
// estimates) and an endpoint that plays the provider (attempts, status,
// usage).

// testPrices: test-model costs 10 USD per million input tokens, 1 cached
// and 30 output, so that 1000 prompt tokens and a max_tokens of 1000
// reserve 10,000 + 30,000 micro-dollars.
var testPrices = pricing.New(map[string]pricing.Price{"test-model": {Input: 10, CachedInput: 1, Output: 30}})

const day = 24 * time.Hour

// budgetOp is one call the Limits stage made on its budget.
type budgetOp struct {
	op, key          string
	reserved, actual int
}

func (o budgetOp) String() string {
	if o.op == "reserve" {
		return fmt.Sprintf("reserve %s %d", o.key, o.reserved)
	}
	return fmt.Sprintf("settle %s %d->%d", o.key, o.reserved, o.actual)
}

// recBudget records the calls made on a budget.
type recBudget struct {
	limit.Budget
	mu  sync.Mutex
	ops []string
}

func (b *recBudget) Reserve(ctx context.Context, key string, rule limit.Rule, n int) (limit.Result, error) {
	b.add(budgetOp{op: "reserve", key: key, reserved: n})
	return b.Budget.Reserve(ctx, key, rule, n)
}

func (b *recBudget) Settle(ctx context.Context, key string, rule limit.Rule, reserved, actual int) error {
	b.add(budgetOp{op: "settle", key: key, reserved: reserved, actual: actual})
	return b.Budget.Settle(ctx, key, rule, reserved, actual)
}

func (b *recBudget) add(o budgetOp) {
	b.mu.Lock()
	b.ops = append(b.ops, o.String())
	b.mu.Unlock()
}

func (b *recBudget) calls() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.ops)
}

// stageCall is one request through the Limits stage: what the earlier
// stages found and what the provider did.
type stageCall struct {
	model                        string
	estimate, maxTokens, choices int
	noCompletion                 bool
	attempts, status             int
	usage                        *scope.Usage
	hold                         func() // runs inside the call, after the reservations
	team                         *team.Team
}

func agentWith(budget int64) *roster.Agent {
	a := &roster.Agent{ID: "a", CompletionEstimate: 500}
	if budget > 0 {
		a.Budget = config.Money{MicroUSD: budget, Period: day}
	}
	return a
}

// serveStage runs c through l for agent a.
func serveStage(ctx context.Context, l *proxy.Limits, a *roster.Agent, c stageCall) (*httptest.ResponseRecorder, *scope.Exchange) {
	earlier := proxy.StageFunc(func(w http.ResponseWriter, r *http.Request, next http.Handler) error {
		ex := scope.Get(r.Context())
		ex.Agent, ex.Model, ex.Team = a, c.model, c.team
		ex.TokenEstimate, ex.MaxTokens, ex.Choices, ex.NoCompletion = c.estimate, c.maxTokens, c.choices, c.noCompletion
		next.ServeHTTP(w, r)
		return nil
	})
	provider := func(w http.ResponseWriter, r *http.Request) error {
		ex := scope.Get(r.Context())
		if c.hold != nil {
			c.hold()
		}
		ex.Attempts = c.attempts
		if c.usage != nil {
			ex.Usage, ex.UsageKnown = *c.usage, true
		}
		if c.status != 0 {
			w.WriteHeader(c.status)
		}
		return nil
	}
	ex := &scope.Exchange{RequestID: "req-1", Start: time.Now()}
	r := httptest.NewRequestWithContext(ctx, http.MethodPost, "/v1/chat/completions", nil)
	w := httptest.NewRecorder()
	proxy.Chain(provider, earlier, l).ServeHTTP(w, scope.Attach(r, ex))
	return w, ex
}

func usage(prompt, cached, completion int) *scope.Usage {
	u := &scope.Usage{PromptTokens: prompt, CompletionTokens: completion, TotalTokens: prompt + completion}
	if cached > 0 {
		u.PromptTokensDetails = &scope.PromptTokensDetails{CachedTokens: cached}
	}
	return u
}

// Reservations before the call, settlements after it, and the spend.
func TestLimitsDollarBudgetReserveSettle(t *testing.T) {
	// 1000 prompt tokens and max_tokens 1000: 40,000 µ$ reserved.
	base := stageCall{model: "test-model", estimate: 1000, maxTokens: 1000, attempts: 1, status: 200}
	with := func(f func(*stageCall)) stageCall { c := base; f(&c); return c }
	cases := []struct {
		name      string
		agent     func() *roster.Agent
		attempts  int // the protocol's attempts; 0: one
		call      stageCall
		wantOps   []string
		wantSpend int64
		// wantUnknown is the reason the spend is unknown, if it is.
		wantUnknown string
	}{
		{name: "settled to the reported usage", agent: func() *roster.Agent { return agentWith(1_000_000) },
			call:    with(func(c *stageCall) { c.usage = usage(1000, 0, 200) }),
			wantOps: []string{"reserve usd:a 40000", "settle usd:a 40000->16000"}, wantSpend: 16_000},
		{name: "cached tokens at the cached price", agent: func() *roster.Agent { return agentWith(1_000_000) },
			call:    with(func(c *stageCall) { c.usage = usage(1000, 800, 0) }),
			wantOps: []string{"reserve usd:a 40000", "settle usd:a 40000->2800"}, wantSpend: 2_800},
		{name: "nothing reached a model: refunded", agent: func() *roster.Agent { return agentWith(1_000_000) },
			call:    with(func(c *stageCall) { c.attempts, c.status = 0, 403 }),
			wantOps: []string{"reserve usd:a 40000", "settle usd:a 40000->0"}, wantSpend: 0},
		{name: "the provider refused: refunded", agent: func() *roster.Agent { return agentWith(1_000_000) },
			call:    with(func(c *stageCall) { c.status = 400 }),
			wantOps: []string{"reserve usd:a 40000", "settle usd:a 40000->0"}, wantSpend: 0},
		{name: "answered without usage: the reservation stays spent", agent: func() *roster.Agent { return agentWith(1_000_000) },
			call:    base,
			wantOps: []string{"reserve usd:a 40000", "settle usd:a 40000->40000"}, wantUnknown: "no_usage"},
		{name: "the client left: the reservation stays spent", agent: func() *roster.Agent { return agentWith(1_000_000) },
			call:    with(func(c *stageCall) { c.status = 0 }),
			wantOps: []string{"reserve usd:a 40000", "settle usd:a 40000->40000"}, wantUnknown: "no_usage"},
		{name: "tokens and dollars, keyed apart", agent: func() *roster.Agent {
			a := agentWith(1_000_000)
			a.TokenLimit = config.Rate{N: 100_000, Period: time.Hour}
			return a
		}, call: with(func(c *stageCall) { c.usage = usage(1000, 0, 200) }),
			wantOps: []string{"reserve tok:a 2000", "reserve usd:a 40000", "settle tok:a 2000->1200", "settle usd:a 40000->16000"}, wantSpend: 16_000},
		{name: "every protocol attempt reserved", agent: func() *roster.Agent { return agentWith(1_000_000) }, attempts: 3,
			call:    with(func(c *stageCall) { c.usage = usage(3000, 0, 300) }),
			wantOps: []string{"reserve usd:a 120000", "settle usd:a 120000->39000"}, wantSpend: 39_000},
		{name: "every choice reserved", agent: func() *roster.Agent { return agentWith(1_000_000) },
			call:    with(func(c *stageCall) { c.choices = 2; c.usage = usage(1000, 0, 2000) }),
			wantOps: []string{"reserve usd:a 70000", "settle usd:a 70000->70000"}, wantSpend: 70_000},
		{name: "no max_tokens: the completion estimate", agent: func() *roster.Agent { return agentWith(1_000_000) },
			call:    with(func(c *stageCall) { c.maxTokens = 0; c.usage = usage(1000, 0, 10) }),
			wantOps: []string{"reserve usd:a 25000", "settle usd:a 25000->10300"}, wantSpend: 10_300},
		{name: "embeddings: no completion", agent: func() *roster.Agent { return agentWith(1_000_000) },
			call:    with(func(c *stageCall) { c.noCompletion = true; c.usage = usage(900, 0, 0) }),
			wantOps: []string{"reserve usd:a 10000", "settle usd:a 10000->9000"}, wantSpend: 9_000},
		{name: "no budget: nothing reserved, the spend counted", agent: func() *roster.Agent { return agentWith(0) },
			call:      with(func(c *stageCall) { c.usage = usage(1000, 0, 200) }),
			wantSpend: 16_000},
		{name: "unpriced model without a budget: served, cost unknown", agent: func() *roster.Agent { return agentWith(0) },
			call:        with(func(c *stageCall) { c.model = "mystery-1"; c.usage = usage(1000, 0, 200) }),
			wantUnknown: "no_price"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := &recBudget{Budget: limit.NewMemoryBudget()}
			spend := proxy.NewSpend()
			l := &proxy.Limits{Requests: limit.NewMemory(), Tokens: b, Prices: testPrices, Spend: spend}
			if tc.attempts > 0 {
				l.Attempts = func(*roster.Agent) int { return tc.attempts }
			}
			a := tc.agent()
			w, ex := serveStage(t.Context(), l, a, tc.call)
			if want := max(200, tc.call.status); w.Code != want {
				t.Fatalf("status %d, want %d: %s", w.Code, want, w.Body)
			}
			if got := b.calls(); !slices.Equal(got, tc.wantOps) {
				t.Errorf("budget calls\n got %q\nwant %q", got, tc.wantOps)
			}
			if got := spend.MicroUSD("a"); got != tc.wantSpend {
				t.Errorf("spend %d µ$, want %d", got, tc.wantSpend)
			}
			if got := unpricedCount(t, spend, "a", tc.wantUnknown); tc.wantUnknown != "" && got != 1 {
				t.Errorf("gateway_spend_unpriced_total{reason=%q} = %v, want 1", tc.wantUnknown, got)
			}
			if !a.Budget.IsZero() && ex.BudgetReserved == 0 {
				t.Error("the exchange does not say what the budget reserved")
			}
			if v, _ := ex.Verdict(scope.CheckLimits); v.Verdict != "pass" {
				t.Errorf("limits verdict %+v", v)
			}
		})
	}
}

// unpricedCount reads gateway_spend_unpriced_total{agent, reason} as a
// scrape would (0 when reason is "").
func unpricedCount(t *testing.T, s *proxy.Spend, agent, reason string) float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(s)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "gateway_spend_unpriced_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			if labels["agent"] == agent && labels["reason"] == reason {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

// The spend is exported in dollars, by agent.
func TestSpendCollector(t *testing.T) {
	spend := proxy.NewSpend()
	l := &proxy.Limits{Requests: limit.NewMemory(), Tokens: limit.NewMemoryBudget(), Prices: testPrices, Spend: spend}
	for range 3 {
		serveStage(t.Context(), l, agentWith(0), stageCall{model: "test-model", attempts: 1, status: 200, usage: usage(100_000, 0, 0)})
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(spend)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			key := mf.GetName()
			for _, lp := range m.GetLabel() {
				key += "," + lp.GetName() + "=" + lp.GetValue()
			}
			got[key] = m.GetCounter().GetValue()
		}
	}
	want := map[string]float64{
		"gateway_spend_usd_total,agent=a":                              3, // 3 × 100,000 tokens × 10 USD per million
		"gateway_spend_unpriced_total,agent=a,reason=no_price":         0,
		"gateway_spend_unpriced_total,agent=a,reason=no_usage":         0,
		"gateway_spend_unpriced_total,agent=a,reason=unreadable_usage": 0,
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v (all: %v)", k, got[k], v, got)
		}
	}
}

// apiError is the OpenAI error body.
type apiError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Code    string  `json:"code"`
		Param   *string `json:"param"`
	} `json:"error"`
}

func decodeError(t *testing.T, w *httptest.ResponseRecorder) apiError {
	t.Helper()
	var e apiError
	if err := json.Unmarshal(w.Body.Bytes(), &e); err != nil {
		t.Fatalf("error body %q: %v", w.Body, err)
	}
	return e
}

// Over the budget: OpenAI's 429 with budget_exceeded, Retry-After when the
// budget has refilled enough, the x-ratelimit-*-usd headers, a
// ratelimit.reject entry, and the token reservation given back.
func TestLimitsDollarBudgetExceeded(t *testing.T) {
	cases := []struct {
		name string
		// spent is what earlier calls kept (usage unknown: the whole
		// reservation of 40,000 µ$ each).
		spent     int
		call      stageCall
		wantRetry int // seconds
		wantMsg   string
		wantLeft  string
	}{
		// 100,000 µ$ a day; 20,000 left, 40,000 needed: 20,000 µ$ take
		// a fifth of a day to come back.
		{name: "spent", spent: 2, call: stageCall{model: "test-model", estimate: 1000, maxTokens: 1000},
			wantRetry: 17280, wantMsg: "Budget reached for agent a: 0.1USD/day; this request may cost up to 0.04 USD", wantLeft: "0.02"},
		// 1000 + 10,000 × 30: more than the whole budget, never served.
		{name: "more than the whole budget", call: stageCall{model: "test-model", estimate: 1000, maxTokens: 10_000},
			wantRetry: 86400, wantMsg: "more than agent a's whole budget of 0.1USD/day; lower max_tokens", wantLeft: "0.1"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			trail := &testkit.Trail{}
			b := &recBudget{Budget: limit.NewMemoryBudget()}
			l := &proxy.Limits{Requests: limit.NewMemory(), Tokens: b, Prices: testPrices,
				Audit: &door.Recorder{Log: trail, FailClosed: true, Logger: slog.New(slog.DiscardHandler)}}
			a := agentWith(100_000)
			a.TokenLimit = config.Rate{N: 1_000_000, Period: time.Hour}
			for range tc.spent {
				if w, _ := serveStage(t.Context(), l, a, stageCall{model: "test-model", estimate: 1000, maxTokens: 1000, attempts: 1, status: 200}); w.Code != 200 {
					t.Fatalf("setup call: %d %s", w.Code, w.Body)
				}
			}
			w, ex := serveStage(t.Context(), l, a, tc.call)
			if w.Code != http.StatusTooManyRequests {
				t.Fatalf("status %d, want 429: %s", w.Code, w.Body)
			}
			e := decodeError(t, w)
			if e.Error.Code != "budget_exceeded" || e.Error.Type != "rate_limit_error" || !strings.Contains(e.Error.Message, tc.wantMsg) {
				t.Errorf("error %+v, want budget_exceeded with %q", e.Error, tc.wantMsg)
			}
			retry, err := strconv.Atoi(w.Header().Get("Retry-After"))
			if err != nil || retry < tc.wantRetry-1 || retry > tc.wantRetry+1 {
				t.Errorf("Retry-After %q, want about %d", w.Header().Get("Retry-After"), tc.wantRetry)
			}
			h := w.Header()
			if h.Get("X-Ratelimit-Limit-Usd") != "0.1" || h.Get("X-Ratelimit-Remaining-Usd") != tc.wantLeft || h.Get("X-Ratelimit-Reset-Usd") == "" ||
				h.Get("X-Ratelimit-Limit-Tokens") != "1000000" {
				t.Errorf("headers %v", h)
			}
			if rej := trail.Last("ratelimit.reject"); rej == nil || rej["dimension"] != "budget" || rej["model"] != "test-model" {
				t.Errorf("ratelimit.reject entry %v", rej)
			}
			if v, _ := ex.Verdict(scope.CheckLimits); v.Verdict != "reject" || v.Dimension != "budget" {
				t.Errorf("limits verdict %+v", v)
			}
			ops := b.calls()
			tokens := strconv.Itoa(1000 + tc.call.maxTokens)
			if last := ops[len(ops)-1]; last != "settle tok:a "+tokens+"->0" {
				t.Errorf("the token reservation was not given back: %q", ops)
			}
		})
	}
}

// A model without a price cannot be budgeted: refused with a 403 naming
// it, before the request rate is spent; without a budget it is served.
func TestLimitsUnpricedModel(t *testing.T) {
	b := &recBudget{Budget: limit.NewMemoryBudget()}
	l := &proxy.Limits{Requests: limit.NewMemory(), Tokens: b, Prices: testPrices}
	a := agentWith(1_000_000)
	a.RateLimit = config.Rate{N: 1, Period: time.Hour}
	w, ex := serveStage(t.Context(), l, a, stageCall{model: "mystery-1", estimate: 10, attempts: 1, usage: usage(10, 0, 0)})
	if w.Code != http.StatusForbidden {
		t.Fatalf("status %d, want 403: %s", w.Code, w.Body)
	}
	e := decodeError(t, w)
	if e.Error.Code != "model_not_priced" || e.Error.Type != "permission_error" || e.Error.Param == nil || *e.Error.Param != "model" ||
		!strings.Contains(e.Error.Message, "`mystery-1`") || !strings.Contains(e.Error.Message, "pricing") {
		t.Errorf("error %+v", e.Error)
	}
	if v, _ := ex.Verdict(scope.CheckLimits); v.Verdict != "deny" || v.Reason != "model_not_priced" {
		t.Errorf("limits verdict %+v", v)
	}
	if ops := b.calls(); len(ops) != 0 {
		t.Errorf("budget touched: %q", ops)
	}
	// The one request an hour is still there.
	if w, _ := serveStage(t.Context(), l, a, stageCall{model: "test-model", estimate: 10, attempts: 1, usage: usage(10, 0, 0)}); w.Code != http.StatusOK {
		t.Errorf("priced call after the refusal: %d %s", w.Code, w.Body)
	}
	if w, _ := serveStage(t.Context(), l, agentWith(0), stageCall{model: "mystery-1", estimate: 10, attempts: 1, usage: usage(10, 0, 0)}); w.Code != http.StatusOK {
		t.Errorf("unpriced call without a budget: %d %s", w.Code, w.Body)
	}
}

// N concurrent calls from two replicas sharing one Redis, against a
// budget that covers exactly K of them: exactly K pass, because each
// reserves its most expensive outcome before it runs. Every call is held
// inside the provider until all have been decided, so no settlement can
// make room for another.
func TestLimitsDollarBudgetExactOnRedis(t *testing.T) {
	srv := testredis.Start(t)
	const n, k = 60, 7
	replicas := make([]*proxy.Limits, 2)
	for i := range replicas {
		c, err := limit.NewRedisClient(srv.URL(), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		replicas[i] = &proxy.Limits{Requests: limit.NewMemory(), Tokens: limit.NewRedisBudget(c, limit.WithKeyPrefix("t:"+t.Name()+":")), Prices: testPrices}
	}
	a := agentWith(k * 40_000)
	var decided sync.WaitGroup
	decided.Add(n)
	var allowed, refused atomic.Int64
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			once := sync.OnceFunc(decided.Done)
			c := stageCall{model: "test-model", estimate: 1000, maxTokens: 1000, attempts: 1, status: 200,
				// The provider bills exactly the reservation.
				usage: usage(1000, 0, 1000),
				hold:  func() { once(); decided.Wait() }}
			w, _ := serveStage(ctx, replicas[i%2], a, c)
			once()
			switch w.Code {
			case http.StatusOK:
				allowed.Add(1)
			case http.StatusTooManyRequests:
				if e := decodeError(t, w); e.Error.Code != "budget_exceeded" {
					t.Errorf("429 %+v", e.Error)
				}
				refused.Add(1)
			default:
				t.Errorf("status %d: %s", w.Code, w.Body)
			}
		})
	}
	wg.Wait()
	if allowed.Load() != k || refused.Load() != n-k {
		t.Fatalf("allowed %d, refused %d; want exactly %d and %d", allowed.Load(), refused.Load(), k, n-k)
	}
}

// The dollar budget follows state.on_failure like the token budget: with
// Redis down, closed refuses with a 503 and local falls back to this
// replica's own budget.
func TestLimitsDollarBudgetRedisDown(t *testing.T) {
	cases := []struct {
		onFailure  string
		wantStatus int
		wantCode   string
	}{
		{limit.OnFailureClosed, http.StatusServiceUnavailable, "state_unavailable"},
		{limit.OnFailureLocal, http.StatusOK, ""},
	}
	for _, tc := range cases {
		t.Run(tc.onFailure, func(t *testing.T) {
			srv := testredis.Start(t)
			c, err := limit.NewRedisClient(srv.URL(), 200*time.Millisecond)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Close() })
			srv.Stop()
			fb := &limit.Fallback{Primary: limit.NewRedis(c), Local: limit.NewMemory(),
				PrimaryBudget: limit.NewRedisBudget(c), LocalBudget: limit.NewMemoryBudget(),
				OnFailure: tc.onFailure, Log: slog.New(slog.DiscardHandler)}
			l := &proxy.Limits{Requests: fb, Tokens: fb, Prices: testPrices}
			w, _ := serveStage(t.Context(), l, agentWith(1_000_000), stageCall{model: "test-model", estimate: 10, attempts: 1, usage: usage(10, 0, 0)})
			if w.Code != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.wantStatus, w.Body)
			}
			if tc.wantCode != "" {
				if e := decodeError(t, w); e.Error.Code != tc.wantCode || w.Header().Get("Retry-After") == "" {
					t.Errorf("error %+v, Retry-After %q", e.Error, w.Header().Get("Retry-After"))
				}
			}
		})
	}
}

// The whole chat chain: the llm.response entry carries the cost.

const costAgents = `agents:
  free:
    type: coder
    token_sha256: "%free%"
  budgeted:
    type: coder
    token_sha256: "%budgeted%"
    budget: 25USD/day
  sacp:
    type: coder
    response_format: json_standard
    token_sha256: "%sacp%"
    budget: 25USD/day
`

// newCostGateway is a gateway of costAgents whose upstream is up; opts
// change its parts (the budget, the spend counter) before it is built.
func newCostGateway(t *testing.T, up http.HandlerFunc, opts ...func(*proxy.Deps)) (*proxy.Gateway, *testkit.Trail) {
	t.Helper()
	srv := httptest.NewServer(up)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	agents := costAgents
	for _, id := range []string{"free", "budgeted", "sacp"} {
		agents = strings.ReplaceAll(agents, "%"+id+"%", roster.HashTokenHex("tok-"+id))
	}
	files := map[string]string{
		config.GatewayFile: `listen: "127.0.0.1:0"
upstreams:
  - {name: test, type: openai, base_url: ` + srv.URL + `/v1, api_key: sk-provider, max_retries: 0, models: ["*"]}
audit: {dir: ` + strconv.Quote(filepath.Join(dir, "audit")) + `, chain: t, fail_mode: closed}
`,
		config.AgentsFile:   agents,
		config.ProtocolFile: "protocol:\n  timeouts:\n    response: 5s\n",
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	cfg, err := config.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	log := slog.New(slog.DiscardHandler)
	ups, err := upstream.New(cfg.Gateway.Upstreams, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(ups.Close)
	trail := &testkit.Trail{}
	deps := proxy.Deps{Config: cfg, Upstreams: ups, Requests: limit.NewMemory(), Tokens: limit.NewMemoryBudget(), Log: log, Audit: door.NewRecorder(trail, cfg.Gateway.Audit, log)}
	for _, o := range opts {
		o(&deps)
	}
	gw, err := proxy.New(deps)
	if err != nil {
		t.Fatal(err)
	}
	return gw, trail
}

// answerWith answers every chat completion with usage u (as JSON).
func answerWith(status int, u string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		if status != http.StatusOK {
			_, _ = fmt.Fprint(w, `{"error":{"message":"bad","type":"invalid_request_error","code":"bad","param":null}}`)
			return
		}
		_, _ = fmt.Fprintf(w, `{"id":"c1","object":"chat.completion","created":1,"model":"m","choices":[{"index":0,"message":{"role":"assistant","content":"ok"},"finish_reason":"stop"}],"usage":%s}`, u)
	}
}

func TestCostInAuditEntry(t *testing.T) {
	cases := []struct {
		name       string
		token      string
		model      string
		stream     bool
		up         http.HandlerFunc
		wantStatus int
		// wantCost is the llm.response entry's cost; nil: no llm.response.
		wantCost map[string]any
		// wantCode is the error_code of the llm.request entry of a refusal.
		wantCode string
	}{
		// 5 × 0.15 + 7 × 0.60 = 4.95 µ$, rounded up.
		{name: "priced", token: "tok-free", model: "gpt-4o-mini", up: answerWith(200, `{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}`),
			wantStatus: 200, wantCost: map[string]any{"usd": "0.000005", "micro_usd": 5, "priced": true}},
		// 1000 × 2.50 + 3000 × 1.25 + 10 × 10 µ$.
		{name: "cached tokens, dated model", token: "tok-free", model: "gpt-4o-2024-08-06",
			up:         answerWith(200, `{"prompt_tokens":4000,"completion_tokens":10,"total_tokens":4010,"prompt_tokens_details":{"cached_tokens":3000,"audio_tokens":0}}`),
			wantStatus: 200, wantCost: map[string]any{"usd": "0.00635", "micro_usd": 6350, "priced": true}},
		{name: "streamed", token: "tok-free", model: "gpt-4o-mini", stream: true, up: streamAnswer("o", "k"),
			wantStatus: 200, wantCost: map[string]any{"usd": "0.000005", "micro_usd": 5, "priced": true}},
		{name: "unpriced model", token: "tok-free", model: "mystery-1", up: answerWith(200, `{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}`),
			wantStatus: 200, wantCost: map[string]any{"priced": false, "reason": "no_price"}},
		{name: "provider refused: nothing billed", token: "tok-free", model: "gpt-4o-mini", up: answerWith(400, ""),
			wantStatus: 400, wantCost: map[string]any{"usd": "0", "micro_usd": 0, "priced": true}},
		// hello's prompt estimate at gpt-4o-mini's prices, with the
		// default completion estimate of 1024 tokens at 0.60.
		{name: "budgeted: what was reserved", token: "tok-budgeted", model: "gpt-4o-mini", up: answerWith(200, `{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}`),
			wantStatus: 200, wantCost: map[string]any{"usd": "0.000005", "micro_usd": 5, "priced": true, "reserved_micro_usd": "*"}},
		{name: "budgeted, unpriced: refused", token: "tok-budgeted", model: "mystery-1", up: answerWith(200, `{}`),
			wantStatus: 403, wantCode: "model_not_priced"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			gw, trail := newCostGateway(t, tc.up)
			body := `{"model":"` + tc.model + `","stream":` + strconv.FormatBool(tc.stream) + `,"messages":[{"role":"user","content":"hi"}]}`
			r := httptest.NewRequest(http.MethodPost, "/v1/chat/completions", strings.NewReader(body))
			r.Header.Set("Content-Type", "application/json")
			r.Header.Set("Authorization", "Bearer "+tc.token)
			w := httptest.NewRecorder()
			gw.ChatCompletions().ServeHTTP(w, scope.Attach(r, &scope.Exchange{RequestID: "req-1", Start: time.Now()}))
			if w.Code != tc.wantStatus {
				t.Fatalf("status %d, want %d: %s", w.Code, tc.wantStatus, w.Body)
			}
			if tc.wantCost == nil {
				if trail.Last("llm.response") != nil {
					t.Error("an llm.response entry for a refusal")
				}
				if req := trail.Last("llm.request"); req == nil || req["error_code"] != tc.wantCode {
					t.Errorf("llm.request %v, want error_code %s", req, tc.wantCode)
				}
				return
			}
			resp := trail.Last("llm.response")
			cost, _ := resp["cost"].(map[string]any)
			if len(cost) != len(tc.wantCost) {
				t.Fatalf("cost %v, want %v", cost, tc.wantCost)
			}
			for k, v := range tc.wantCost {
				if v == "*" {
					if n, _ := cost[k].(int); n <= 0 {
						t.Errorf("cost.%s = %v, want a positive amount", k, cost[k])
					}
				} else if cost[k] != v {
					t.Errorf("cost.%s = %#v, want %#v", k, cost[k], v)
				}
			}
		})
	}
}
