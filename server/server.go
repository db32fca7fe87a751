// Package server is the HTTP shell around the gateway's front doors: echo
// routes, the request scope (request id, access log), health and readiness,
// one error renderer, and graceful shutdown. Handlers stay thin: each route
// is a door's (door.Route), mounted through the door frame its access
// needs; the shell imports no door.
package server

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"go.opentelemetry.io/otel/trace"

	"github.com/sacpgw/gateway/internal/apierror"
	"github.com/sacpgw/gateway/internal/door"
	"github.com/sacpgw/gateway/internal/httpx"
	"github.com/sacpgw/gateway/internal/metrics"
	"github.com/sacpgw/gateway/internal/scope"
	"github.com/sacpgw/gateway/internal/tracing"
)

// Check is one readiness condition.
type Check struct {
	Name string
	// Ready returns nil when the component can serve.
	Ready func(ctx context.Context) error
	// Detail, if set, adds what a ready component wants known (a rejected
	// policy reload: the last good policies serve).
	Detail func() string
}

// Options configure the server; Frame and Log are required.
type Options struct {
	// Frame identifies and meters the callers of the Agent and Metered
	// routes (the current configuration's agents).
	Frame *door.Frame
	Log   *slog.Logger
	// Routes are every front door's routes.
	Routes []door.Route
	// Metrics, if set, counts every request and serves /metrics.
	Metrics *metrics.Metrics
	// TLS, if set, terminates TLS (see TLSConfig); nil serves plain HTTP.
	TLS *tls.Config
	// Tracer, if set, gives every request a server span exported over OTLP.
	Tracer *tracing.Tracer
	// Checks are evaluated by /readyz, in order.
	Checks []Check
	// ShutdownTimeout bounds the wait for in-flight requests on shutdown.
	ShutdownTimeout time.Duration
	// Bounds limit slow clients and unauthenticated sources.
	Bounds Bounds
}

// Server serves the gateway's HTTP API.
type Server struct {
	echo     *echo.Echo
	log      *slog.Logger
	metrics  *metrics.Metrics
	tls      *tls.Config
	tracer   *tracing.Tracer
	checks   []Check
	timeout  time.Duration
	draining atomic.Bool
	bounds   Bounds
	conns    *connTracker
}

// New builds the routes.
func New(o Options) (*Server, error) {
	if o.Frame == nil || o.Log == nil {
		return nil, errors.New("server: Frame and Log are required")
	}
	if o.ShutdownTimeout <= 0 {
		o.ShutdownTimeout = 30 * time.Second
	}
	s := &Server{log: o.Log, checks: o.Checks, timeout: o.ShutdownTimeout, metrics: o.Metrics, tls: o.TLS, tracer: o.Tracer, bounds: o.Bounds}
	if o.Bounds.ConnsPerSource > 0 {
		s.conns = newConnTracker(o.Bounds.ConnsPerSource)
	}
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.renderError
	// The scope comes first so that even a panic or a 404 is logged with its
	// request id; recovery sits inside it so the log line sees the 500.
	e.Use(s.scope, s.recover, s.guard)
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	if o.Metrics != nil {
		e.GET("/metrics", echo.WrapHandler(o.Metrics.Handler()))
	}
	for _, rt := range o.Routes {
		h := withPathValues(o.Frame.Handler(rt))
		if rt.Method == door.AnyMethod {
			e.Any(rt.Path, h)
			continue
		}
		e.Add(rt.Method, rt.Path, h)
	}
	s.echo = e
	return s, nil
}

// Handler returns the root handler (for tests and custom listeners).
func (s *Server) Handler() http.Handler { return s.echo }

// Serve accepts connections on ln until ctx is done, then stops accepting,
// lets in-flight requests (streams included) finish within the shutdown
// timeout, and returns nil on a clean stop.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	b := s.bounds
	if b.ReadHeaderTimeout <= 0 {
		b.ReadHeaderTimeout = 5 * time.Second
	}
	if b.IdleTimeout <= 0 {
		b.IdleTimeout = 120 * time.Second
	}
	srv := &http.Server{
		Handler:           s.echo,
		ReadHeaderTimeout: b.ReadHeaderTimeout,
		IdleTimeout:       b.IdleTimeout,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
		// No WriteTimeout: a stream may outlive any fixed bound. Bounds
		// cut idle bodies and idle readers instead (see guard).
		ConnContext: s.conns.context,
		ConnState:   s.conns.state,
	}
	errc := make(chan error, 1)
	if s.tls != nil {
		srv.TLSConfig = s.tls
		go func() { errc <- srv.ServeTLS(ln, "", "") }()
	} else {
		go func() { errc <- srv.Serve(ln) }()
	}
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	s.draining.Store(true)
	s.log.Info("shutting down: draining in-flight requests", "timeout", s.timeout.String())
	sctx, cancel := context.WithTimeout(context.Background(), s.timeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		s.log.Warn("shutdown timeout reached: closing remaining connections", "error", err.Error())
		_ = srv.Close()
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve: %w", err)
	}
	return nil
}

// withPathValues mounts a net/http handler that reads r.PathValue: echo
// keeps its parameters to itself, so they are copied onto the request.
func withPathValues(h http.Handler) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		for _, name := range c.ParamNames() {
			r.SetPathValue(name, c.Param(name))
		}
		h.ServeHTTP(c.Response(), r)
		return nil
	}
}

func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

// readyz reports whether every component can serve; it turns false while
// draining so that load balancers stop sending traffic before the exit.
func (s *Server) readyz(c echo.Context) error {
	status, code := "ready", http.StatusOK
	checks := map[string]string{}
	if s.draining.Load() {
		status, code = "draining", http.StatusServiceUnavailable
	}
	for _, ch := range s.checks {
		if err := ch.Ready(c.Request().Context()); err != nil {
			checks[ch.Name] = err.Error()
			status, code = "not ready", http.StatusServiceUnavailable
		} else {
			checks[ch.Name] = "ok"
			if ch.Detail != nil {
				if d := ch.Detail(); d != "" {
					checks[ch.Name] = "ok; " + d
				}
			}
		}
	}
	return c.JSON(code, map[string]any{"status": status, "checks": checks})
}

// scope attaches the request's Exchange, sets X-Request-Id, and writes the
// one access-log line per request. It never logs headers or bodies, so no
// token or key can reach the log.
func (s *Server) scope(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		req := c.Request()
		ex := &scope.Exchange{
			RequestID:     requestID(req.Header.Get("X-Request-Id")),
			SessionID:     clean(req.Header.Get("X-Session-Id")),
			CorrelationID: clean(req.Header.Get("X-Correlation-Id")),
			Start:         time.Now(),
		}
		if a, ok := scope.ActingOf(req.Context()); ok {
			ex.RunID, ex.Node = a.RunID, a.Node
		}
		if s.metrics != nil {
			// A stream's gaps between tokens are observed as they happen.
			ex.Pace.Gaps = s.metrics
		}
		c.Response().Header().Set("X-Request-Id", ex.RequestID)
		var span trace.Span
		if s.tracer != nil {
			var ctx context.Context
			ctx, span = s.tracer.Start(req, req.Method+" "+c.Path())
			req = req.WithContext(ctx)
		}
		c.SetRequest(scope.Attach(req, ex))
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		s.access(c, ex)
		if span != nil {
			tracing.EndRequest(span, requestSpan(c, ex))
		}
		return nil
	}
}

// requestSpan is what a request's server span records of its exchange.
func requestSpan(c echo.Context, ex *scope.Exchange) tracing.Request {
	r := tracing.Request{Method: c.Request().Method, Route: c.Path(), Status: c.Response().Status, Model: ex.Model,
		RequestID: ex.RequestID, Upstream: ex.Upstream, ErrorCode: ex.ErrCode}
	if ex.Agent != nil {
		r.Agent = ex.Agent.ID
	}
	if v, ok := ex.Verdict(scope.CheckPolicy); ok {
		r.Decision = v.Verdict
	}
	if o := ex.SACP; o != nil {
		r.SACP, r.SACPValid, r.SACPAttempts = true, o.Valid, o.Attempts
	}
	return r
}

func (s *Server) access(c echo.Context, ex *scope.Exchange) {
	req, res := c.Request(), c.Response()
	if s.metrics != nil {
		// Before the log-level check: metrics count every request.
		s.metrics.Observe(ex, c.Path(), res.Status, time.Since(ex.Start))
		if ex.UpstreamTime > 0 {
			s.metrics.ObserveUpstream(ex.Upstream, ex.UpstreamTime)
		}
	}
	level := slog.LevelInfo
	switch {
	case res.Status >= 500:
		level = slog.LevelError
	case req.URL.Path == "/healthz" || req.URL.Path == "/readyz":
		level = slog.LevelDebug
	}
	if !s.log.Enabled(req.Context(), level) {
		return
	}
	fields := func(f fieldSink) { accessFields(f, req, res, ex) }
	if h, ok := s.log.Handler().(*JSONHandler); ok {
		h.writeLine(level, "request", fields)
		return
	}
	a := attrSink{attrs: make([]slog.Attr, 0, 20)}
	fields(&a)
	s.log.LogAttrs(req.Context(), level, "request", a.attrs...)
}

// accessFields are the access line's fields, in order.
func accessFields(f fieldSink, req *http.Request, res *echo.Response, ex *scope.Exchange) {
	f.str("request_id", ex.RequestID)
	f.str("method", req.Method)
	f.str("path", req.URL.Path)
	f.int("status", int64(res.Status))
	f.float("latency_ms", float64(time.Since(ex.Start).Microseconds())/1000)
	f.int("bytes_in", bytesIn(req, ex))
	f.int("bytes_out", res.Size)
	if ex.Agent != nil {
		f.str("agent", ex.Agent.ID)
	}
	if ex.Model != "" {
		f.str("model", ex.Model)
		f.bool("stream", ex.Stream)
	}
	if ex.Upstream != "" {
		f.str("upstream", ex.Upstream)
	}
	if ex.UsageKnown {
		f.int("prompt_tokens", int64(ex.Usage.PromptTokens))
		f.int("completion_tokens", int64(ex.Usage.CompletionTokens))
		f.int("tokens", int64(ex.Usage.TotalTokens))
	}
	if first := ex.Pace.First; !first.IsZero() {
		f.float("ttft_ms", float64(first.Sub(ex.Start).Microseconds())/1000)
	}
	if ex.SessionID != "" {
		f.str("session_id", ex.SessionID)
	}
	if tid := traceID(req.Header.Get("Traceparent")); tid != "" {
		f.str("trace_id", tid)
	}
	if ex.ErrCode != "" {
		f.str("error_code", ex.ErrCode)
	}
	if ex.Err != nil {
		f.str("error", ex.Err.Error())
	}
}

// bytesIn is the size of the body as received (not as forwarded, which may
// carry the protocol template).
func bytesIn(r *http.Request, ex *scope.Exchange) int64 {
	if r.ContentLength >= 0 {
		return r.ContentLength
	}
	return int64(len(ex.Body))
}

// recover turns a panic into a 500 in OpenAI's shape, except
// http.ErrAbortHandler, which the reverse proxy uses to cut a broken stream
// and which must reach net/http.
func (s *Server) recover(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			r := recover()
			if r == nil {
				return
			}
			if r == http.ErrAbortHandler {
				panic(r)
			}
			s.log.Error("panic serving request", "panic", fmt.Sprint(r), "path", c.Request().URL.Path)
			if ex := scope.Lookup(c.Request().Context()); ex != nil {
				ex.Err = fmt.Errorf("panic: %v", r)
			}
			if !c.Response().Committed {
				err = fmt.Errorf("panic: %v", r)
			}
		}()
		return next(c)
	}
}

// renderError is echo's single error renderer: routing errors and anything
// a handler returns leave in OpenAI's shape.
func (s *Server) renderError(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	var he *echo.HTTPError
	if errors.As(err, &he) {
		req := c.Request()
		switch he.Code {
		case http.StatusNotFound:
			err = &apierror.Error{Status: http.StatusNotFound, Type: apierror.TypeInvalidRequest, Code: "unknown_url",
				Message: fmt.Sprintf("Unknown request URL: %s %s.", req.Method, req.URL.Path)}
		case http.StatusMethodNotAllowed:
			err = &apierror.Error{Status: http.StatusMethodNotAllowed, Type: apierror.TypeInvalidRequest, Code: "method_not_allowed",
				Message: fmt.Sprintf("Method %s is not allowed on %s.", req.Method, req.URL.Path)}
		default:
			err = &apierror.Error{Status: he.Code, Type: apierror.TypeInvalidRequest, Code: "invalid_request", Message: fmt.Sprint(he.Message)}
		}
	}
	httpx.Fail(c.Response(), c.Request(), err)
}

// traceID returns the trace id of a valid W3C traceparent
// ("00-<32 hex>-<16 hex>-<2 hex>"), so log lines join the caller's trace.
func traceID(tp string) string {
	if len(tp) != 55 || tp[2] != '-' || tp[35] != '-' || tp[52] != '-' {
		return ""
	}
	id := tp[3:35]
	if _, err := hex.DecodeString(id); err != nil || id == strings.Repeat("0", 32) {
		return ""
	}
	return id
}

// requestID echoes a client's X-Request-Id when it is a sane token, else
// makes one; a hostile id could otherwise forge log lines.
func requestID(given string) string {
	if given != "" && len(given) <= 128 && printable(given) {
		return given
	}
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}

func clean(v string) string {
	if len(v) > 256 || !printable(v) {
		return ""
	}
	return v
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x21 || s[i] > 0x7e {
			return false
		}
	}
	return true
}
