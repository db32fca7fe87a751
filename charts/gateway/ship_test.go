package chart_test

import (
	"strings"
	"testing"
)

// With audit.ship, the grace period must also cover the last shipping
// pass, which runs after the drain: 45s (above the 30s drain alone) is
// refused, 60s renders.
func TestGraceCoversShipping(t *testing.T) {
	helmBin(t)
	ship := "config.gateway.audit.ship.url=s3://audit-trail/prod"
	_, err := runHelm(t, "template", release, ".", "--namespace", namespace, "--set", ship)
	if err == nil || !strings.Contains(err.Error(), "audit.ship.shutdown_timeout (20s)") {
		t.Fatalf("grace 45s with shipping: %v; want a refusal naming audit.ship.shutdown_timeout", err)
	}
	docs := render(t, ".", nil, []string{ship, "terminationGracePeriodSeconds=60"})
	if g := get(find(docs, "StatefulSet", fullname), "spec", "template", "spec", "terminationGracePeriodSeconds"); g != 60 {
		t.Fatalf("grace = %v", g)
	}
}
