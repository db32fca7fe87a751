package httpx

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/scope"
)

// Every front door answers errors in OpenAI's shape and records the code
// on the Exchange for the access log and the audit entry.
func TestFailWritesOpenAIShapeAndRecordsIt(t *testing.T) {
	ex := &scope.Exchange{}
	r := scope.Attach(httptest.NewRequest(http.MethodPost, "/v1/x", nil), ex)
	w := httptest.NewRecorder()
	Fail(w, r, apierror.Forbidden("Denied by policy: no."))
	var body struct {
		Error struct {
			Message, Type, Code string
		} `json:"error"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &body); err != nil {
		t.Fatalf("body %q: %v", w.Body, err)
	}
	if w.Code != http.StatusForbidden || body.Error.Message != "Denied by policy: no." || body.Error.Code == "" || ex.Status != http.StatusForbidden || ex.ErrCode != body.Error.Code {
		t.Fatalf("status %d body %+v exchange %d %q", w.Code, body, ex.Status, ex.ErrCode)
	}
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		t.Errorf("Content-Type %q", ct)
	}
}

// countingReader counts what was read of a body.
type countingReader struct {
	r io.Reader
	n int
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

func TestReadLimited(t *testing.T) {
	tests := []struct {
		name          string
		body          string
		contentLength int64 // -1: unknown (chunked)
		limit         int64
		status        int // 0: read
		maxRead       int
	}{
		{"within the limit", `{"a":1}`, 7, 10, 0, 7},
		{"exactly the limit", `0123456789`, 10, 10, 0, 10},
		{"declared too large: nothing read", strings.Repeat("x", 100), 100, 10, http.StatusRequestEntityTooLarge, 0},
		{"chunked, too large: stops after limit+1", strings.Repeat("x", 100000), -1, 10, http.StatusRequestEntityTooLarge, 11},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cr := &countingReader{r: strings.NewReader(tc.body)}
			r := httptest.NewRequest(http.MethodPost, "/", cr)
			r.ContentLength = tc.contentLength
			got, err := ReadLimited(r, tc.limit)
			if tc.status == 0 {
				if err != nil || string(got) != tc.body {
					t.Fatalf("got %q, %v", got, err)
				}
			} else {
				var ae *apierror.Error
				if !errors.As(err, &ae) || ae.Status != tc.status {
					t.Fatalf("err %v, want status %d", err, tc.status)
				}
			}
			if cr.n > tc.maxRead {
				t.Errorf("read %d bytes, at most %d wanted", cr.n, tc.maxRead)
			}
		})
	}
}

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
