package app

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"slices"
	"strings"

	"github.com/sacpgw/gateway/approval"
	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/limit"
	"github.com/sacpgw/gateway/policy"
	"github.com/sacpgw/gateway/proxy"
	"github.com/sacpgw/gateway/workflow"
	"github.com/sacpgw/gateway/workflow/definition"
)

// opsTailBytes bounds the read of the audit chain's end on each load of
// the operator page: about a thousand entries, a few milliseconds of work.
const opsTailBytes = 1 << 20

// reviewDoor is the review site's pages beyond the approval API (the
// queue, sign-out, the operator page), mounted like /admin routes: their
// handlers authenticate people themselves. Nil without the approval
// service (config check builds no trail).
func (a *App) reviewDoor(cfg *config.Config) (door.Door, error) {
	if a.approval == nil {
		return nil, nil
	}
	src := &opsSource{
		requests: a.state.limiter, budget: a.state.budget, spend: a.spend, policies: a.policies,
		auditDir: cfg.Gateway.Audit.Dir, chain: a.audit.Chain(), tailBytes: opsTailBytes, log: a.log,
		workflows: cfg.Workflows,
	}
	return pages(a.approval.SiteRoutes(src)), nil
}

// opsSource is the operator page's data (approval.OpsSource), read from
// the gateway's own parts: the limiters' state (peeked, never spent), the
// spend counters, the policy engine, and this replica's audit chain on
// disk. Reading the refusals back from the trail, rather than keeping a
// ring of them in memory, puts nothing on the request path, survives a
// restart, and shows exactly what the trail holds; the same read checks
// the end of the chain.
type opsSource struct {
	requests  limit.Limiter
	budget    limit.Budget
	spend     *proxy.Spend
	policies  *policy.Engine
	auditDir  string
	chain     string
	tailBytes int64
	log       *slog.Logger
	// workflows names the callers whose runs' steps count against
	// step_limit (on the requests limiter, under workflow.StepsKey).
	workflows *definition.Set
}

var _ approval.OpsSource = (*opsSource)(nil)

// Usage implements approval.OpsSource.
func (s *opsSource) Usage(ctx context.Context, agents []*roster.Agent) []approval.AgentUsage {
	out := make([]approval.AgentUsage, 0, len(agents))
	for _, a := range agents {
		u := approval.AgentUsage{Agent: a.ID}
		u.SpentMicroUSD, u.UnknownCost = s.spend.MicroUSD(a.ID), s.spend.UnknownCost(a.ID)
		if !a.RateLimit.IsZero() {
			rule := door.RateRule(a.RateLimit)
			res, err := peekRate(ctx, s.requests, door.RequestsKey+a.ID, rule)
			u.Limits = append(u.Limits, s.use(a.ID, "requests", rule, 1, res, err))
		}
		if !a.TokenLimit.IsZero() {
			rule := door.RateRule(a.TokenLimit)
			res, err := peekBudget(ctx, s.budget, proxy.TokensKey+a.ID, rule)
			u.Limits = append(u.Limits, s.use(a.ID, "tokens", rule, 1, res, err))
		}
		if !a.Budget.IsZero() {
			rule := proxy.BudgetRule(a.Budget)
			res, err := peekBudget(ctx, s.budget, proxy.DollarsKey+a.ID, rule)
			u.Limits = append(u.Limits, s.use(a.ID, "USD", rule, 1e-6, res, err))
		}
		if s.startsWorkflows(a.ID) {
			n, period := s.workflows.CallerSteps()
			rule := limit.Rule{N: n, Period: period}
			res, err := peekRate(ctx, s.requests, workflow.StepsKey+a.ID, rule)
			u.Limits = append(u.Limits, s.use(a.ID, "workflow steps", rule, 1, res, err))
		}
		out = append(out, u)
	}
	return out
}

// startsWorkflows reports whether agent is a caller of some workflow: only
// those have a step_limit to show.
func (s *opsSource) startsWorkflows(agent string) bool {
	if s.workflows == nil {
		return false
	}
	for _, w := range s.workflows.Workflows {
		if slices.Contains(w.Callers, agent) {
			return true
		}
	}
	return false
}

func peekRate(ctx context.Context, l limit.Limiter, key string, rule limit.Rule) (limit.Result, error) {
	p, ok := l.(limit.RatePeeker)
	if !ok {
		return limit.Result{}, fmt.Errorf("the request limiter (%T) cannot report its state", l)
	}
	return p.PeekRate(ctx, key, rule)
}

func peekBudget(ctx context.Context, b limit.Budget, key string, rule limit.Rule) (limit.Result, error) {
	p, ok := b.(limit.BudgetPeeker)
	if !ok {
		return limit.Result{}, fmt.Errorf("the budget (%T) cannot report its state", b)
	}
	return p.PeekBudget(ctx, key, rule)
}

// use is a limit's use in the page's units (scale: units per count).
func (s *opsSource) use(agent, dim string, rule limit.Rule, scale float64, res limit.Result, err error) approval.LimitUse {
	u := approval.LimitUse{Dimension: dim, Limit: float64(rule.N) * scale, Period: rule.Period}
	if err != nil {
		s.log.Warn("operator page: limit state unreadable", "agent", agent, "limit", dim, "error", err.Error())
		u.Error = "could not be read: " + err.Error()
		return u
	}
	u.Used = float64(max(0, rule.N-res.Remaining)) * scale
	u.Reset = res.Reset
	return u
}

// Policy implements approval.OpsSource.
func (s *opsSource) Policy(context.Context) approval.PolicyStatus {
	st := s.policies.Stats()
	ps := approval.PolicyStatus{
		Revision: s.policies.Revision(), ShadowRevision: s.policies.ShadowRevision(), ReloadProblem: s.policies.ReloadProblem(),
		Decisions: st.Decisions, FailClosed: st.FailClosed,
		ShadowEvaluations: st.ShadowEvaluations, ShadowDisagreements: st.ShadowDisagreements, ShadowDropped: st.ShadowDropped,
	}
	if b := s.policies.Bundle(); b.Source != "" {
		ps.Bundle = &approval.BundleStatus{Source: b.Source, Revision: b.Revision, Error: b.Error, Checked: b.Checked}
	}
	return ps
}

// Trail implements approval.OpsSource.
func (s *opsSource) Trail(context.Context) approval.TrailStatus {
	st := approval.TrailStatus{Chain: s.chain}
	tail, err := audit.ReadTail(s.auditDir, s.chain, s.tailBytes)
	if err != nil {
		s.log.Warn("operator page: audit trail unreadable", "dir", s.auditDir, "error", err.Error())
		st.Error = err.Error()
		return st
	}
	if tail.Problem != "" {
		s.log.Error("operator page: the end of the audit chain is not sound", "chain", s.chain, "problem", tail.Problem)
	}
	st.Read, st.Partial, st.Torn, st.Problem = len(tail.Entries), tail.Partial, tail.Torn, tail.Problem
	if n := len(tail.Entries); n > 0 {
		last := tail.Entries[n-1]
		st.Since, st.LastSeq, st.LastHash, st.LastAt = tail.Entries[0].TS, last.Seq, last.Hash, last.TS
	}
	if cp := tail.Checkpoint; cp != nil {
		st.Checkpoint = &approval.CheckpointStatus{Seq: cp.Seq, At: tail.CheckpointTime(), Signed: cp.Signature != "", Checked: tail.CheckpointChecked}
	}
	for _, e := range slices.Backward(tail.Entries) {
		var sum map[string]any
		if json.Unmarshal(e.Summary, &sum) != nil {
			continue // the writer only writes objects; a bad one is the chain's Problem
		}
		if r, ok := refusalOf(e, sum); ok {
			st.Refusals = append(st.Refusals, r)
		}
		if e.Kind == "policy.shadow" {
			st.Disagreements = append(st.Disagreements, approval.Disagreement{At: e.TS, Point: textOf(sum, "point"),
				Live: textOf(sum, "live"), Shadow: textOf(sum, "shadow")})
		}
	}
	return st
}

// refusalOf reads a refusal out of an audit entry: a failed
// authentication, a rate or budget limit, a request answered with a 4xx
// (refused before the call: policy, model, size; or by the provider), a
// rejected approval request or escalation, or a denied decision. Summaries
// are redacted before they are written, and hold no token.
func refusalOf(e audit.Entry, sum map[string]any) (approval.Refusal, bool) {
	r := approval.Refusal{At: e.TS, Kind: e.Kind, Agent: e.AgentID, RequestID: e.RequestID, Route: textOf(sum, "route"), Count: 1}
	if n, ok := sum["status"].(float64); ok {
		r.Status = int(n)
	}
	switch {
	case e.Kind == audit.KindAuthFailure:
		r.Reason, r.Source = textOf(sum, "reason"), textOf(sum, "remote")
		if n, ok := sum["count"].(float64); ok && n > 1 {
			r.Count = int(n)
		}
	case e.Kind == audit.KindRateLimitReject:
		r.Status = 429
		dim := textOf(sum, "dimension")
		r.Reason = dim + " limit reached"
		if rule := textOf(objectOf(sum, "checks", "limits"), dim); rule != "" {
			r.Reason += " (" + rule + ")"
		}
	case e.Kind == audit.KindEscalationDecision:
		if textOf(sum, "decision") != "reject" || sum["applied"] == false {
			return r, false
		}
		r.Reason = "rejected by " + textOf(sum, "reviewer")
		if c := textOf(sum, "comment"); c != "" {
			r.Reason += ": " + c
		}
	case textOf(sum, "status") == "rejected":
		// An approval decision: the policy's violations say why.
		r.Reason = violations(sum)
	case r.Status >= 400 && r.Status < 500, textOf(sum, "decision") == "deny":
		r.Reason = reasonOf(sum)
	default:
		return r, false
	}
	return r, true
}

// reasonOf is why a request was refused: the checks' reasons (a policy's
// deny set), else the summary's reason, else its error code.
func reasonOf(sum map[string]any) string {
	var reasons []string
	if checks, ok := sum["checks"].(map[string]any); ok {
		names := make([]string, 0, len(checks))
		for name := range checks {
			names = append(names, name)
		}
		slices.Sort(names)
		for _, name := range names {
			c, _ := checks[name].(map[string]any)
			for _, v := range textsOf(c["reasons"]) {
				reasons = append(reasons, name+": "+v)
			}
			if v := textOf(c, "reason"); v != "" {
				reasons = append(reasons, name+": "+v)
			}
		}
	}
	code := textOf(sum, "error_code")
	switch {
	case len(reasons) > 0 && code != "":
		return code + ": " + strings.Join(reasons, "; ")
	case len(reasons) > 0:
		return strings.Join(reasons, "; ")
	case textOf(sum, "reason") != "":
		return textOf(sum, "reason")
	}
	return code
}

// violations lists an approval decision's violations, rule: description.
func violations(sum map[string]any) string {
	vs, _ := sum["violations"].([]any)
	parts := make([]string, 0, len(vs))
	for _, v := range vs {
		m, _ := v.(map[string]any)
		parts = append(parts, textOf(m, "rule")+": "+textOf(m, "description"))
	}
	if len(parts) == 0 {
		return textOf(sum, "feedback")
	}
	return strings.Join(parts, "; ")
}

// textOf, objectOf and textsOf read a decoded summary's members.
func textOf(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

func objectOf(m map[string]any, keys ...string) map[string]any {
	for _, k := range keys {
		m, _ = m[k].(map[string]any)
	}
	return m
}

func textsOf(v any) []string {
	xs, _ := v.([]any)
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}
