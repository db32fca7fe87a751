package mcp

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/go-json-experiment/json"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/policy"
)

// record is the summary of one mcp.call entry, built as the call goes.
type record struct{ sum map[string]any }

// newRecord starts the summary of a call of name (a tool, a prompt or a
// resource's URI) by method.
func (t *turn) newRecord(m *message, method, name string) *record {
	// Room for what a call adds (its decision, hashes, redactions): the
	// map is not grown and rehashed on every call.
	sum := make(map[string]any, 16)
	sum["server"], sum["method"], sum["jsonrpc_id"], sum["mcp_session_id"] = t.srv.name, method, string(compact(m.id)), t.sess.ID
	if t.via != "" {
		sum["via"] = t.via
	}
	if t.behalf != nil {
		sum["on_behalf_of"] = t.behalf
	}
	switch method {
	case "tools/call":
		sum["tool"] = name
	case "prompts/get":
		sum["prompt"] = name
	default:
		if name != "" {
			sum["uri"] = name
		}
	}
	return &record{sum: sum}
}

func (r *record) set(k string, v any) { r.sum[k] = v }

// decision records the policy's evaluation and what the gateway made of it
// (the agent's mcp_tools can turn an allow into a deny).
func (r *record) decision(d policy.MCPDecision, decision, reason string) {
	r.sum["decision"] = decision
	if reason != "" {
		r.sum["reason"] = reason
	}
	r.sum["policy_decision"] = d.Decision
	r.sum["decision_id"] = d.DecisionID
	r.sum["revision"] = d.Revision
	if d.FailClosed {
		r.sum["fail_closed"] = true
	}
}

// redactions records the counts per detector (never the values).
func (r *record) redactions(key string, counts map[string]int) {
	if len(counts) > 0 {
		r.sum[key] = counts
	}
}

// resultSummary is the summary of an mcp.result entry: the hash of the
// result (or error) as the server sent it, whether the tool reported an
// error, and the latency.
func (t *turn) resultSummary(m *message, um *message, start time.Time) map[string]any {
	sum := map[string]any{"server": t.srv.name, "jsonrpc_id": string(compact(m.id)), "mcp_session_id": t.sess.ID,
		"latency_ms": float64(time.Since(start).Microseconds()) / 1000}
	if t.behalf != nil {
		sum["on_behalf_of"] = t.behalf
	}
	switch {
	case um == nil:
	case um.result != nil:
		sum["result_sha256"] = sha256Hex(um.result)
		var flag struct {
			IsError bool `json:"isError"`
		}
		_ = json.Unmarshal(um.result, &flag) // a tool's own members are its business

		sum["is_error"] = flag.IsError
	case um.errObj != nil:
		sum["error_code"] = um.errObj.Code
		sum["is_error"] = true
	}
	return sum
}

// write appends an entry of the exchange to the audit trail; in closed
// mode it returns once the entry is durable, or the error that refuses
// the call.
func (t *turn) write(ctx context.Context, kind string, sum map[string]any, payload []byte) error {
	var digest string
	if payload != nil {
		digest = sha256Hex(payload)
	}
	return t.d.audit.Write(ctx, audit.Record{Kind: kind, AgentID: t.agent.ID, SessionID: t.ex.SessionID, RequestID: t.ex.RequestID,
		PayloadSHA256: digest, Object: summaryObject(sum)})
}

// summaryObject is the audit form of a summary this package builds as a
// map (its members are also read back, for metrics and the fold's key).
func summaryObject(sum map[string]any) *audit.Object {
	o := &audit.Object{}
	for k, v := range sum {
		o.Any(k, v)
	}
	return o
}

// spend takes one request of the agent's rate_limit (the key and rule of
// its chat requests: one budget for all it does) and, when the server
// limits the tool, one call of the tool's limit. A refusal is a code,
// a message and data; code 0 lets the call on.
func (t *turn) spend(ctx context.Context, tool string) (code int64, msg string, data any) {
	if r := t.agent.RateLimit; !r.IsZero() {
		what := func() string { return fmt.Sprintf("agent %s: %s", t.agent.ID, r) }
		if code, msg, data = t.take(ctx, "req:"+t.agent.ID, limit.Rule{N: r.N, Period: r.Period}, what); code != 0 {
			return code, msg, data
		}
	}
	if r, ok := t.srv.limits[tool]; ok {
		what := func() string { return fmt.Sprintf("tool %s of %s: %d per %s", tool, t.srv.name, r.N, r.Period) }
		return t.take(ctx, "mcp:"+t.srv.name+":"+tool+":"+t.agent.ID, r, what)
	}
	return 0, "", nil
}

// take takes one of key's budget under rule; what names the limit in a
// refusal (only then: spend runs on every call).
func (t *turn) take(ctx context.Context, key string, rule limit.Rule, what func() string) (code int64, msg string, data any) {
	res, err := t.d.limiter.Allow(ctx, key, rule, 1)
	if err != nil {
		// Fail closed, as the chat front door does with on_failure: closed;
		// the Fallback limiter answers locally when configured so.
		t.d.log.Warn("mcp: rate limiter", "error", err.Error(), "unavailable", errors.Is(err, limit.ErrUnavailable))
		return codeUnavailable, "The gateway's shared state is unavailable; retry shortly.", nil
	}
	if !res.Allowed {
		secs := max(1, int(res.RetryAfter.Round(time.Second)/time.Second))
		return codeRateLimited, fmt.Sprintf("Rate limit reached for %s. Retry after %ds.", what(), secs), map[string]any{"retry_after_seconds": secs}
	}
	return 0, "", nil
}

// toolLabel is the tool's metric label: its name when its server lists it,
// else "_other" (an agent's made-up names must not grow the series).
func (t *turn) toolLabel(name string) string {
	if t.srv.catalog.known(name) {
		return name
	}
	return "_other"
}
