package door

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/config"
)

// Appender is what the recorder needs of the audit trail (audit.Log, or
// the refused-login summarizer in front of it).
type Appender = audit.Appender

// Recorder writes every front door's audit entries and applies the fail
// mode (the app builds one, on the trail behind the refused-login
// summarizer, and hands it to every door):
// closed means an entry that is not durable is a 503 and the answer is
// withheld; open means the request is served and the loss is logged (the
// audit package counts it, and writes an audit.loss entry once the disk
// is back, so the gap is visible in the chain).
type Recorder struct {
	Log        Appender
	FailClosed bool
	Logger     *slog.Logger
}

// Begin marks the start of an exchange whose entries go through r, for the
// trail's commit delay (audit.Log.Begin); call end when it is over.
func (r *Recorder) Begin() (end func()) {
	if r == nil || r.Log == nil {
		return func() {}
	}
	return audit.WriterOf(r.Log).Begin()
}

// Write appends rec and, in closed mode, waits until it is durable. The
// write is detached from the client's context: a client that hangs up must
// not cancel the record of what it did.
func (r *Recorder) Write(ctx context.Context, rec audit.Record) error {
	if r == nil || r.Log == nil {
		return nil
	}
	if !r.FailClosed {
		// Queued without waiting for it, nor for room: a stalled disk
		// loses (and counts) entries rather than holding requests.
		if _, err := audit.WriterOf(r.Log).TrySubmit(rec); err != nil {
			_ = r.failed(rec, err)
		}
		return nil
	}
	return r.append(context.WithoutCancel(ctx), rec)
}

func (r *Recorder) append(ctx context.Context, rec audit.Record) error {
	_, err := r.Log.Append(ctx, rec)
	return r.failed(rec, err)
}

// failed logs an entry that was not written and maps the error: the audit
// trail's own failure is 503 audit_unavailable.
func (r *Recorder) failed(rec audit.Record, err error) error {
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
	ctx = context.WithoutCancel(ctx)
	// Queued from here, without a goroutine per entry: the writer's fsync
	// runs while the caller calls the provider.
	p, err := audit.WriterOf(r.Log).Submit(ctx, rec)
	waited := false
	return func() error {
		if !waited {
			waited = true
			if err == nil {
				_, err = p.Wait(ctx)
			}
			err = r.failed(rec, err)
		}
		return err
	}
}

// NewRecorder is the recorder of gateway.yaml's audit.fail_mode on trail;
// nil without a trail (config check, tests of other stages): a nil
// Recorder writes nothing.
func NewRecorder(trail Appender, a config.Audit, log *slog.Logger) *Recorder {
	if trail == nil {
		return nil
	}
	return &Recorder{Log: trail, FailClosed: a.FailMode == "closed", Logger: log}
}

// Durable appends rec and waits for it in both modes, for the doors whose
// entries are worth an fsync each and must stay in the order of their
// steps (the approval service). In closed mode any failure is a 503
// (apierror.AuditUnavailable) and the caller must not let the step take
// effect; in open mode it is logged and nil is returned. The append is
// detached from the client's context.
func (r *Recorder) Durable(ctx context.Context, rec audit.Record) error {
	if r == nil || r.Log == nil {
		return nil
	}
	_, err := r.Log.Append(context.WithoutCancel(ctx), rec)
	if err == nil {
		return nil
	}
	r.Logger.Error("audit entry not written", "kind", rec.Kind, "request_id", rec.RequestID, "fail_closed", r.FailClosed, "error", err.Error())
	if !r.FailClosed {
		return nil
	}
	return apierror.AuditUnavailable(fmt.Errorf("audit %s: %w", rec.Kind, err))
}
