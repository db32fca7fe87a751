package app

import (
	"context"
	"fmt"
	"log/slog"

	"github.com/sacpgw/gateway/audit/ship"
	"github.com/sacpgw/gateway/internal/config"
	"github.com/sacpgw/gateway/internal/egress"
)

// startShipping starts audit.ship's shipper beside the open trail. finish
// stops it and ships what is left (the segment being written, the final
// checkpoint): call it after the trail closed. It is bounded by
// audit.ship.shutdown_timeout, and what it cannot ship stays in the local
// trail for the next start. Without audit.ship both are no-ops.
func startShipping(cfg *config.Config, log *slog.Logger) (s *ship.Shipper, finish func(), err error) {
	sc := cfg.Gateway.Audit.Ship
	if sc == nil {
		return nil, func() {}, nil
	}
	// The storage endpoint is an outbound call like any other: a private
	// address (an in-cluster MinIO) must be listed in
	// messaging.allowed_networks.
	policy := egress.Policy{Allowed: cfg.Gateway.Messaging.AllowedPrefixes}
	s, err = ship.New(*sc, cfg.Gateway.Audit.Dir, &policy, log)
	if err != nil {
		return nil, nil, fmt.Errorf("audit.ship: %w", err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { s.Run(ctx); close(done) }()
	return s, func() {
		stop()
		<-done
		fctx, cancel := context.WithTimeout(context.Background(), sc.ShutdownTimeout)
		defer cancel()
		_ = s.Final(fctx) // logged by Final
	}, nil
}
