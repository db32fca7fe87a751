package proxy

import (
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/pricing"
	"github.com/sacpgw/gateway/internal/scope"
)

// What an exchange cost is what the provider billed: its reported usage at
// the model's price. Without a usage report the gateway cannot know the
// bill, but it often knows there was none: nothing reached a model, or the
// provider refused or failed the call. Budgets (tokens and dollars) are
// settled on the same verdict: the usage, nothing, or, when a call may have
// been billed unreported, the whole reservation.

// bill is what the provider billed for an exchange, as far as the gateway
// knows.
type bill int

const (
	// billUsage: the provider reported its usage.
	billUsage bill = iota
	// billNone: nothing reached a model, or the provider refused (4xx) or
	// failed (5xx, no connection) the call; providers bill neither.
	billNone
	// billUnknown: a call may have been billed and no usage was reported
	// (the client left, the stream broke, the answer timed out or was
	// unreadable), or the report was unreadable (a negative or fractional
	// count, a total that is not the sum, more cached than prompt tokens).
	billUnknown
)

// billOf classifies an exchange that has ended; status is the HTTP status
// of the answer (0 when none was sent: the client left).
func billOf(ex *scope.Exchange, status int) bill {
	switch {
	case ex.UsageUnreadable != "":
		// The provider answered (a report comes only with an answer) and
		// its report cannot be believed: billed, for an unknown amount.
		return billUnknown
	case ex.UsageKnown:
		return billUsage
	case ex.Attempts == 0:
		// Refused before any call (policy, redaction, the audit trail).
		return billNone
	case status >= 400 && status < 500 && status != 499:
		// After a call the gateway sends no 4xx of its own: this is the
		// provider's refusal passed on (499 is the audit's "client left").
		return billNone
	case strings.HasPrefix(ex.ErrCode, "upstream_status_"):
		// A provider's refusal replayed into a protocol stream already
		// begun (the status sent was 200).
		return billNone
	case providerFailed(ex.Err):
		return billNone
	}
	return billUnknown
}

// providerFailed reports a call that failed with no answer to bill: the
// provider's 5xx, or a connection that was never made.
func providerFailed(err error) bool {
	if se := (*upstreamStatusError)(nil); errors.As(err, &se) {
		return se.status >= 500
	}
	if oe := (*net.OpError)(nil); errors.As(err, &oe) {
		return oe.Op == "dial"
	}
	return false
}

// priceUsage is the pricing package's view of a usage report.
func priceUsage(u scope.Usage) pricing.Usage {
	pu := pricing.Usage{Prompt: u.PromptTokens, Completion: u.CompletionTokens}
	if d := u.PromptTokensDetails; d != nil {
		pu.Cached = d.CachedTokens
	}
	return pu
}

// Reasons a cost is unknown, in the audit entry and the metrics.
const (
	unpricedNoPrice    = "no_price"
	unpricedNoUsage    = "no_usage"
	unpricedUnreadable = "unreadable_usage"
)

// charge is an exchange's cost: microUSD when priced, else the reason it is
// unknown.
type charge struct {
	microUSD int64
	priced   bool
	reason   string
}

// chargeOf is the cost of an ended exchange billed as b. Nothing billed
// costs nothing, priced or not.
func chargeOf(ex *scope.Exchange, b bill) charge {
	switch {
	case b == billNone:
		return charge{priced: true}
	case ex.UsageUnreadable != "":
		// Before the price: a provider whose reports cannot be believed
		// is the finding to count, priced model or not.
		return charge{reason: unpricedUnreadable}
	case !ex.HasPrice:
		return charge{reason: unpricedNoPrice}
	case b == billUsage:
		return charge{microUSD: pricing.MicroUSD(ex.Price, priceUsage(ex.Usage)), priced: true}
	}
	return charge{reason: unpricedNoUsage}
}

// costSummary writes the llm.response entry's cost: priced true with usd
// (an exact decimal string) and micro_usd when the cost is known (the
// usage at the model's price, or 0 when nothing was billed); priced false
// and the reason otherwise (no_price: the model is not in the pricing
// table; no_usage: the provider reported none; unreadable_usage: its
// report could not be believed, and usage_error says why; a dollar
// budget keeps its reservation for the last two); and what a dollar
// budget reserved.
func costSummary(s *audit.Object, ex *scope.Exchange, status int) {
	c := chargeOf(ex, billOf(ex, status))
	s.Begin("cost")
	if c.priced {
		s.Str("usd", pricing.FormatUSD(c.microUSD))
		s.Int("micro_usd", c.microUSD)
	}
	s.Bool("priced", c.priced)
	if !c.priced {
		s.Str("reason", c.reason)
	}
	if ex.UsageUnreadable != "" {
		s.Str("usage_error", ex.UsageUnreadable)
	}
	if ex.BudgetReserved > 0 {
		s.Int("reserved_micro_usd", ex.BudgetReserved)
	}
	s.End()
}

// Spend is what each agent spent on models, at the gateway's prices, for
// /metrics: it is a prometheus.Collector exporting
//
//	gateway_spend_usd_total{agent}                 the priced cost of the calls
//	gateway_spend_unpriced_total{agent, reason}    the calls of unknown cost
//
// Make one per process and register it once (it outlives config reloads,
// which rebuild the gateway). The agent label is the configured (or
// spawned) agent's id, never a client's value. Safe for concurrent use;
// the zero value is ready.
type Spend struct {
	agents sync.Map // agent id → *agentSpend
}

type agentSpend struct {
	// microUSD is the running total; integers, so that sums never drift.
	microUSD                     atomic.Int64
	noPrice, noUsage, unreadable atomic.Uint64
}

var (
	spendDesc = prometheus.NewDesc("gateway_spend_usd_total",
		"Cost of agents' model calls in US dollars, from the providers' usage at the gateway's prices (gateway.yaml pricing over the shipped list prices), by agent.",
		[]string{"agent"}, nil)
	unpricedDesc = prometheus.NewDesc("gateway_spend_unpriced_total",
		"Model calls whose cost is unknown, by agent and reason: no_price (the model has no price), no_usage (the provider reported no usage) or unreadable_usage (its usage report could not be believed).",
		[]string{"agent", "reason"}, nil)
)

var _ prometheus.Collector = (*Spend)(nil)

// NewSpend returns an empty spend counter.
func NewSpend() *Spend { return &Spend{} }

func (s *Spend) of(agent string) *agentSpend {
	if v, ok := s.agents.Load(agent); ok {
		return v.(*agentSpend)
	}
	v, _ := s.agents.LoadOrStore(agent, &agentSpend{})
	return v.(*agentSpend)
}

// record counts one exchange's cost; a nil Spend counts nothing.
func (s *Spend) record(agent string, c charge) {
	if s == nil {
		return
	}
	as := s.of(agent)
	switch {
	case c.priced:
		as.microUSD.Add(c.microUSD)
	case c.reason == unpricedNoPrice:
		as.noPrice.Add(1)
	case c.reason == unpricedUnreadable:
		as.unreadable.Add(1)
	default:
		as.noUsage.Add(1)
	}
}

// MicroUSD is what agent has spent so far, in micro-dollars.
func (s *Spend) MicroUSD(agent string) int64 {
	if v, ok := s.agents.Load(agent); ok {
		return v.(*agentSpend).microUSD.Load()
	}
	return 0
}

// UnknownCost is how many of agent's calls so far had an unknown cost
// (gateway_spend_unpriced_total, every reason).
func (s *Spend) UnknownCost(agent string) uint64 {
	if v, ok := s.agents.Load(agent); ok {
		as := v.(*agentSpend)
		return as.noPrice.Load() + as.noUsage.Load() + as.unreadable.Load()
	}
	return 0
}

// Describe implements prometheus.Collector.
func (s *Spend) Describe(ch chan<- *prometheus.Desc) {
	ch <- spendDesc
	ch <- unpricedDesc
}

// Collect implements prometheus.Collector.
func (s *Spend) Collect(ch chan<- prometheus.Metric) {
	s.agents.Range(func(k, v any) bool {
		agent, as := k.(string), v.(*agentSpend)
		ch <- prometheus.MustNewConstMetric(spendDesc, prometheus.CounterValue, float64(as.microUSD.Load())/1e6, agent)
		ch <- prometheus.MustNewConstMetric(unpricedDesc, prometheus.CounterValue, float64(as.noPrice.Load()), agent, unpricedNoPrice)
		ch <- prometheus.MustNewConstMetric(unpricedDesc, prometheus.CounterValue, float64(as.noUsage.Load()), agent, unpricedNoUsage)
		ch <- prometheus.MustNewConstMetric(unpricedDesc, prometheus.CounterValue, float64(as.unreadable.Load()), agent, unpricedUnreadable)
		return true
	})
}

// statusWriter remembers the status of the answer written through it, so
// the limits stage knows, after the call, whether the provider refused it.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 && code >= 200 { // 1xx are interim, not the answer's
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the writer below (flushes).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
