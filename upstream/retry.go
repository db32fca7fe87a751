package upstream

import (
	"context"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"
)

// retrying retries connection failures and 5xx answers with exponential
// backoff and jitter. It sits below the reverse proxy, so every retry
// happens before a single byte of the answer reached the client; once
// RoundTrip returns, the answer is committed.
type retrying struct {
	next    http.RoundTripper
	max     int
	backoff time.Duration
	name    string
	log     *slog.Logger
}

func (t *retrying) RoundTrip(req *http.Request) (*http.Response, error) {
	// Only a request whose body can be replayed is retried.
	replayable := req.Body == nil || req.Body == http.NoBody || req.GetBody != nil
	for attempt := 0; ; attempt++ {
		resp, err := t.next.RoundTrip(req)
		if !replayable || attempt >= t.max || !t.retryable(req.Context(), resp, err) {
			return resp, err
		}
		if resp != nil {
			// Drain a little so the connection can be reused.
			_, _ = io.CopyN(io.Discard, resp.Body, 4<<10)
			resp.Body.Close()
		}
		wait := t.backoff << attempt
		wait += time.Duration(rand.Int64N(int64(wait)/2 + 1))
		if t.log != nil {
			status := 0
			if resp != nil {
				status = resp.StatusCode
			}
			t.log.Warn("upstream retry", "upstream", t.name, "attempt", attempt+1, "status", status, "error", errString(err), "backoff_ms", wait.Milliseconds())
		}
		timer := time.NewTimer(wait)
		select {
		case <-req.Context().Done():
			timer.Stop()
			return nil, context.Cause(req.Context())
		case <-timer.C:
		}
		next := req.Clone(req.Context())
		if req.GetBody != nil {
			b, err := req.GetBody()
			if err != nil {
				return nil, err
			}
			next.Body = b
		}
		req = next
	}
}

func (t *retrying) retryable(ctx context.Context, resp *http.Response, err error) bool {
	if ctx.Err() != nil {
		return false // client gone or our deadline: retrying cannot help
	}
	if err != nil {
		return true
	}
	switch resp.StatusCode {
	case http.StatusInternalServerError, http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
		return true
	}
	return false
}

// CloseIdleConnections lets Set.Close reach the pooled transport.
func (t *retrying) CloseIdleConnections() {
	if c, ok := t.next.(interface{ CloseIdleConnections() }); ok {
		c.CloseIdleConnections()
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
