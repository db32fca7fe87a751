package proxy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/sacpgw/gateway/apierror"
	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/scope"
)

// Appender is what the recorder needs of the audit trail (audit.Log).
type Appender interface {
	Append(ctx context.Context, r audit.Record) (audit.Entry, error)
}

// Recorder writes the proxy's audit entries and applies the fail mode:
// closed means an entry that is not durable is a 503 and the answer is
// withheld; open means the request is served and the loss is logged (the
// audit package counts it, and writes an audit.loss entry once the disk
// is back, so the gap is visible in the chain).
type Recorder struct {
	Log        Appender
	FailClosed bool
	Logger     *slog.Logger
}

// Write appends rec and, in closed mode, waits until it is durable. The
// write is detached from the client's context: a client that hangs up must
// not cancel the record of what it did.
func (r *Recorder) Write(ctx context.Context, rec audit.Record) error {
	if r == nil || r.Log == nil {
		return nil
	}
	if !r.FailClosed {
		go r.append(context.WithoutCancel(ctx), rec)
		return nil
	}
	return r.append(context.WithoutCancel(ctx), rec)
}

func (r *Recorder) append(ctx context.Context, rec audit.Record) error {
	_, err := r.Log.Append(ctx, rec)
	if err == nil {
		return nil
	}
	r.Logger.Error("audit entry not written", "kind", rec.Kind, "request_id", rec.RequestID, "fail_closed", r.FailClosed, "error", err.Error())
	if errors.Is(err, audit.ErrUnavailable) {
		return apierror.AuditUnavailable(err)
	}
	return fmt.Errorf("audit %s: %w", rec.Kind, err)
}

// Start writes rec in the background and returns a wait function, so the
// fsync overlaps the upstream call; the answer is released only after wait
// returns nil.
func (r *Recorder) Start(ctx context.Context, rec audit.Record) (wait func() error) {
	if r == nil || r.Log == nil {
		return func() error { return nil }
	}
	if !r.FailClosed {
		_ = r.Write(ctx, rec)
		return func() error { return nil }
	}
	done := make(chan error, 1)
	go func() { done <- r.append(context.WithoutCancel(ctx), rec) }()
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() { err = <-done })
		return err
	}
}

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
		"checks":         cloneChecks(ex.Checks),
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
		"checks":     cloneChecks(ex.Checks),
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

func cloneChecks(c map[string]any) map[string]any {
	out := make(map[string]any, len(c)+4)
	for k, v := range c {
		out[k] = v
	}
	// A check that did not run says so, so the trail never implies it passed.
	for _, name := range []string{"auth", "limits", "rbac", "policy", "protocol", "redaction"} {
		if _, ok := out[name]; !ok {
			out[name] = map[string]any{"verdict": "not_evaluated"}
		}
	}
	return out
}
