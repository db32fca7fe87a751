// Package httpx holds the HTTP pieces every front door shares (the
// OpenAI-compatible pipeline, the approval protocol, agent messaging):
// errors in OpenAI's shape, JSON answers, size-limited body reading and the
// audit recorder that applies the fail mode. The front doors import it and
// none of each other.
package httpx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"strconv"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/scope"
)

// WriteJSON answers v as JSON with status. v is the gateway's own value, so
// an encoding failure is the gateway's bug: a 500 in OpenAI's shape.
func WriteJSON(w http.ResponseWriter, r *http.Request, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		Fail(w, r, fmt.Errorf("encode response: %w", err))
		return
	}
	WriteRawJSON(w, status, append(b, '\n'))
}

// WriteRawJSON answers b, a JSON document the caller has checked or built,
// with status and its length.
func WriteRawJSON(w http.ResponseWriter, status int, b []byte) {
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// Fail writes err in OpenAI's error shape and records it on the Exchange.
func Fail(w http.ResponseWriter, r *http.Request, err error) {
	e := apierror.Write(w, err)
	if ex := scope.Lookup(r.Context()); ex != nil {
		ex.ErrCode = e.Code
		ex.Status = e.Status
		if e.Err != nil {
			ex.Err = e.Err
		}
	}
}

// ReadLimited reads at most limit bytes (an agent's max_request_size); a
// larger body is a 413 without reading the rest (the declared
// Content-Length is refused up front). Every front door that reads an
// agent's body uses it.
func ReadLimited(r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, apierror.TooLarge(limit)
	}
	if r.Body == nil {
		return nil, apierror.BadRequest("", "We could not parse the JSON body of your request: the body is empty.")
	}
	size := 512
	if r.ContentLength > 0 {
		size = int(r.ContentLength)
	}
	buf := bytes.NewBuffer(make([]byte, 0, size+1))
	n, err := buf.ReadFrom(io.LimitReader(r.Body, limit+1))
	if errors.Is(err, os.ErrDeadlineExceeded) {
		// The server's body idle deadline: the client stopped sending.
		return nil, &apierror.Error{Status: http.StatusRequestTimeout, Type: apierror.TypeInvalidRequest, Code: "request_timeout",
			Message: "The request body stopped arriving; send it without pauses."}
	}
	if err != nil {
		return nil, apierror.BadRequest("", "We could not read the body of your request: %v", err)
	}
	if n > limit {
		return nil, apierror.TooLarge(limit)
	}
	return buf.Bytes(), nil
}

// Appender is what the recorder needs of the audit trail (audit.Log).
type Appender = audit.Appender

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
