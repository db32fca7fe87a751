package apierror

import (
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

func TestFailFast(t *testing.T) {
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	cases := []struct {
		note       string
		status     int
		retryAfter string
		want       string // x-should-retry after FailFast
	}{
		{"far reset", http.StatusTooManyRequests, "66", "false"},
		{"just past the bound", http.StatusTooManyRequests, "11", "false"},
		{"at the bound: still retried", http.StatusTooManyRequests, "10", ""},
		{"near reset", http.StatusTooManyRequests, "1", ""},
		{"fractional seconds", http.StatusTooManyRequests, "10.5", "false"},
		{"an HTTP date far away", http.StatusTooManyRequests, now.Add(time.Minute).Format(http.TimeFormat), "false"},
		{"an HTTP date soon", http.StatusTooManyRequests, now.Add(5 * time.Second).Format(http.TimeFormat), ""},
		{"an HTTP date past", http.StatusTooManyRequests, now.Add(-time.Hour).Format(http.TimeFormat), ""},
		{"unreadable", http.StatusTooManyRequests, "soon", ""},
		{"no Retry-After", http.StatusTooManyRequests, "", ""},
		{"a 503 is not a limit", http.StatusServiceUnavailable, "66", ""},
	}
	for _, c := range cases {
		t.Run(c.note, func(t *testing.T) {
			h := http.Header{}
			if c.retryAfter != "" {
				h.Set("Retry-After", c.retryAfter)
			}
			FailFast(h, c.status, now)
			if got := h.Get("X-Should-Retry"); got != c.want {
				t.Errorf("x-should-retry = %q, want %q", got, c.want)
			}
			if h.Get("Retry-After") != c.retryAfter {
				t.Errorf("Retry-After changed to %q", h.Get("Retry-After"))
			}
		})
	}
}

// TestWriteFailsFast: every 429 the gateway writes goes through FailFast.
func TestWriteFailsFast(t *testing.T) {
	cases := []struct {
		retryAfter, want string
	}{
		{"60", "false"},
		{"2", ""},
	}
	for _, c := range cases {
		w := httptest.NewRecorder()
		e := Write(w, RateLimited("Rate limit reached.", http.Header{"Retry-After": {c.retryAfter}}))
		if e.Status != http.StatusTooManyRequests || w.Code != http.StatusTooManyRequests {
			t.Fatalf("status %d", w.Code)
		}
		if got := w.Header().Get("X-Should-Retry"); got != c.want {
			t.Errorf("Retry-After %s: x-should-retry = %q, want %q", c.retryAfter, got, c.want)
		}
		if got := w.Header().Get("Retry-After"); got != c.retryAfter {
			t.Errorf("Retry-After = %q, want %q kept", got, c.retryAfter)
		}
	}
}
