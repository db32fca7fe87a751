package responses

import (
	"time"

	"github.com/sacpgw/gateway/internal/confkit"
)

// Settings is gateway.yaml's responses: the conversations the gateway keeps
// so that a Responses API request may continue an earlier one
// (previous_response_id).
type Settings struct {
	// StoreTTL is how long an answered response can be continued. Default
	// 24h; a request's store: false keeps nothing.
	StoreTTL confkit.Duration `yaml:"store_ttl"`
	// MaxStoredSize bounds one stored conversation; a longer one is not
	// kept (continuing it is refused, never truncated). Default 1MB.
	MaxStoredSize confkit.Size `yaml:"max_stored_size"`
}

// Check fills in the defaults and refuses negative bounds.
func (rs *Settings) Check(r confkit.Reporter) {
	if rs.StoreTTL == 0 {
		rs.StoreTTL = confkit.Duration(24 * time.Hour)
	}
	if rs.MaxStoredSize == 0 {
		rs.MaxStoredSize = 1 << 20
	}
	if rs.StoreTTL < 0 || rs.MaxStoredSize < 0 {
		r.Add(r.Line(), "responses: store_ttl and max_stored_size must be positive")
	}
}
