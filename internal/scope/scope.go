// Package scope holds the per-request state shared by the pipeline stages:
// one Exchange attached once to the request context, read and extended by
// each stage, and logged once at the end. No stage invents its own context key.
package scope

import (
	"context"
	"net/http"
	"time"

	"github.com/sacpgw/gateway/internal/pricing"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/team"
	"github.com/sacpgw/gateway/internal/usage"
	"github.com/sacpgw/gateway/upstream"
)

// Usage is the token usage the upstream reported (or the gateway estimated).
//
// Decoded from JSON, it is read by internal/usage's strict reader: a report
// that cannot be believed (a negative or fractional count, a total that is
// not the sum, more cached tokens than prompt tokens) does not fail the
// decoding of the answer around it (the answer may still be delivered) but
// leaves every count zero and says why in Unreadable, which every reader
// of the counts must check first.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	TotalTokens      int `json:"total_tokens"`
	// PromptTokensDetails is OpenAI's breakdown of the prompt; nil when the
	// provider sent none. Its cached tokens cost less than the others.
	PromptTokensDetails *PromptTokensDetails `json:"prompt_tokens_details,omitempty"`
	// Unreadable is why the report was not believed; "" when it was.
	Unreadable string `json:"-"`
}

// UnmarshalJSON reads a usage object strictly (internal/usage); an
// unreadable one is not an error here: see Unreadable.
func (u *Usage) UnmarshalJSON(b []byte) error {
	r, err := usage.Read(b)
	if err != nil {
		*u = Usage{Unreadable: usage.Reason(err)}
		return nil
	}
	*u = Usage{PromptTokens: int(r.Prompt), CompletionTokens: int(r.Completion), TotalTokens: int(r.Total)}
	if r.HasCached {
		u.PromptTokensDetails = &PromptTokensDetails{CachedTokens: int(r.Cached)}
	}
	return nil
}

// Plus is u and o added up (the calls of one exchange: a re-ask is billed
// too), cached prompt tokens included. Either unreadable makes the sum
// unreadable: the exchange's usage is then unknown.
func (u Usage) Plus(o Usage) Usage {
	if u.Unreadable != "" {
		return Usage{Unreadable: u.Unreadable}
	}
	if o.Unreadable != "" {
		return Usage{Unreadable: o.Unreadable}
	}
	sum := Usage{PromptTokens: u.PromptTokens + o.PromptTokens, CompletionTokens: u.CompletionTokens + o.CompletionTokens,
		TotalTokens: u.TotalTokens + o.TotalTokens}
	if u.PromptTokensDetails != nil || o.PromptTokensDetails != nil {
		sum.PromptTokensDetails = &PromptTokensDetails{}
		for _, d := range []*PromptTokensDetails{u.PromptTokensDetails, o.PromptTokensDetails} {
			if d != nil {
				sum.PromptTokensDetails.CachedTokens += d.CachedTokens
			}
		}
	}
	return sum
}

// PromptTokensDetails is usage.prompt_tokens_details: how many of the
// prompt tokens the provider served from its prompt cache.
type PromptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// ResponsesTurn is what a Responses API request said of the stored state.
type ResponsesTurn struct {
	// PreviousResponseID is the response it continues ("" for none).
	PreviousResponseID string
	// Store: the client asked for the response to be kept.
	Store bool
}

// Exchange is everything known about one request.
type Exchange struct {
	RequestID     string
	SessionID     string
	CorrelationID string
	// RunID and Node name the workflow step this exchange is, if any.
	RunID, Node string
	// Dialect is the API the client spoke when it is not OpenAI Chat
	// Completions ("messages": the Anthropic Messages API); "" otherwise.
	Dialect string
	// Responses is the stored state of a Responses API exchange, set once
	// its request was read; nil for other exchanges. Its audit entries say
	// it: llm.request names the response it continues, llm.response
	// whether the response is kept.
	Responses *ResponsesTurn
	Start     time.Time

	// Agent is the identified caller; nil until the identify stage ran.
	Agent *roster.Agent
	// Team is the agent's team, found by the identify stage; nil for an
	// agent in no team. Its limits apply on top of the agent's.
	Team *team.Team
	// Model, Stream and Choices (the request's n; 0 when it set none) come
	// from the decoded request body.
	Model   string
	Stream  bool
	Choices int
	// Body is the request body as read (bounded by the agent's max size) and,
	// after the request stages, as it will be sent upstream.
	Body []byte
	// Messages is how many messages the strict reading of a chat request
	// found (at least one); 0 for other operations.
	Messages int
	// BodyValue is what the strict reading of a chat request built for
	// the chat policy in the same pass (a policy.ChatRequest holding the
	// Body it was read from), when the agent's policy reads the request;
	// nil otherwise. It describes that Body only.
	BodyValue any
	// TokenEstimate is the prompt size estimated before the call.
	TokenEstimate int
	// MaxTokens is the completion bound the request set (max_tokens or
	// max_completion_tokens); 0 when it set none.
	MaxTokens int
	// NoCompletion: the operation produces no completion tokens (embeddings).
	NoCompletion bool
	// Usage is what the upstream reported; UsageKnown says whether it did
	// and the gateway believed it. Set them with Report.
	Usage      Usage
	UsageKnown bool
	// UsageUnreadable is why a usage report of the exchange was not
	// believed (see Usage); its usage is then unknown, even if another
	// report came: the books cannot know which one to believe.
	UsageUnreadable string
	// Price is Model's price (USD per million tokens), looked up by the
	// limits stage; HasPrice says whether the pricing table has one (the
	// exchange's cost is unknown without).
	Price    pricing.Price
	HasPrice bool
	// BudgetReserved is what the agent's dollar budget reserved for the
	// call, in micro-dollars (0 without a budget).
	BudgetReserved int64
	// Upstream is the name of the provider the request was routed to.
	Upstream string
	// Route is that provider, chosen once when the model was checked:
	// every later stage and the forwarder use it, never routing again.
	// A failover moves Upstream and Route to the provider that answered
	// (or that failed last, when none did).
	Route *upstream.Upstream
	// Candidates are every upstream serving Model, in the order they are
	// tried (Route first), chosen with Route; nil: Route only.
	Candidates []*upstream.Upstream
	// Failovers are the upstreams passed over before Upstream, in order,
	// each with why.
	Failovers []Failover
	// UpstreamTime is the time spent waiting for the provider (to the
	// response headers; all attempts for protocol agents).
	UpstreamTime time.Duration
	// Pace times the answer's content on its way to the client (time to
	// first token, gaps between tokens).
	Pace Pace
	// Attempts counts model calls (SACP re-asks, retries).
	Attempts int
	// Redactions counts redacted values by detector (never the values).
	Redactions map[string]int
	// PayloadSHA256 is the hex SHA-256 of the request body exactly as received.
	PayloadSHA256 string
	// Checks records every governance check that ran and its verdict, so the
	// audit entry attests what was checked (and what was not).
	Checks []Verdict
	// onAuth runs when the caller is identified (OnAuthenticated).
	onAuth func()
	// TemplateSHA256 is the hash of the protocol template injected, if any.
	TemplateSHA256 string
	// SACP is the outcome of protocol enforcement; nil for other agents.
	SACP *SACPOutcome
	// Status is the HTTP status of an error the gateway sent, if any.
	Status int
	// ErrCode is the error code sent to the client, if any.
	ErrCode string
	// Err is the internal cause of a failure, for the log.
	Err error
}

// Report records the usage report u of the exchange's call, replacing an
// earlier one (a stream may repeat its running count). An unreadable
// report leaves the usage unknown for good.
func (ex *Exchange) Report(u Usage) {
	switch {
	case ex.UsageUnreadable != "":
	case u.Unreadable != "":
		ex.UsageUnreadable = u.Unreadable
		ex.Usage, ex.UsageKnown = Usage{}, false
	default:
		ex.Usage, ex.UsageKnown = u, true
	}
}

// Pace is when an answer's content was released to the client. The
// gateway measures what the client experiences, not what the provider
// sent: a stream's content passes the checks and the redaction first, and
// a protocol agent's answer waits for its validation.
type Pace struct {
	// First and Last are when the first and the latest content were
	// released; zero until some was.
	First, Last time.Time
	// Gaps, if set, is told each gap between two successive releases of
	// content (a stream's inter-token latency). An interface rather than
	// a func, so that setting it allocates nothing per request.
	Gaps GapObserver
}

// GapObserver receives the gaps between successive releases of an
// exchange's content. It is called on the request's goroutine, before
// the request ends.
type GapObserver interface {
	ContentGap(ex *Exchange, gap time.Duration)
}

// Content records that content of the answer is released to the client at
// t: the first call sets the time to first token, each later one is a gap.
// A whole answer (JSON, or a protocol agent's gathered stream) is released
// once, so it has a first token and no gaps.
func (ex *Exchange) Content(t time.Time) {
	p := &ex.Pace
	if p.First.IsZero() {
		p.First = t
	} else if p.Gaps != nil {
		p.Gaps.ContentGap(ex, t.Sub(p.Last))
	}
	p.Last = t
}

// Failover is an upstream an exchange passed over. Reason is
// "breaker_open" (skipped, its circuit breaker open), "status_429",
// "status_<5xx>", "timeout", "connect_error" or "transport_error".
type Failover struct {
	Upstream string
	Reason   string
}

// SACPOutcome is what the protocol stage decided about an answer.
type SACPOutcome struct {
	Status string
	// StatusFrom is the status as the model wrote it, when the gateway read
	// it as Status (needs_input as clarification_needed).
	StatusFrom string
	Valid      bool
	Attempts   int
	// ToolCalls is set when the answer was a tool call, passed unchanged.
	ToolCalls bool
	// Thought and Message are the (redacted) fields, for the audit trail.
	Thought string
	Message string
	Errors  []string
}

// Redacted adds redaction counts by detector.
func (ex *Exchange) Redacted(counts map[string]int) {
	for k, n := range counts {
		if n == 0 {
			continue
		}
		if ex.Redactions == nil {
			ex.Redactions = map[string]int{}
		}
		ex.Redactions[k] += n
	}
}

// OnAuthenticated registers f to run once, when the request is identified
// (the server uses it to stop counting the connection as unauthenticated
// while a long answer is still streaming).
func (ex *Exchange) OnAuthenticated(f func()) { ex.onAuth = f }

// Authenticated runs the OnAuthenticated hook, once; the identify stage
// calls it when the caller is known.
func (ex *Exchange) Authenticated() {
	if f := ex.onAuth; f != nil {
		ex.onAuth = nil
		f()
	}
}

type key struct{}

// Attach returns r with ex on its context.
func Attach(r *http.Request, ex *Exchange) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), key{}, ex))
}

// Get returns the request's Exchange. Front doors attach one before any stage
// runs; Get panics without one because that is a wiring bug, not bad input.
func Get(ctx context.Context) *Exchange {
	ex, ok := ctx.Value(key{}).(*Exchange)
	if !ok {
		panic("scope: no Exchange on the request context")
	}
	return ex
}

// Lookup returns the request's Exchange, or nil.
func Lookup(ctx context.Context) *Exchange {
	ex, _ := ctx.Value(key{}).(*Exchange)
	return ex
}

// Acting is an in-process caller speaking as an agent: a workflow step. It
// travels as a context value, which only code in this process can set, so
// no request from the network can claim it.
type Acting struct {
	// AgentID is the agent the step calls as (the node's agent).
	AgentID string
	// Self, when set, is an identity of the gateway's own, not an agent of
	// agents.yaml: the registry embedding candidates' profiles calls as it,
	// under its own limits and on the trail by its own name, so that no
	// candidate's permissions decide whether a query is semantic.
	Self *roster.Agent
	// RunID and Node link the exchange's audit entries to the run's step.
	RunID, Node string
}

type actingKey struct{}

// WithActing returns ctx carrying a as the caller of the requests made with it.
func WithActing(ctx context.Context, a Acting) context.Context {
	return context.WithValue(ctx, actingKey{}, a)
}

// ActingOf returns the in-process caller of ctx, if any.
func ActingOf(ctx context.Context) (Acting, bool) {
	a, ok := ctx.Value(actingKey{}).(Acting)
	return a, ok && a.AgentID != ""
}
