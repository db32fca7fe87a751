package door

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"testing"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/apierror"
)

type appenderFunc func(ctx context.Context, r audit.Record) (audit.Entry, error)

func (f appenderFunc) Append(ctx context.Context, r audit.Record) (audit.Entry, error) {
	return f(ctx, r)
}

// fail_mode closed: an entry that is not durable stops the answer with a
// 503; open: the request is served and the loss logged. Either way the
// write outlives the client's context.
func TestRecorderFailMode(t *testing.T) {
	down := appenderFunc(func(ctx context.Context, r audit.Record) (audit.Entry, error) {
		if ctx.Err() != nil {
			return audit.Entry{}, errors.New("the client's cancellation reached the audit write")
		}
		return audit.Entry{}, audit.ErrUnavailable
	})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	closed := &Recorder{Log: down, FailClosed: true, Logger: slog.New(slog.DiscardHandler)}
	err := closed.Write(ctx, audit.Record{Kind: "llm.request"})
	var ae *apierror.Error
	if !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable {
		t.Fatalf("closed: %v, want a 503", err)
	}
	if err := closed.Start(ctx, audit.Record{Kind: "llm.request"})(); !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable {
		t.Fatalf("closed, started: %v, want a 503", err)
	}
	open := &Recorder{Log: down, Logger: slog.New(slog.DiscardHandler)}
	if err := open.Write(ctx, audit.Record{Kind: "llm.request"}); err != nil {
		t.Fatalf("open: %v", err)
	}
	var none *Recorder
	if err := none.Write(ctx, audit.Record{}); err != nil {
		t.Fatalf("no recorder: %v", err)
	}
}

// Start on the real trail queues the entry without a goroutine of its own
// (audit.Log is an audit.Writer): the wait returns once it is durable, and a
// trail that can no longer write is a 503 even when the client has gone.
func TestRecorderStartOnTheTrail(t *testing.T) {
	dir := t.TempDir()
	l, err := audit.Open(audit.Config{Dir: dir, Chain: "gw-test", Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	var _ audit.Writer = l
	rec := &Recorder{Log: l, FailClosed: true, Logger: slog.New(slog.DiscardHandler)}
	ctx, cancel := context.WithCancel(context.Background())
	wait := rec.Start(ctx, audit.Record{Kind: "llm.request", RequestID: "req-1"})
	cancel() // the client leaves while the entry is written
	if err := wait(); err != nil {
		t.Fatalf("wait: %v", err)
	}
	if err := wait(); err != nil {
		t.Fatalf("second wait: %v", err)
	}
	if st := l.Stats(); st.Entries != 1 || st.Fsyncs != 1 {
		t.Fatalf("stats %+v: want the one entry durable", st)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	var ae *apierror.Error
	if err := rec.Start(context.Background(), audit.Record{Kind: "llm.request"})(); !errors.As(err, &ae) || ae.Status != http.StatusServiceUnavailable {
		t.Fatalf("closed trail: %v, want a 503", err)
	}
}
