package server

import (
	"net/http"

	"github.com/labstack/echo/v4"
)

// HealthHandler serves /healthz and /readyz, the very handlers and checks
// of the main server (so readiness turns "draining" here too when Serve
// starts its shutdown), and nothing else: any other path is a 404. It is
// for gateway.yaml's health_listen, a plain-HTTP port for the kubelet's
// probes, which cannot present a client certificate when
// tls.client_ca_file makes the main port mutual TLS. Only these two routes
// are exposed because that port needs no credential at all.
func (s *Server) HealthHandler() http.Handler {
	e := echo.New()
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.renderError
	// The main server's request scope (request id, debug-level access
	// line, metrics) and panic recovery; not guard: its limits are about
	// agents' connections and failed authentications, and a probe must not
	// be refused because some other client on the node failed to log in.
	e.Use(s.scope, s.recover)
	e.GET("/healthz", s.healthz)
	e.GET("/readyz", s.readyz)
	return e
}
