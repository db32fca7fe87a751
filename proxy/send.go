package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/sacpgw/gateway/audit"
	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/internal/tracing"
	"github.com/sacpgw/gateway/upstream"
)

// send is the gateway's one way to a provider: body goes to the exchange's
// upstreams (chosen once, when the model was checked) with only the
// forwarded headers and the provider's key, and the answer comes back with
// only the answer headers. A provider's 5xx is an upstreamStatusError; the
// caller owns resp.Body.
//
// The candidates are tried in order, the route first, while no byte of an
// answer has reached the client: send returns before the body is copied,
// so an upstream that fails before its response headers (connect error,
// timeout, 429, 5xx, after its transport's own retries) is passed over for
// the next, with the same body bytes; a candidate whose circuit breaker is
// open is skipped. A 4xx other than 429 is the provider's answer to this
// request, which another provider would give too: it is passed on. When
// every candidate fails, the last failure is the answer, mapped as for one
// upstream (a 429 passed on, a 5xx or a transport error a 502, the
// gateway's own timeout a 504). ex.Route and ex.Upstream end on the
// upstream that answered, or failed last; ex.Failovers lists the others.
func send(ctx context.Context, in http.Header, ex *scope.Exchange, path string, body []byte) (*http.Response, error) {
	var (
		last    *attempt
		skipped []*upstream.Upstream // open breakers, recorded once another upstream is tried
		passed  int                  // upstreams passed over by this send
	)
	// skip records the skipped upstreams but up as passed over.
	skip := func(up *upstream.Upstream) {
		for _, s := range skipped {
			if s != up {
				ex.Failovers = append(ex.Failovers, scope.Failover{Upstream: s.Name, Reason: "breaker_open"})
				passed++
			}
		}
		skipped = skipped[:0]
	}
	run := func(up *upstream.Upstream, permit upstream.Permit) *http.Response {
		// What failed before is passed over only now that another
		// upstream is tried: the last failure is the answer.
		if last != nil {
			last.passOver(ex)
			passed++
			last = nil
		}
		skip(up)
		a := try(ctx, in, ex, path, body, up)
		if a.reason == "" {
			permit.Done(upstream.Answered)
			ex.Route, ex.Upstream = up, up.Name
			return a.resp
		}
		permit.Done(a.result(ctx))
		last = a
		return nil
	}
	for _, up := range attemptOrder(ex) {
		permit, ok := up.Admit()
		if !ok {
			skipped = append(skipped, up)
			continue
		}
		if resp := run(up, permit); resp != nil {
			return resp, nil
		}
		if ctx.Err() != nil {
			// The client left, or the gateway's deadline passed: no
			// other upstream can be asked either.
			break
		}
	}
	if last == nil && len(skipped) > 0 {
		// Every candidate's breaker is open: try the one whose cooldown
		// ends first rather than refuse, as that upstream would be asked
		// soonest anyway (and one upstream is asked as without breakers).
		up := slices.MinFunc(skipped, func(a, b *upstream.Upstream) int { return a.Reopens().Compare(b.Reopens()) })
		if resp := run(up, up.Force()); resp != nil {
			return resp, nil
		}
	}
	skip(nil) // open breakers after the last failure: the entry lists them too
	ex.Route, ex.Upstream = last.up, last.up.Name
	switch {
	case last.resp != nil:
		return last.resp, nil // a 429: passed on as the provider sent it
	case passed > 0 && ctx.Err() == nil:
		return nil, exhausted(last, passed)
	}
	return nil, last.err
}

// attemptOrder is the exchange's candidates with its route first: after a
// failover the route is the upstream that answered, and a re-ask goes there
// first, without repeating the failures of the call before.
func attemptOrder(ex *scope.Exchange) []*upstream.Upstream {
	if len(ex.Candidates) == 0 {
		return []*upstream.Upstream{ex.Route}
	}
	if ex.Candidates[0] == ex.Route {
		return ex.Candidates
	}
	order := make([]*upstream.Upstream, 0, len(ex.Candidates))
	order = append(order, ex.Route)
	for _, u := range ex.Candidates {
		if u != ex.Route {
			order = append(order, u)
		}
	}
	return order
}

// attempt is one upstream's part of a send; reason is empty for an answer.
type attempt struct {
	up     *upstream.Upstream
	resp   *http.Response // an answer, or a 429
	err    error
	reason string
	// transport: no response came (err is the transport's, not a status).
	transport bool
}

// try sends body to up once (its transport retrying as configured).
func try(ctx context.Context, in http.Header, ex *scope.Exchange, path string, body []byte, up *upstream.Upstream) *attempt {
	// Built directly rather than by NewRequestWithContext, which would
	// format the target URL to a string only to parse it again.
	target := up.Target(path, ex.Model)
	req := (&http.Request{
		Method: http.MethodPost, URL: target, Host: target.Host,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header:        outboundHeader(ctx, in, ex, up),
		Body:          io.NopCloser(bytes.NewReader(body)),
		GetBody:       func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil },
		ContentLength: int64(len(body)),
	}).WithContext(ctx)
	if len(body) == 0 {
		req.Body, req.GetBody = http.NoBody, nil
	}
	a := &attempt{up: up}
	resp, err := roundTrip(ctx, req, up)
	if err != nil {
		a.err, a.reason, a.transport = err, transportReason(err), true
		if errors.Is(err, errFirstByte) {
			a.reason = "first_byte_timeout"
		}
		return a
	}
	for k := range resp.Header {
		if !answerHeaders[k] {
			delete(resp.Header, k)
		}
	}
	switch {
	case resp.StatusCode == http.StatusTooManyRequests:
		a.resp, a.reason = resp, "status_429"
	case resp.StatusCode >= 500:
		resp.Body.Close()
		a.err, a.reason = &upstreamStatusError{status: resp.StatusCode}, "status_"+strconv.Itoa(resp.StatusCode)
	default:
		a.resp = resp
	}
	return a
}

// errFirstByte is the cause of an attempt given up after the upstream's
// first_byte_timeout: the next upstream is asked.
var errFirstByte = errors.New("no response headers within the upstream's first_byte_timeout")

// roundTrip sends req to up. With up.FirstByte, the attempt is given up
// when no response headers came in time; the timer stops once they come,
// and the answer's body keeps its own context until it is closed, so a
// long stream is never cut by it.
func roundTrip(ctx context.Context, req *http.Request, up *upstream.Upstream) (*http.Response, error) {
	if up.FirstByte <= 0 {
		return up.Transport.RoundTrip(req)
	}
	actx, cancel := context.WithCancelCause(ctx)
	timer := time.AfterFunc(up.FirstByte, func() { cancel(errFirstByte) })
	resp, err := up.Transport.RoundTrip(req.WithContext(actx))
	if !timer.Stop() {
		// The timer fired: whatever came, it came too late to be read.
		if err == nil {
			resp.Body.Close()
		}
		cancel(errFirstByte)
		return nil, fmt.Errorf("upstream %s: %w", up.Name, errFirstByte)
	}
	if err != nil {
		cancel(nil)
		return nil, err
	}
	resp.Body = &cancelOnClose{ReadCloser: resp.Body, cancel: cancel}
	return resp, nil
}

// cancelOnClose releases an attempt's context when its body is closed.
type cancelOnClose struct {
	io.ReadCloser
	cancel context.CancelCauseFunc
}

func (c *cancelOnClose) Close() error {
	err := c.ReadCloser.Close()
	c.cancel(nil)
	return err
}

// result is the failed attempt's outcome for the upstream's breaker: a
// transport error after the client left says nothing about the upstream,
// one after the gateway's deadline is a timeout.
func (a *attempt) result(ctx context.Context) upstream.Result {
	if a.transport && ctx.Err() != nil {
		if cause := context.Cause(ctx); !errors.Is(cause, errTimeout) && !errors.Is(cause, context.DeadlineExceeded) {
			return upstream.Abandoned
		}
		a.reason = "timeout"
	}
	return upstream.Failed
}

// passOver records the failed attempt as a failover: its 429 answer is
// dropped (drained a little, so the connection can be reused), counted,
// and listed on the exchange.
func (a *attempt) passOver(ex *scope.Exchange) {
	if a.resp != nil {
		_, _ = io.CopyN(io.Discard, a.resp.Body, 4<<10)
		a.resp.Body.Close()
	}
	a.up.FailedOver()
	ex.Failovers = append(ex.Failovers, scope.Failover{Upstream: a.up.Name, Reason: a.reason})
}

// transportReason classifies a transport error for the audit trail.
func transportReason(err error) string {
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return "connect_error"
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return "timeout"
	}
	return "transport_error"
}

// exhausted is the error of a send whose every candidate failed or was
// skipped: a 502 that names the upstream that failed last, whatever the
// caller took the route to be.
func exhausted(last *attempt, passed int) error {
	detail := describe(last.err)
	var se *upstreamStatusError
	if errors.As(last.err, &se) {
		detail = se.Error()
	}
	return apierror.Upstream(http.StatusBadGateway,
		fmt.Sprintf("Upstream %s failed: %s; the %d other upstream(s) of the model failed or were unavailable.", last.up.Name, detail, passed), last.err)
}

// forwardedHeaders are the only request headers that reach a provider: the
// agent's credentials, cookies and client fingerprints stay here.
var forwardedHeaders = []string{"Content-Type", "Accept", "X-Request-Id", "X-Session-Id", "X-Correlation-Id", "Traceparent", "Tracestate", "Openai-Beta"}

// outboundHeader builds the headers of a request to a provider. With
// tracing on, the traceparent names the gateway's span as the parent.
func outboundHeader(ctx context.Context, in http.Header, ex *scope.Exchange, up *upstream.Upstream) http.Header {
	h := make(http.Header, len(forwardedHeaders)+2)
	for _, k := range forwardedHeaders {
		if v := in[k]; len(v) > 0 {
			h[k] = v
		}
	}
	if ex.RequestID != "" {
		h.Set("X-Request-Id", ex.RequestID)
	}
	h.Set("Content-Type", "application/json")
	tracing.Inject(ctx, h)
	up.Authorize(h)
	return h
}

// answerHeaders are the only response headers passed back from a provider;
// its rate-limit, organisation and tracing headers describe the gateway's
// account, not the agent's.
// Retry-After stays, for a 429 passed on (the agent should wait as long).
var answerHeaders = map[string]bool{"Content-Type": true, "Content-Length": true, "Retry-After": true}

// upstreamError maps a failed call to 504 (our deadline) or 502. The
// message names the provider and the innermost cause, never its answer.
func upstreamError(ctx context.Context, name string, timeout time.Duration, err error) error {
	var ae *apierror.Error
	if errors.As(err, &ae) {
		return ae // the gateway's own refusal (an audit failure: 503)
	}
	if errors.Is(context.Cause(ctx), errTimeout) {
		return apierror.Upstream(http.StatusGatewayTimeout, fmt.Sprintf("Upstream %s did not answer within %s.", name, timeout), err)
	}
	var se *upstreamStatusError
	if errors.As(err, &se) {
		return apierror.Upstream(http.StatusBadGateway, fmt.Sprintf("Upstream %s failed: %s.", name, se.Error()), err)
	}
	return apierror.Upstream(http.StatusBadGateway, fmt.Sprintf("Upstream %s failed: %s.", name, describe(err)), err)
}

// failoversSummary writes an exchange's failovers into its audit entry, as
// two lists of the same length, in order: "failovers", the upstreams passed
// over before "upstream", and "failover_reasons", why each was (see
// scope.Failover). Two flat lists rather than objects: the entry's
// summary holds no list of objects, and a name may hold any character.
// Nothing is written when there was none.
func failoversSummary(s *audit.Object, fs []scope.Failover) {
	if len(fs) == 0 {
		return
	}
	names, reasons := make([]string, len(fs)), make([]string, len(fs))
	for i, f := range fs {
		names[i], reasons[i] = f.Upstream, f.Reason
	}
	s.Strs("failovers", names)
	s.Strs("failover_reasons", reasons)
}
