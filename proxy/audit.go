package proxy

import (
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"time"

	"github.com/sacpgw/gateway/audit"
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
