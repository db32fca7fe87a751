package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// listenHealth opens gateway.yaml's health_listen ("" = none: stop is a
// no-op) and serves the server's health handler (/healthz and /readyz
// only) on it in plain HTTP, even when the main port is TLS or mutual TLS:
// that is its purpose, the kubelet's probes have no client certificate.
//
// The caller calls stop after the main server has drained, not when the
// shutdown begins: during the drain liveness must keep answering and
// readiness must say "draining", else the kubelet would see a dead
// container instead of one leaving the Service.
func (a *App) listenHealth(addr string) (stop func(), err error) {
	if addr == "" {
		return func() {}, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, &UsageError{fmt.Sprintf("health_listen %s: %v", addr, err)}
	}
	return a.serveHealth(ln), nil
}

// serveHealth serves the health handler on ln until stop is called.
func (a *App) serveHealth(ln net.Listener) (stop func()) {
	srv := &http.Server{
		Handler: a.server.HealthHandler(),
		// Probes are tiny GETs answered at once (readiness checks bound
		// their own calls); tight limits keep a stray client on this
		// unauthenticated port from holding connections.
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       10 * time.Second,
		WriteTimeout:      10 * time.Second,
		IdleTimeout:       60 * time.Second,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(a.log.Handler(), slog.LevelWarn),
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			// The main port keeps serving; the failing probes will tell
			// the kubelet, which restarts the container.
			a.log.Error("health listener stopped", "addr", ln.Addr().String(), "error", err.Error())
		}
	}()
	a.log.Info("health probes listening (plain HTTP: /healthz, /readyz)", "addr", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := srv.Shutdown(ctx); err != nil {
			_ = srv.Close()
		}
		<-done
	}
}
