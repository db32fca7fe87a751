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

// listen binds the main address and gateway.yaml's health_listen (""
// = none: a nil listener). The health port serves the server's health
// handler (/healthz and /readyz only) in plain HTTP, even when the main
// port is TLS or mutual TLS: that is its purpose, the kubelet's probes have
// no client certificate.
//
// The caller stops the health server after the main server has drained,
// not when the shutdown begins: during the drain liveness must keep
// answering and readiness must say "draining", else the kubelet would see
// a dead container instead of one leaving the Service.
func listen(addr, healthAddr string) (main, health net.Listener, err error) {
	main, err = net.Listen("tcp", addr)
	if err != nil {
		return nil, nil, &UsageError{fmt.Sprintf("listen %s: %v", addr, err)}
	}
	if healthAddr == "" {
		return main, nil, nil
	}
	health, err = net.Listen("tcp", healthAddr)
	if err != nil {
		_ = main.Close()
		return nil, nil, &UsageError{fmt.Sprintf("health_listen %s: %v", healthAddr, err)}
	}
	return main, health, nil
}

// closeListeners closes the listeners of a start that does not serve.
func closeListeners(lns ...net.Listener) {
	for _, ln := range lns {
		if ln != nil {
			_ = ln.Close()
		}
	}
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
