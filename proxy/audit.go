package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"slices"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/scope"
)

// record builds an entry of the request's Exchange with a summary built
// member by member (the entries written on every request).
func record(ex *scope.Exchange, kind, payloadSHA string, summary *audit.Object) audit.Record {
	return stamp(ex, audit.Record{Kind: kind, PayloadSHA256: payloadSHA, Object: summary})
}

// stamp puts the exchange's identity on rec: agent, session, request and
// correlation ids.
func stamp(ex *scope.Exchange, rec audit.Record) audit.Record {
	rec.SessionID, rec.RequestID = ex.SessionID, ex.RequestID
	if ex.Agent != nil {
		rec.AgentID = ex.Agent.ID
	}
	if ex.CorrelationID != "" {
		rec = withSummary(rec, "correlation_id", ex.CorrelationID)
	}
	if ex.RunID != "" {
		rec = withSummary(withSummary(rec, "run_id", ex.RunID), "node", ex.Node)
	}
	if t := ex.Responses; t != nil && t.PreviousResponseID != "" && rec.Kind == audit.KindLLMRequest {
		rec = withSummary(rec, "previous_response_id", clipID(t.PreviousResponseID))
	}
	return rec
}

// withSummary adds a string member to rec's summary, whichever form it has.
func withSummary(rec audit.Record, name, value string) audit.Record {
	switch {
	case rec.Object != nil:
		rec.Object.Str(name, value)
	case rec.Summary != nil:
		rec.Summary[name] = value
	default:
		rec.Summary = map[string]any{name: value}
	}
	return rec
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// requestSummary is the llm.request entry: what was asked and which checks
// passed before the call.
func requestSummary(ex *scope.Exchange, r *http.Request) *audit.Object {
	s := &audit.Object{}
	s.Str("route", r.URL.Path)
	s.Str("model", ex.Model)
	if ex.Dialect != "" {
		s.Str("dialect", ex.Dialect)
	}
	s.Bool("stream", ex.Stream)
	s.Str("upstream", ex.Upstream)
	failoversSummary(s, ex.Failovers)
	s.Int("bytes", int64(len(ex.Body)))
	s.Int("token_estimate", int64(ex.TokenEstimate))
	checksSummary(s, ex.Checks)
	if ex.TemplateSHA256 != "" {
		s.Str("template_sha256", ex.TemplateSHA256)
	}
	return s
}

// responseSummary is the llm.response entry: the outcome, with the SACP
// thought and redacted message, and every check's verdict.
func responseSummary(ex *scope.Exchange, status int) *audit.Object {
	s := &audit.Object{}
	s.Str("model", ex.Model)
	if ex.Dialect != "" {
		s.Str("dialect", ex.Dialect)
	}
	s.Bool("stream", ex.Stream)
	s.Str("upstream", ex.Upstream)
	failoversSummary(s, ex.Failovers)
	s.Int("status", int64(status))
	s.Num("latency_ms", float64(time.Since(ex.Start).Microseconds())/1000)
	s.Int("attempts", int64(ex.Attempts))
	checksSummary(s, ex.Checks)
	if ex.UsageKnown {
		s.Begin("tokens")
		s.Int("prompt", int64(ex.Usage.PromptTokens))
		s.Int("completion", int64(ex.Usage.CompletionTokens))
		s.Int("total", int64(ex.Usage.TotalTokens))
		s.End()
	}
	costSummary(s, ex, status)
	if ex.ErrCode != "" {
		s.Str("error_code", ex.ErrCode)
	}
	if len(ex.Redactions) > 0 {
		s.Begin("redactions")
		for k, v := range ex.Redactions {
			s.Int(k, int64(v))
		}
		s.End()
	}
	if o := ex.SACP; o != nil {
		s.Begin("sacp")
		s.Str("status", o.Status)
		if o.StatusFrom != "" {
			s.Str("status_from", o.StatusFrom)
		}
		s.Bool("valid", o.Valid)
		s.Int("attempts", int64(o.Attempts))
		s.Bool("tool_calls", o.ToolCalls)
		if len(o.Errors) > 0 {
			s.Strs("errors", o.Errors)
		}
		s.End()
		s.Str("thought", o.Thought)
		s.Str("message", o.Message)
	}
	return s
}

// checkNames are the checks every entry accounts for: one that did not run
// says so, so the trail never implies it passed.
var checkNames = [...]string{scope.CheckAuth, scope.CheckLimits, scope.CheckRBAC, scope.CheckPolicy, scope.CheckProtocol, scope.CheckRedaction}

// checksSummary writes the exchange's checks as the entry's "checks".
func checksSummary(s *audit.Object, c []scope.Verdict) {
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

// journal is where one exchange's audit entries are written, through one
// recorder: a refusal (auth.failure, ratelimit.reject, or the llm.request of
// a request refused before the call), or the llm.request entry before the
// call (started in the background so that its fsync overlaps the
// provider's time; no answer leaves before it is durable in closed mode)
// and exactly one llm.response entry, however the exchange ends. The
// chain's outermost stage opens it and closes it (journalStage).
type journal struct {
	rec         *httpx.Recorder
	ex          *scope.Exchange
	waitRequest func() error
	// wrote is set once an entry of the exchange was written (or tried).
	wrote     bool
	responded bool
}

type journalKey struct{}

// journalOf returns the journal the chain opened for r, or a new one for a
// front door that runs a stage without the chain (identify behind the
// approval and messaging routes).
func journalOf(r *http.Request, rec *httpx.Recorder) *journal {
	if j, ok := r.Context().Value(journalKey{}).(*journal); ok {
		return j
	}
	return &journal{rec: rec, ex: scope.Get(r.Context())}
}

// refused writes the entry of a refusal before any call (auth.failure,
// ratelimit.reject); its error is the recorder's (closed mode: 503).
func (j *journal) refused(ctx context.Context, rec audit.Record) error {
	j.wrote = true
	return j.rec.Write(ctx, stamp(j.ex, rec))
}

// begin starts the llm.request entry.
func (j *journal) begin(ctx context.Context, r *http.Request) {
	j.wrote = true
	j.waitRequest = j.rec.Start(ctx, record(j.ex, audit.KindLLMRequest, j.ex.PayloadSHA256, requestSummary(j.ex, r)))
}

// requested returns once the llm.request entry is durable (or failed).
func (j *journal) requested() error {
	if j.waitRequest == nil {
		return nil
	}
	return j.waitRequest()
}

// abandoned records an exchange whose client left: nobody to answer, the
// response entry says 499.
func (j *journal) abandoned(ctx context.Context, err error) {
	j.ex.ErrCode, j.ex.Err = "client_closed_request", err
	_ = j.respond(ctx, 499, "")
}

// respond writes the llm.response entry once; later calls do nothing.
// sum is the SHA-256 of what the client received ("" when nothing was).
// The write outlives the client's context.
func (j *journal) respond(ctx context.Context, status int, sum string) error {
	if j.responded {
		return nil
	}
	j.responded = true
	rec := record(j.ex, audit.KindLLMResponse, sum, responseSummary(j.ex, status))
	if t := j.ex.Responses; t != nil {
		// The entry is written before the answer leaves (fail_mode
		// closed), so it says what the gateway does with a response that
		// reached the client whole: keeps it unless the request said
		// store: false. What fails after (over max_stored_size, the state
		// backend) is logged with the request id and counted.
		rec.Object.Bool("stored", t.Store && j.ex.ErrCode == "" && status == http.StatusOK)
	}
	return j.rec.Write(context.WithoutCancel(ctx), rec)
}
