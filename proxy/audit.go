package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/scope"
)

// record builds an entry of the request's Exchange with a summary built
// member by member (the entries written on every request); the journal
// stamps it with the exchange's identity.
func record(ex *scope.Exchange, kind, payloadSHA string, summary *audit.Object) audit.Record {
	if t := ex.Responses; t != nil && t.PreviousResponseID != "" && kind == audit.KindLLMRequest {
		summary.Str("previous_response_id", clipID(t.PreviousResponseID))
	}
	return audit.Record{Kind: kind, PayloadSHA256: payloadSHA, Object: summary}
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
	callSummary(s, ex)
	s.Int("bytes", int64(len(ex.Body)))
	s.Int("token_estimate", int64(ex.TokenEstimate))
	door.ChecksSummary(s, ex.Checks)
	if ex.TemplateSHA256 != "" {
		s.Str("template_sha256", ex.TemplateSHA256)
	}
	return s
}

// callSummary writes the members both entries of an exchange share: the
// model, the dialect it was asked in, whether it streams, and where it went.
func callSummary(s *audit.Object, ex *scope.Exchange) {
	s.Str("model", ex.Model)
	if ex.Dialect != "" {
		s.Str("dialect", ex.Dialect)
	}
	s.Bool("stream", ex.Stream)
	s.Str("upstream", ex.Upstream)
	failoversSummary(s, ex.Failovers)
}

// responseSummary is the llm.response entry: the outcome, with the SACP
// thought and redacted message, and every check's verdict.
func responseSummary(ex *scope.Exchange, status int) *audit.Object {
	s := &audit.Object{}
	callSummary(s, ex)
	s.Int("status", int64(status))
	s.Num("latency_ms", float64(time.Since(ex.Start).Microseconds())/1000)
	s.Int("attempts", int64(ex.Attempts))
	door.ChecksSummary(s, ex.Checks)
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

// journal is the exchange's door.Journal with the OpenAI door's entries:
// llm.request before the call and exactly one llm.response, however the
// exchange ends. The chain's outermost stage opens it (journalStage).
type journal struct {
	*door.Journal
	ex *scope.Exchange
}

// journalOf returns the journal the chain opened for r.
func journalOf(r *http.Request, rec *door.Recorder) journal {
	return journal{Journal: door.JournalOf(r, rec), ex: scope.Get(r.Context())}
}

// begin starts the llm.request entry.
func (j journal) begin(ctx context.Context, r *http.Request) {
	j.Begin(ctx, record(j.ex, audit.KindLLMRequest, j.ex.PayloadSHA256, requestSummary(j.ex, r)))
}

// requested returns once the llm.request entry is durable (or failed).
func (j journal) requested() error { return j.Requested() }

// abandoned records an exchange whose client left: nobody to answer, the
// response entry says 499.
func (j journal) abandoned(ctx context.Context, err error) {
	j.ex.ErrCode, j.ex.Err = "client_closed_request", err
	_ = j.respond(ctx, 499, "")
}

// respond writes the llm.response entry once; later calls do nothing.
// sum is the SHA-256 of what the client received ("" when nothing was).
// The write outlives the client's context.
func (j journal) respond(ctx context.Context, status int, sum string) error {
	return j.Respond(ctx, func() audit.Record {
		rec := record(j.ex, audit.KindLLMResponse, sum, responseSummary(j.ex, status))
		if t := j.ex.Responses; t != nil {
			// The entry is written before the answer leaves (fail_mode
			// closed), so it says what the gateway does with a response that
			// reached the client whole: keeps it unless the request said
			// store: false. What fails after (over max_stored_size, the state
			// backend) is logged with the request id and counted.
			rec.Object.Bool("stored", t.Store && j.ex.ErrCode == "" && status == http.StatusOK)
		}
		return rec
	})
}
