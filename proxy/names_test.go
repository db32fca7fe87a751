package proxy

import (
	"slices"
	"testing"

	"github.com/sacpgw/gateway/config"
	"github.com/sacpgw/gateway/redact"
)

// config validates detector names with its own list, so that a bad name
// is reported with its file and line; the list must be redact's.
func TestConfigKnowsEveryDetector(t *testing.T) {
	if !slices.Equal(config.DetectorNames, redact.Names()) {
		t.Fatalf("config.DetectorNames %v != redact.Names() %v", config.DetectorNames, redact.Names())
	}
}
