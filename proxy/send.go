package proxy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/internal/tracing"
	"github.com/sacpgw/gateway/upstream"
)

// send is the gateway's one way to a provider: body goes to the exchange's
// route (chosen once, when the model was checked) with only the forwarded
// headers and the provider's key, and the answer comes back with only the
// answer headers. A provider's 5xx is an upstreamStatusError; the caller
// owns resp.Body.
func send(ctx context.Context, in http.Header, ex *scope.Exchange, path string, body []byte) (*http.Response, error) {
	up := ex.Route
	// Built directly rather than by NewRequestWithContext, which would
	// format the target URL to a string only to parse it again.
	target := up.Target(path)
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
	resp, err := up.Transport.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	for k := range resp.Header {
		if !answerHeaders[k] {
			delete(resp.Header, k)
		}
	}
	if resp.StatusCode >= 500 {
		resp.Body.Close()
		return nil, &upstreamStatusError{status: resp.StatusCode}
	}
	return resp, nil
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
var answerHeaders = map[string]bool{"Content-Type": true, "Content-Length": true}

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
