package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/scope"
)

// record builds an entry of the request's Exchange.
func record(ex *scope.Exchange, kind, payloadSHA string, summary map[string]any) audit.Record {
	rec := audit.Record{Kind: kind, SessionID: ex.SessionID, RequestID: ex.RequestID, PayloadSHA256: payloadSHA, Summary: summary}
	if ex.Agent != nil {
		rec.AgentID = ex.Agent.ID
	}
	if ex.CorrelationID != "" {
		summary["correlation_id"] = ex.CorrelationID
	}
	return rec
}

func sha256Hex(b []byte) string {
	h := sha256.Sum256(b)
	return hex.EncodeToString(h[:])
}

// requestSummary is the llm.request entry: what was asked and which checks
// passed before the call.
func requestSummary(ex *scope.Exchange, r *http.Request) map[string]any {
	s := map[string]any{
		"route":          r.URL.Path,
		"model":          ex.Model,
		"stream":         ex.Stream,
		"upstream":       ex.Upstream,
		"bytes":          len(ex.Body),
		"token_estimate": ex.TokenEstimate,
		"checks":         checksSummary(ex.Checks),
	}
	if ex.TemplateSHA256 != "" {
		s["template_sha256"] = ex.TemplateSHA256
	}
	return s
}

// responseSummary is the llm.response entry: the outcome, with the SACP
// thought and redacted message, and every check's verdict.
func responseSummary(ex *scope.Exchange, status int) map[string]any {
	s := map[string]any{
		"model":      ex.Model,
		"stream":     ex.Stream,
		"upstream":   ex.Upstream,
		"status":     status,
		"latency_ms": float64(time.Since(ex.Start).Microseconds()) / 1000,
		"attempts":   ex.Attempts,
		"checks":     checksSummary(ex.Checks),
	}
	if ex.UsageKnown {
		s["tokens"] = map[string]any{"prompt": ex.Usage.PromptTokens, "completion": ex.Usage.CompletionTokens, "total": ex.Usage.TotalTokens}
	}
	if ex.ErrCode != "" {
		s["error_code"] = ex.ErrCode
	}
	if len(ex.Redactions) > 0 {
		counts := make(map[string]any, len(ex.Redactions))
		for k, v := range ex.Redactions {
			counts[k] = v
		}
		s["redactions"] = counts
	}
	if o := ex.SACP; o != nil {
		sacp := map[string]any{"status": o.Status, "valid": o.Valid, "attempts": o.Attempts, "tool_calls": o.ToolCalls}
		if len(o.Errors) > 0 {
			sacp["errors"] = o.Errors
		}
		s["sacp"] = sacp
		s["thought"] = o.Thought
		s["message"] = o.Message
	}
	return s
}

// checksSummary renders the exchange's checks for its audit entry. A check
// that did not run says so, so the trail never implies it passed.
func checksSummary(c []scope.Verdict) map[string]any {
	out := make(map[string]any, len(c)+4)
	for _, v := range c {
		out[v.Check] = v.Summary()
	}
	for _, name := range []string{scope.CheckAuth, scope.CheckLimits, scope.CheckRBAC, scope.CheckPolicy, scope.CheckProtocol, scope.CheckRedaction} {
		if _, ok := out[name]; !ok {
			out[name] = map[string]any{"verdict": "not_evaluated"}
		}
	}
	return out
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
func (j *journal) refused(ctx context.Context, kind, payloadSHA string, summary map[string]any) error {
	j.wrote = true
	return j.rec.Write(ctx, record(j.ex, kind, payloadSHA, summary))
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
	return j.rec.Write(context.WithoutCancel(ctx), record(j.ex, audit.KindLLMResponse, sum, responseSummary(j.ex, status)))
}
