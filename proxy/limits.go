package proxy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/config"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/limit"
)

// Limits is the stage enforcing the agent's rate_limit (requests) and
// token_limit (prompt+completion tokens). The token budget is reserved
// before the call with all the request may spend (the prompt estimate plus
// max_tokens, or the agent's completion_estimate, for every attempt the
// protocol may make) and settled with the upstream's reported usage after
// it, so concurrent requests cannot together spend more than the budget
// (with max_tokens set) and the settle survives the client leaving.
type Limits struct {
	Requests limit.Limiter
	Tokens   limit.Budget
	// Audit records rejections.
	Audit *httpx.Recorder
	// Attempts is how many model calls one request of this agent may make
	// (the protocol's re-asks); nil: one.
	Attempts func(*config.Agent) int
}

// settleTimeout bounds the settle, which runs on a context the client's
// departure does not cancel.
const settleTimeout = 5 * time.Second

// reservation is what a request may spend at most: each attempt sends the
// prompt and may receive the completion bound.
func (l *Limits) reservation(ex *scope.Exchange) int {
	completion := ex.MaxTokens
	if completion == 0 {
		completion = ex.Agent.CompletionEstimate
	}
	if ex.NoCompletion {
		completion = 0
	}
	attempts := 1
	if l.Attempts != nil {
		attempts = max(1, l.Attempts(ex.Agent))
	}
	return attempts * (ex.TokenEstimate + completion)
}

// reject audits a 429 and returns it.
func (l *Limits) reject(r *http.Request, ex *scope.Exchange, dim string, e error) error {
	ex.Check(scope.Verdict{Check: scope.CheckLimits, Verdict: "reject", Dimension: dim})
	summary := &audit.Object{}
	summary.Str("route", r.URL.Path)
	summary.Str("model", ex.Model)
	summary.Str("dimension", dim)
	checksSummary(summary, ex.Checks)
	if err := journalOf(r, l.Audit).refused(r.Context(), audit.Record{Kind: audit.KindRateLimitReject, PayloadSHA256: ex.PayloadSHA256, Object: summary}); err != nil {
		return err
	}
	return e
}

func rule(r config.Rate) limit.Rule { return limit.Rule{N: r.N, Period: r.Period} }

// Serve implements Stage.
func (l *Limits) Serve(w http.ResponseWriter, r *http.Request, next http.Handler) error {
	ex := scope.Get(r.Context())
	a := ex.Agent
	if err := l.allowRequest(w, r); err != nil {
		return err
	}
	h := w.Header()
	verdict := scope.Verdict{Check: scope.CheckLimits, Verdict: "pass", Requests: a.RateLimit.String(), Tokens: a.TokenLimit.String()}
	if a.TokenLimit.IsZero() {
		ex.Check(verdict)
		next.ServeHTTP(w, r)
		return nil
	}
	tr := rule(a.TokenLimit)
	reserved := l.reservation(ex)
	res, err := l.Tokens.Reserve(r.Context(), "tok:"+a.ID, tr, reserved)
	if err != nil {
		return stateError("token budget", err)
	}
	setLimitHeaders(h, "tokens", res)
	if !res.Allowed {
		return l.reject(r, ex, "tokens", apierror.RateLimited(fmt.Sprintf("Token limit reached for agent %s: %s; this request needs about %d tokens. Retry after %s.",
			a.ID, a.TokenLimit, reserved, roundUp(res.RetryAfter)), retryAfter(h, res)))
	}
	verdict.TokensReserved = reserved
	ex.Check(verdict)
	next.ServeHTTP(w, r)
	// What the provider reported is charged; without a report (the client
	// left before the usage chunk, the upstream failed mid-stream) the whole
	// reservation stays spent: the gateway cannot know it was less.
	actual := reserved
	if ex.UsageKnown {
		actual = ex.Usage.TotalTokens
	}
	// Settling must happen even when the client went away: the tokens were
	// spent all the same, so the client's cancellation must not reach it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), settleTimeout)
	defer cancel()
	if err := l.Tokens.Settle(ctx, "tok:"+a.ID, tr, reserved, actual); err != nil {
		ex.Err = fmt.Errorf("token budget settle: %w", err)
	}
	return nil
}

// allowRequest spends one request of the agent's rate_limit (shared by
// every front door: chat, embeddings and agent-to-agent messages).
func (l *Limits) allowRequest(w http.ResponseWriter, r *http.Request) error {
	ex := scope.Get(r.Context())
	a := ex.Agent
	if a.RateLimit.IsZero() {
		return nil
	}
	h := w.Header()
	res, err := l.Requests.Allow(r.Context(), "req:"+a.ID, rule(a.RateLimit), 1)
	if err != nil {
		return stateError("rate limiter", err)
	}
	setLimitHeaders(h, "requests", res)
	if !res.Allowed {
		return l.reject(r, ex, "requests", apierror.RateLimited(fmt.Sprintf("Rate limit reached for agent %s: %s. Retry after %s.",
			a.ID, a.RateLimit, roundUp(res.RetryAfter)), retryAfter(h, res)))
	}
	return nil
}

// stateError maps a shared-state failure (Redis down with
// state.on_failure: closed) to a 503 the client can retry.
func stateError(what string, err error) error {
	if errors.Is(err, limit.ErrUnavailable) {
		return &apierror.Error{Status: http.StatusServiceUnavailable, Type: apierror.TypeServer, Code: "state_unavailable",
			Message: "The gateway's shared state is unavailable; retry shortly.", Header: http.Header{"Retry-After": {"1"}}, Err: err}
	}
	return fmt.Errorf("%s: %w", what, err)
}

// setLimitHeaders writes OpenAI's x-ratelimit-* headers for one dimension.
func setLimitHeaders(h http.Header, dim string, res limit.Result) {
	k := limitHeaderKeys[dim]
	// The keys are in canonical form already: set directly, without
	// Header.Set's canonicalization and concatenation on every request.
	h[k[0]] = []string{strconv.Itoa(res.Limit)}
	h[k[1]] = []string{strconv.Itoa(res.Remaining)}
	h[k[2]] = []string{roundUp(res.Reset).String()}
}

// limitHeaderKeys are the x-ratelimit-* header names of each dimension.
var limitHeaderKeys = map[string][3]string{
	"requests": {"X-Ratelimit-Limit-Requests", "X-Ratelimit-Remaining-Requests", "X-Ratelimit-Reset-Requests"},
	"tokens":   {"X-Ratelimit-Limit-Tokens", "X-Ratelimit-Remaining-Tokens", "X-Ratelimit-Reset-Tokens"},
}

// retryAfter returns the headers of a 429: the x-ratelimit-* already set
// plus Retry-After in whole seconds (at least 1, as clients sleep on it).
func retryAfter(h http.Header, res limit.Result) http.Header {
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

// roundUp rounds d up to whole milliseconds, so "retry after" is never early.
func roundUp(d time.Duration) time.Duration {
	if d <= 0 {
		return 0
	}
	return (d + time.Millisecond - 1).Truncate(time.Millisecond)
}
