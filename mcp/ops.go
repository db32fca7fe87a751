package mcp

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// collector holds the door's metrics. Its labels are bounded: server is a
// configured name, tool a name the server's own list holds ("_other" for
// any other, "_resources" and "_prompts" for those methods).
type collector struct {
	calls    *prometheus.CounterVec
	seconds  *prometheus.HistogramVec
	upstream *prometheus.HistogramVec
}

func newCollector() *collector {
	return &collector{
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "gateway_mcp_calls_total",
			Help: "MCP tool calls (and resource and prompt reads) by outcome: allow, approved (on a person's approval), deny, escalate, limit, block, error."},
			[]string{"server", "tool", "outcome"}),
		seconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gateway_mcp_call_seconds",
			Help:    "Time of the MCP calls the gateway made, from the call to its answer passed on.",
			Buckets: prometheus.ExponentialBuckets(0.005, 2.5, 10)}, []string{"server", "tool"}),
		upstream: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "gateway_mcp_upstream_header_seconds",
			Help:    "Time an MCP server took to send its response headers, every request of the gateway's included.",
			Buckets: prometheus.ExponentialBuckets(0.002, 2.5, 10)}, []string{"server"}),
	}
}

func (c *collector) call(server, tool, outcome string) {
	c.calls.WithLabelValues(server, tool, outcome).Inc()
}

func (c *collector) latency(server, tool string, d time.Duration) {
	c.seconds.WithLabelValues(server, tool).Observe(d.Seconds())
}

func (c *collector) upstreamTime(server string, d time.Duration) {
	c.upstream.WithLabelValues(server).Observe(d.Seconds())
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	c.calls.Describe(ch)
	c.seconds.Describe(ch)
	c.upstream.Describe(ch)
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	c.calls.Collect(ch)
	c.seconds.Collect(ch)
	c.upstream.Collect(ch)
}

// Collector is the door's metrics, for the gateway's /metrics registry.
func (d *Door) Collector() prometheus.Collector { return d.metrics }

// health is what the gateway last saw of each server: when it last
// answered, and the last failure since.
type health struct {
	mu    sync.Mutex
	state map[string]serverHealth
	now   func() time.Time
}

type serverHealth struct {
	failedAt time.Time
	err      string
}

func newHealth() *health { return &health{state: map[string]serverHealth{}, now: time.Now} }

func (h *health) failed(server string, err error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.state[server] = serverHealth{failedAt: h.now(), err: err.Error()}
}

func (h *health) ok(server string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.state, server)
}

// keep forgets the servers a reload removed.
func (h *health) keep(servers []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for s := range h.state {
		if !slices.Contains(servers, s) {
			delete(h.state, s)
		}
	}
}

// Health is the detail /readyz shows: the servers whose last request
// failed, and how. An MCP server down does not make the gateway unready
// (its other routes serve), so this is a detail, never a failed check.
func (d *Door) Health() string {
	h := d.health
	h.mu.Lock()
	defer h.mu.Unlock()
	names := make([]string, 0, len(h.state))
	for s := range h.state {
		names = append(names, s)
	}
	slices.Sort(names)
	parts := make([]string, 0, len(names))
	for _, s := range names {
		st := h.state[s]
		parts = append(parts, fmt.Sprintf("MCP server %s failed %s ago (%s)", s, h.now().Sub(st.failedAt).Round(time.Second), st.err))
	}
	return strings.Join(parts, "; ")
}
