package proxy

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/pricing"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/limit"
)

// Limits is the stage enforcing the agent's rate_limit (requests),
// token_limit (prompt+completion tokens) and budget (dollars). Both budgets
// are reserved before the call with all the request may spend (the prompt
// estimate plus max_tokens, or the agent's completion_estimate, for every
// choice and every attempt the protocol may make; in dollars at the model's
// input and output prices) and settled after it with what the provider
// billed, so concurrent requests cannot together spend more than a budget
// (with max_tokens set) and the settle survives the client leaving. A call
// that billed nothing (refused before it, or by the provider) gives its
// reservations back.
type Limits struct {
	Requests limit.Limiter
	// Tokens holds both budgets, under separate keys: "tok:<agent>" in
	// tokens and "usd:<agent>" in micro-dollars, so the dollar budget is
	// shared by the replicas and falls back exactly as the token budget.
	Tokens limit.Budget
	// Audit records rejections.
	Audit *door.Recorder
	// Attempts is how many model calls one request of this agent may make
	// (the protocol's re-asks); nil: one.
	Attempts func(*roster.Agent) int
	// Prices prices the models (gateway.yaml pricing over the shipped list
	// prices); nil: the shipped list prices alone.
	Prices *pricing.Table
	// Spend counts what the agents spent, for /metrics; nil: not counted.
	Spend *Spend
}

// settleTimeout bounds the settle, which runs on a context the client's
// departure does not cancel.
const settleTimeout = 5 * time.Second

// bound is the most a request may use: attempts calls, each sending about
// prompt tokens and receiving at most completion tokens.
func (l *Limits) bound(ex *scope.Exchange) (attempts, prompt, completion int) {
	completion = ex.MaxTokens
	if completion == 0 {
		completion = ex.Agent.CompletionEstimate
	}
	if ex.NoCompletion {
		completion = 0
	}
	// Each of the n choices is a completion of its own.
	completion *= max(1, ex.Choices)
	attempts = 1
	if l.Attempts != nil {
		attempts = max(1, l.Attempts(ex.Agent))
	}
	return attempts, ex.TokenEstimate, completion
}

// reservation is what a request may spend at most, in tokens.
func (l *Limits) reservation(ex *scope.Exchange) int {
	attempts, prompt, completion := l.bound(ex)
	return attempts * (prompt + completion)
}

// budgetReservation is what a request may spend at most, in micro-dollars
// at the exchange's price; every prompt token is priced uncached, as the
// gateway cannot know what the provider's cache holds.
func (l *Limits) budgetReservation(ex *scope.Exchange) int64 {
	attempts, prompt, completion := l.bound(ex)
	per := pricing.MicroUSD(ex.Price, pricing.Usage{Prompt: prompt, Completion: completion})
	return int64(attempts) * per // attempts is a handful, per at most ~10¹³
}

// The keys of an agent's budgets in the limiters, the agent's id appended
// (the rate_limit's is door.RequestsKey), read by the ops page too.
const (
	TokensKey  = "tok:" // Tokens: the token_limit, in tokens
	DollarsKey = "usd:" // Tokens: the budget, in micro-dollars
)

// reject audits a 429 of the budgets and returns it.
func (l *Limits) reject(r *http.Request, dim string, e error) error {
	return door.RejectLimit(r, l.Audit, dim, e)
}

// allowRequest spends one request of the agent's rate_limit (the door
// frame's gate, shared by every front door).
func (l *Limits) allowRequest(w http.ResponseWriter, r *http.Request) error {
	return door.AllowRequest(w, r, l.Requests, l.Audit)
}

// Serve implements Stage.
func (l *Limits) Serve(w http.ResponseWriter, r *http.Request, next http.Handler) error {
	ex := scope.Get(r.Context())
	a := ex.Agent
	ex.Price, ex.HasPrice = l.Prices.Lookup(ex.Model)
	if !a.Budget.IsZero() && !ex.HasPrice {
		// Before the request rate: like a model the agent may not use, a
		// request the gateway will not serve must not spend it.
		return l.unpriced(ex)
	}
	if err := l.allowRequest(w, r); err != nil {
		return err
	}
	h := w.Header()
	verdict := scope.Verdict{Check: scope.CheckLimits, Verdict: "pass", Requests: a.RateLimit.String(), Tokens: a.TokenLimit.String()}
	tr := door.RateRule(a.TokenLimit)
	reserved := 0
	if !a.TokenLimit.IsZero() {
		reserved = l.reservation(ex)
		res, err := l.Tokens.Reserve(r.Context(), TokensKey+a.ID, tr, reserved)
		if err != nil {
			return door.StateError("token budget", err)
		}
		door.SetLimitHeaders(h, "tokens", res)
		if !res.Allowed {
			return l.reject(r, "tokens", apierror.RateLimited(fmt.Sprintf("Token limit reached for agent %s: %s; this request needs about %d tokens. Retry after %s.",
				a.ID, a.TokenLimit, reserved, door.RoundUp(res.RetryAfter)), door.RetryAfter(h, res)))
		}
		verdict.TokensReserved = reserved
	}
	ur := BudgetRule(a.Budget)
	if !a.Budget.IsZero() {
		usd, err := l.reserveBudget(h, r, ex, ur)
		if err != nil {
			// Refused: the tokens reserved were not spent.
			if !a.TokenLimit.IsZero() {
				l.settle(r, ex, []settlement{{"token budget", TokensKey + a.ID, tr, reserved, 0}})
			}
			return err
		}
		ex.BudgetReserved = usd
	}
	ex.Check(verdict)
	sw := &statusWriter{ResponseWriter: w}
	// Deferred: a stream the upstream broke ends in a panic
	// (http.ErrAbortHandler), and its spend must be settled all the same.
	defer l.settleAfter(r, ex, sw, tr, ur, reserved)
	next.ServeHTTP(sw, r)
	return nil
}

// settleAfter charges what the call cost, on both budgets, and counts the
// spend. What the provider reported is charged; what it billed nothing for
// is given back; without a report of a call that may have been billed (the
// client left before the usage chunk, the stream broke) the whole
// reservation stays spent: the gateway cannot know it was less.
func (l *Limits) settleAfter(r *http.Request, ex *scope.Exchange, sw *statusWriter, tr, ur limit.Rule, reserved int) {
	a := ex.Agent
	b := billOf(ex, sw.status)
	c := chargeOf(ex, b)
	l.Spend.record(a.ID, c)
	var due []settlement
	if !a.TokenLimit.IsZero() {
		actual := reserved
		switch b {
		case billUsage:
			actual = ex.Usage.TotalTokens
		case billNone:
			actual = 0
		}
		due = append(due, settlement{"token budget", TokensKey + a.ID, tr, reserved, actual})
	}
	if !a.Budget.IsZero() {
		// A budgeted model has a price, so c is priced unless the usage
		// is unknown.
		actual := ex.BudgetReserved
		if c.priced {
			actual = c.microUSD
		}
		due = append(due, settlement{"dollar budget", DollarsKey + a.ID, ur, clampInt(ex.BudgetReserved), clampInt(actual)})
	}
	l.settle(r, ex, due)
}

// settlement is one budget's settle after the call.
type settlement struct {
	what, key        string
	rule             limit.Rule
	reserved, actual int
}

// settle settles every budget. It must happen even when the client went
// away: the spend happened all the same, so the client's cancellation must
// not reach it. A failure is recorded for the log; the answer has gone.
func (l *Limits) settle(r *http.Request, ex *scope.Exchange, due []settlement) {
	if len(due) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), settleTimeout)
	defer cancel()
	for _, s := range due {
		if err := l.Tokens.Settle(ctx, s.key, s.rule, s.reserved, s.actual); err != nil {
			ex.Err = errors.Join(ex.Err, fmt.Errorf("%s settle: %w", s.what, err))
		}
	}
}

// reserveBudget reserves the request's most expensive outcome on the
// agent's dollar budget and returns it, or the 429 budget_exceeded (with
// the budget's x-ratelimit-*-usd headers and Retry-After).
func (l *Limits) reserveBudget(h http.Header, r *http.Request, ex *scope.Exchange, ur limit.Rule) (int64, error) {
	a := ex.Agent
	usd := l.budgetReservation(ex)
	res, err := l.Tokens.Reserve(r.Context(), DollarsKey+a.ID, ur, clampInt(usd))
	if err != nil {
		return 0, door.StateError("dollar budget", err)
	}
	setBudgetHeaders(h, res)
	if res.Allowed {
		return usd, nil
	}
	msg := fmt.Sprintf("Budget reached for agent %s: %s; this request may cost up to %s USD. Retry after %s.",
		a.ID, budgetString(a.Budget), pricing.FormatUSD(usd), door.RoundUp(res.RetryAfter))
	if usd > a.Budget.MicroUSD {
		msg = fmt.Sprintf("This request may cost up to %s USD, more than agent %s's whole budget of %s; lower max_tokens.",
			pricing.FormatUSD(usd), a.ID, budgetString(a.Budget))
	}
	return 0, l.reject(r, "budget", &apierror.Error{Status: http.StatusTooManyRequests, Type: apierror.TypeRateLimit,
		Code: "budget_exceeded", Message: msg, Header: door.RetryAfter(h, res)})
}

// unpriced refuses, with a 403, a call of a model the pricing table does
// not know from an agent with a budget: a budget cannot be enforced on a
// cost the gateway cannot compute, so it fails closed.
func (l *Limits) unpriced(ex *scope.Exchange) error {
	a := ex.Agent
	ex.Check(scope.Verdict{Check: scope.CheckLimits, Verdict: "deny", Reason: "model_not_priced",
		Requests: a.RateLimit.String(), Tokens: a.TokenLimit.String()})
	return &apierror.Error{Status: http.StatusForbidden, Type: apierror.TypePermission, Code: "model_not_priced", Param: "model",
		Message: fmt.Sprintf("The model `%s` has no price in the gateway's pricing table, and agent %s has a budget (%s) that cannot be enforced without one. Ask the gateway's operator to add `%s` under pricing in gateway.yaml.",
			ex.Model, a.ID, budgetString(a.Budget), ex.Model)}
}

// budgetString writes a budget as agents.yaml does ("25USD/day"), always
// the same way (config.Money's String picks among the period's aliases).
func budgetString(m config.Money) string {
	per := m.Period.String()
	switch m.Period {
	case time.Second:
		per = "second"
	case time.Minute:
		per = "minute"
	case time.Hour:
		per = "hour"
	case 24 * time.Hour:
		per = "day"
	}
	return pricing.FormatUSD(m.MicroUSD) + "USD/" + per
}

// BudgetRule is the dollar budget as a limit.Rule in micro-dollars.
func BudgetRule(m config.Money) limit.Rule {
	return limit.Rule{N: clampInt(m.MicroUSD), Period: m.Period}
}

// clampInt converts micro-dollars to the limit package's int, saturating
// where int is narrower (never wrapping to a negative or small amount).
func clampInt(v int64) int { return int(min(v, int64(math.MaxInt))) }

// setBudgetHeaders writes the dollar budget's x-ratelimit-*-usd headers:
// limit and remaining in dollars (exact decimals), reset as the token
// budget's.
func setBudgetHeaders(h http.Header, res limit.Result) {
	h["X-Ratelimit-Limit-Usd"] = []string{pricing.FormatUSD(int64(res.Limit))}
	h["X-Ratelimit-Remaining-Usd"] = []string{pricing.FormatUSD(int64(res.Remaining))}
	h["X-Ratelimit-Reset-Usd"] = []string{door.RoundUp(res.Reset).String()}
}
