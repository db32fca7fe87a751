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
	"github.com/sacpgw/gateway/internal/ledger"
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
	// Usage records each served request's usage per day, per agent and
	// team; nil: not recorded.
	Usage *ledger.Recorder
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

// The keys of a team's budgets, the team's name appended (its rate_limit's
// is door.TeamRequestsKey).
const (
	TeamTokensKey  = "team:tok:"
	TeamDollarsKey = "team:usd:"
)

// budgetLine is one budget a request reserves on and settles: the agent's
// or its team's, in tokens or in micro-dollars.
type budgetLine struct {
	what, key string
	rule      limit.Rule
	// owner names whose budget it is in a refusal ("agent a1", "team ds"),
	// text the limit as the file wrote it, dim the refusal's dimension in
	// the audit entry.
	owner, text, dim string
}

// tokenLines are the token_limits a request of ex spends: the agent's,
// then its team's.
func tokenLines(ex *scope.Exchange) []budgetLine {
	var out []budgetLine
	if a := ex.Agent; !a.TokenLimit.IsZero() {
		out = append(out, budgetLine{"token budget", TokensKey + a.ID, door.RateRule(a.TokenLimit), "agent " + a.ID, a.TokenLimit.String(), "tokens"})
	}
	if t := ex.Team; t != nil && !t.TokenLimit.IsZero() {
		out = append(out, budgetLine{"team token budget", TeamTokensKey + t.Name, door.RateRule(t.TokenLimit), "team " + t.Name, t.TokenLimit.String(), "team_tokens"})
	}
	return out
}

// dollarLines are the budgets a request of ex spends: the agent's, then
// its team's.
func dollarLines(ex *scope.Exchange) []budgetLine {
	var out []budgetLine
	if a := ex.Agent; !a.Budget.IsZero() {
		out = append(out, budgetLine{"dollar budget", DollarsKey + a.ID, BudgetRule(a.Budget), "agent " + a.ID, budgetString(a.Budget), "budget"})
	}
	if t := ex.Team; t != nil && !t.Budget.IsZero() {
		out = append(out, budgetLine{"team dollar budget", TeamDollarsKey + t.Name, BudgetRule(t.Budget), "team " + t.Name, budgetString(t.Budget), "team_budget"})
	}
	return out
}

// Serve implements Stage.
func (l *Limits) Serve(w http.ResponseWriter, r *http.Request, next http.Handler) error {
	ex := scope.Get(r.Context())
	a := ex.Agent
	ex.Price, ex.HasPrice = l.Prices.Lookup(ex.Model)
	toks, usds := tokenLines(ex), dollarLines(ex)
	if len(usds) > 0 && !ex.HasPrice {
		// Before the request rate: like a model the agent may not use, a
		// request the gateway will not serve must not spend it.
		return l.unpriced(ex, usds[0])
	}
	if err := l.allowRequest(w, r); err != nil {
		return err
	}
	h := w.Header()
	verdict := scope.Verdict{Check: scope.CheckLimits, Verdict: "pass", Requests: a.RateLimit.String(), Tokens: a.TokenLimit.String()}
	reserved := 0
	if len(toks) > 0 {
		reserved = l.reservation(ex)
	}
	held, err := l.reserveTokens(h, r, toks, reserved)
	if err != nil {
		return err
	}
	if len(toks) > 0 {
		verdict.TokensReserved = reserved
	}
	if len(usds) > 0 {
		usd := l.budgetReservation(ex)
		more, err := l.reserveBudget(h, r, usds, usd)
		if err != nil {
			// Refused: the tokens reserved were not spent.
			l.settle(r, ex, unspent(held))
			return err
		}
		held = append(held, more...)
		ex.BudgetReserved = usd
	}
	ex.Check(verdict)
	sw := &statusWriter{ResponseWriter: w}
	// Deferred: a stream the upstream broke ends in a panic
	// (http.ErrAbortHandler), and its spend must be settled all the same.
	defer l.settleAfter(r, ex, sw, held)
	next.ServeHTTP(sw, r)
	return nil
}

// unspent is every reservation of held given back whole.
func unspent(held []settlement) []settlement {
	out := make([]settlement, len(held))
	for i, s := range held {
		s.actual = 0
		out[i] = s
	}
	return out
}

// reserveTokens reserves n tokens on every line, in order, writing the
// x-ratelimit-*-tokens headers of the tightest; on a refusal it gives back
// what the earlier lines reserved and returns the 429 naming the line that
// refused.
func (l *Limits) reserveTokens(h http.Header, r *http.Request, lines []budgetLine, n int) ([]settlement, error) {
	ex := scope.Get(r.Context())
	var held []settlement
	tightest := math.MaxInt
	for _, bl := range lines {
		res, err := l.Tokens.Reserve(r.Context(), bl.key, bl.rule, n)
		if err != nil {
			l.settle(r, ex, unspent(held))
			return nil, door.StateError(bl.what, err)
		}
		if !res.Allowed || res.Remaining < tightest {
			door.SetLimitHeaders(h, "tokens", res)
			tightest = res.Remaining
		}
		if !res.Allowed {
			l.settle(r, ex, unspent(held))
			return nil, l.reject(r, bl.dim, apierror.RateLimited(fmt.Sprintf("Token limit reached for %s: %s; this request needs about %d tokens. Retry after %s.",
				bl.owner, bl.text, n, door.RoundUp(res.RetryAfter)), door.RetryAfter(h, res)))
		}
		held = append(held, settlement{bl.what, bl.key, bl.rule, n, n, false})
	}
	return held, nil
}

// settleAfter charges what the call cost, on every budget reserved, and
// counts the spend. What the provider reported is charged; what it billed
// nothing for is given back; without a report of a call that may have
// been billed (the client left before the usage chunk, the stream broke)
// the whole reservation stays spent: the gateway cannot know it was less.
func (l *Limits) settleAfter(r *http.Request, ex *scope.Exchange, sw *statusWriter, held []settlement) {
	b := billOf(ex, sw.status)
	c := chargeOf(ex, b)
	l.Spend.record(ex.Agent.ID, c)
	l.recordUsage(ex, b, c)
	for i := range held {
		s := &held[i]
		if s.dollars {
			// A budgeted model has a price, so c is priced unless the
			// usage is unknown.
			if c.priced {
				s.actual = clampInt(c.microUSD)
			}
			continue
		}
		switch b {
		case billUsage:
			s.actual = ex.Usage.TotalTokens
		case billNone:
			s.actual = 0
		}
	}
	l.settle(r, ex, held)
}

// recordUsage adds the request to the usage history when a model was
// called for it (one refused before, by policy or redaction, is the audit
// trail's): its tokens when the provider reported them, its spend when it
// was priced.
func (l *Limits) recordUsage(ex *scope.Exchange, b bill, c charge) {
	if l.Usage == nil || ex.Attempts == 0 {
		return
	}
	u := ledger.Counts{Requests: 1}
	if b == billUsage {
		u.Tokens = int64(ex.Usage.TotalTokens)
	}
	if c.priced {
		u.MicroUSD = c.microUSD
	}
	team := ""
	if ex.Team != nil {
		team = ex.Team.Name
	}
	l.Usage.Add(ex.Agent.ID, team, u)
}

// settlement is one budget's settle after the call; actual starts as the
// reservation (all of it spent) until the call says otherwise.
type settlement struct {
	what, key        string
	rule             limit.Rule
	reserved, actual int
	dollars          bool
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

// reserveBudget reserves the request's most expensive outcome, usd
// micro-dollars, on every dollar budget in order (the agent's, its
// team's), or returns the 429 budget_exceeded naming the budget that
// refused (with the x-ratelimit-*-usd headers of the tightest and
// Retry-After), the earlier reservations given back.
func (l *Limits) reserveBudget(h http.Header, r *http.Request, lines []budgetLine, usd int64) ([]settlement, error) {
	ex := scope.Get(r.Context())
	var held []settlement
	tightest := math.MaxInt
	for _, bl := range lines {
		res, err := l.Tokens.Reserve(r.Context(), bl.key, bl.rule, clampInt(usd))
		if err != nil {
			l.settle(r, ex, unspent(held))
			return nil, door.StateError(bl.what, err)
		}
		if !res.Allowed || res.Remaining < tightest {
			setBudgetHeaders(h, res)
			tightest = res.Remaining
		}
		if !res.Allowed {
			l.settle(r, ex, unspent(held))
			return nil, l.rejectBudget(r, h, bl, res, usd)
		}
		held = append(held, settlement{bl.what, bl.key, bl.rule, clampInt(usd), clampInt(usd), true})
	}
	return held, nil
}

// rejectBudget is the 429 budget_exceeded of bl.
func (l *Limits) rejectBudget(r *http.Request, h http.Header, bl budgetLine, res limit.Result, usd int64) error {
	msg := fmt.Sprintf("Budget reached for %s: %s; this request may cost up to %s USD. Retry after %s.",
		bl.owner, bl.text, pricing.FormatUSD(usd), door.RoundUp(res.RetryAfter))
	if usd > int64(bl.rule.N) {
		msg = fmt.Sprintf("This request may cost up to %s USD, more than %s's whole budget of %s; lower max_tokens.",
			pricing.FormatUSD(usd), bl.owner, bl.text)
	}
	return l.reject(r, bl.dim, &apierror.Error{Status: http.StatusTooManyRequests, Type: apierror.TypeRateLimit,
		Code: "budget_exceeded", Message: msg, Header: door.RetryAfter(h, res)})
}

// unpriced refuses, with a 403, a call of a model the pricing table does
// not know from an agent with a budget (its own or its team's, bl): a
// budget cannot be enforced on a cost the gateway cannot compute, so it
// fails closed.
func (l *Limits) unpriced(ex *scope.Exchange, bl budgetLine) error {
	a := ex.Agent
	ex.Check(scope.Verdict{Check: scope.CheckLimits, Verdict: "deny", Reason: "model_not_priced",
		Requests: a.RateLimit.String(), Tokens: a.TokenLimit.String()})
	return &apierror.Error{Status: http.StatusForbidden, Type: apierror.TypePermission, Code: "model_not_priced", Param: "model",
		Message: fmt.Sprintf("The model `%s` has no price in the gateway's pricing table, and %s has a budget (%s) that cannot be enforced without one. Ask the gateway's operator to add `%s` under pricing in gateway.yaml.",
			ex.Model, bl.owner, bl.text, ex.Model)}
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
