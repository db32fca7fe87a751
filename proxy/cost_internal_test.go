package proxy

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/pricing"
	"github.com/sacpgw/gateway/internal/scope"
)

// What the provider billed, from what the exchange says once it ended.
func TestBillOf(t *testing.T) {
	viaAPIError := func(err error) error {
		return apierror.Upstream(http.StatusBadGateway, "failed", fmt.Errorf("attempt: %w", err))
	}
	cases := []struct {
		name   string
		ex     scope.Exchange
		status int
		want   bill
	}{
		{"usage reported wins over any status", scope.Exchange{Attempts: 1, UsageKnown: true}, 502, billUsage},
		{"no call made", scope.Exchange{Attempts: 0}, 403, billNone},
		{"no call made, client gone", scope.Exchange{Attempts: 0}, 0, billNone},
		{"provider's 400", scope.Exchange{Attempts: 1}, 400, billNone},
		{"provider's 429", scope.Exchange{Attempts: 1}, 429, billNone},
		{"provider's 4xx replayed into a begun stream", scope.Exchange{Attempts: 1, ErrCode: "upstream_status_400"}, 200, billNone},
		{"provider's 5xx", scope.Exchange{Attempts: 1, Err: viaAPIError(&upstreamStatusError{status: 503})}, 502, billNone},
		{"never connected", scope.Exchange{Attempts: 1, Err: viaAPIError(&net.OpError{Op: "dial", Err: errors.New("refused")})}, 502, billNone},
		{"answered, no usage", scope.Exchange{Attempts: 1}, 200, billUnknown},
		{"answered, usage not believed", scope.Exchange{Attempts: 1, UsageUnreadable: "prompt_tokens is negative"}, 200, billUnknown},
		{"client left (the audit's 499)", scope.Exchange{Attempts: 1, ErrCode: "client_closed_request"}, 499, billUnknown},
		{"client left (nothing written)", scope.Exchange{Attempts: 1}, 0, billUnknown},
		{"answer of unknown shape: it was produced", scope.Exchange{Attempts: 1, Err: viaAPIError(&upstreamStatusError{shape: "odd"})}, 502, billUnknown},
		{"answer too large: it was produced", scope.Exchange{Attempts: 1, Err: viaAPIError(&upstreamStatusError{tooLarge: true})}, 502, billUnknown},
		{"connection lost mid-answer", scope.Exchange{Attempts: 1, Err: viaAPIError(&net.OpError{Op: "read", Err: errors.New("reset")})}, 502, billUnknown},
		{"timed out", scope.Exchange{Attempts: 1, Err: viaAPIError(context.DeadlineExceeded)}, 504, billUnknown},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := billOf(&tc.ex, tc.status); got != tc.want {
				t.Errorf("billOf = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestChargeOf(t *testing.T) {
	price := pricing.Price{Input: 10, Output: 30}
	used := scope.Usage{PromptTokens: 100, CompletionTokens: 10}
	cases := []struct {
		name string
		ex   scope.Exchange
		b    bill
		want charge
	}{
		{"priced usage", scope.Exchange{Price: price, HasPrice: true, Usage: used}, billUsage, charge{microUSD: 1300, priced: true}},
		{"nothing billed costs nothing", scope.Exchange{Price: price, HasPrice: true}, billNone, charge{priced: true}},
		{"no usage: unknown", scope.Exchange{Price: price, HasPrice: true}, billUnknown, charge{reason: "no_usage"}},
		{"no price: unknown", scope.Exchange{Usage: used}, billUsage, charge{reason: "no_price"}},
		{"no price, no usage: unknown", scope.Exchange{}, billUnknown, charge{reason: "no_price"}},
		{"no price, nothing billed: nothing", scope.Exchange{}, billNone, charge{priced: true}},
		{"usage not believed: unknown", scope.Exchange{Price: price, HasPrice: true, UsageUnreadable: "total_tokens is not prompt_tokens + completion_tokens"}, billUnknown, charge{reason: "unreadable_usage"}},
		{"usage not believed, no price: the usage is the finding", scope.Exchange{UsageUnreadable: "prompt_tokens is negative"}, billUnknown, charge{reason: "unreadable_usage"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := chargeOf(&tc.ex, tc.b); got != tc.want {
				t.Errorf("chargeOf = %+v, want %+v", got, tc.want)
			}
		})
	}
}

// The status writer keeps the answer's status and lets flushes through.
func TestStatusWriter(t *testing.T) {
	cases := []struct {
		name  string
		write func(w http.ResponseWriter)
		want  int
	}{
		{"explicit", func(w http.ResponseWriter) { w.WriteHeader(400); w.WriteHeader(500) }, 400},
		{"implicit by Write", func(w http.ResponseWriter) { _, _ = w.Write([]byte("x")) }, 200},
		{"interim status skipped", func(w http.ResponseWriter) { w.WriteHeader(103); w.WriteHeader(404) }, 404},
		{"nothing written", func(http.ResponseWriter) {}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			sw := &statusWriter{ResponseWriter: rec}
			tc.write(sw)
			if err := http.NewResponseController(sw).Flush(); err != nil {
				t.Errorf("flush through the writer: %v", err)
			}
			if sw.status != tc.want {
				t.Errorf("status %d, want %d", sw.status, tc.want)
			}
		})
	}
}
