package door

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/limit"
)

// RequestsKey is the key of an agent's rate_limit in the limiter, the
// agent's id appended: shared by every door that spends it, and read by
// the ops page.
const RequestsKey = "req:"

// TeamRequestsKey is the key of a team's rate_limit, the team's name
// appended. Every key of a team is one key on its own (no script or
// transaction spans two), so a Redis Cluster may place it anywhere.
const TeamRequestsKey = "team:req:"

// RateGate is the request-rate gate of the doors that send nothing to a
// model: one request of the agent's rate_limit, after the identify stage.
type RateGate struct {
	Requests limit.Limiter
	// Audit records the refusals.
	Audit *Recorder
}

// Serve runs next once a request of the agent's rate_limit is spent.
func (g *RateGate) Serve(w http.ResponseWriter, r *http.Request, next http.Handler) error {
	if err := AllowRequest(w, r, g.Requests, g.Audit); err != nil {
		return err
	}
	next.ServeHTTP(w, r)
	return nil
}

// RejectLimit audits a 429 of the limit dim (requests, tokens, budget) as
// ratelimit.reject and returns it.
func RejectLimit(r *http.Request, rec *Recorder, dim string, e error) error {
	ex := scope.Get(r.Context())
	ex.Check(scope.Verdict{Check: scope.CheckLimits, Verdict: "reject", Dimension: dim})
	summary := &audit.Object{}
	summary.Str("route", r.URL.Path)
	summary.Str("model", ex.Model)
	summary.Str("dimension", dim)
	ChecksSummary(summary, ex.Checks)
	if err := JournalOf(r, rec).Refused(r.Context(), audit.Record{Kind: audit.KindRateLimitReject, PayloadSHA256: ex.PayloadSHA256, Object: summary}); err != nil {
		return err
	}
	return e
}

// RateRule is a rate_limit or token_limit as a limit.Rule.
func RateRule(r config.Rate) limit.Rule { return limit.Rule{N: r.N, Period: r.Period} }

// AllowRequest spends one request of the agent's rate_limit, then of its
// team's (shared by every front door: chat, embeddings, agent-to-agent
// messages, workflows, the registry), writing the x-ratelimit-*-requests
// headers of the tighter of the two; a refusal names the limit that
// refused and is audited through rec as ratelimit.reject.
func AllowRequest(w http.ResponseWriter, r *http.Request, requests limit.Limiter, rec *Recorder) error {
	ex := scope.Get(r.Context())
	a := ex.Agent
	h := w.Header()
	var shown *limit.Result
	if !a.RateLimit.IsZero() {
		res, err := requests.Allow(r.Context(), RequestsKey+a.ID, RateRule(a.RateLimit), 1)
		if err != nil {
			return StateError("rate limiter", err)
		}
		SetLimitHeaders(h, "requests", res)
		if !res.Allowed {
			return RejectLimit(r, rec, "requests", apierror.RateLimited(fmt.Sprintf("Rate limit reached for agent %s: %s. Retry after %s.",
				a.ID, a.RateLimit, RoundUp(res.RetryAfter)), RetryAfter(h, res)))
		}
		shown = &res
	}
	t := ex.Team
	if t == nil || t.RateLimit.IsZero() {
		return nil
	}
	res, err := requests.Allow(r.Context(), TeamRequestsKey+t.Name, RateRule(t.RateLimit), 1)
	if err != nil {
		return StateError("team rate limiter", err)
	}
	if shown == nil || !res.Allowed || res.Remaining < shown.Remaining {
		SetLimitHeaders(h, "requests", res)
	}
	if !res.Allowed {
		return RejectLimit(r, rec, "team_requests", apierror.RateLimited(fmt.Sprintf("Rate limit reached for team %s (agent %s's team): %s. Retry after %s.",
			t.Name, a.ID, t.RateLimit, RoundUp(res.RetryAfter)), RetryAfter(h, res)))
	}
	return nil
}

// StateError maps a shared-state failure (Redis down with
// state.on_failure: closed) to a 503 the client can retry.
func StateError(what string, err error) error {
	if errors.Is(err, limit.ErrUnavailable) {
		return &apierror.Error{Status: http.StatusServiceUnavailable, Type: apierror.TypeServer, Code: "state_unavailable",
			Message: "The gateway's shared state is unavailable; retry shortly.", Header: http.Header{"Retry-After": {"1"}}, Err: err}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// SetLimitHeaders writes OpenAI's x-ratelimit-* headers for one dimension.
func SetLimitHeaders(h http.Header, dim string, res limit.Result) {
	k := limitHeaderKeys[dim]
	// The keys are in canonical form already: set directly, without
	// Header.Set's canonicalization and concatenation on every request.
	h[k[0]] = []string{strconv.Itoa(res.Limit)}
	h[k[1]] = []string{strconv.Itoa(res.Remaining)}
	h[k[2]] = []string{RoundUp(res.Reset).String()}
}

// limitHeaderKeys are the x-ratelimit-* header names of each dimension.
var limitHeaderKeys = map[string][3]string{
	"requests": {"X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests"},
	"tokens":   {"X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens"},
}

// RetryAfter returns the headers of a 429: the x-ratelimit-* already set
// plus Retry-After in whole seconds (at least 1, as clients sleep on it).
// When that is more than apierror.FailFastAfter away, apierror.Write adds
// x-should-retry: false, so that SDKs fail at once instead of sleeping.
func RetryAfter(h http.Header, res limit.Result) http.Header {
	out := http.Header{}
	for k, v := range h {
		if len(k) > 12 && k[:12] == "X-Ratelimit-" {
			out[k] = v
		}
	}
	secs := int(math.Ceil(res.RetryAfter.Seconds()))
	out.Set("Retry-After", strconv.Itoa(max(1, secs)))
	return out
}

// RoundUp rounds d up to whole milliseconds, so "retry after" is never early.
func RoundUp(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}

// checkNames are the checks every entry accounts for: one that did not run
// says so, so the trail never implies it passed.
var checkNames = [...]string{scope.CheckAuth, scope.CheckLimits, scope.CheckRBAC, scope.CheckPolicy, scope.CheckProtocol, scope.CheckRedaction}

// ChecksSummary writes the exchange's checks as the entry's "checks".
func ChecksSummary(s *audit.Object, c []scope.Verdict) {
	s.Begin("checks")
	for _, v := range c {
		s.Begin(v.Check)
		v.Encode(s)
		s.End()
	}
	for _, name := range checkNames {
		if !slices.ContainsFunc(c, func(v scope.Verdict) bool { return v.Check == name }) {
			s.Begin(name)
			s.Str("verdict", "not_evaluated")
			s.End()
		}
	}
	s.End()
}
