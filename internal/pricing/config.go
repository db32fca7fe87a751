package pricing

import (
	"math"

	"github.com/sacpgw/gateway/internal/confkit"
)

// Price is what a model costs, in US dollars per million tokens: an entry
// of gateway.yaml's pricing, or of the shipped table.
type Price struct {
	Input       float64 `yaml:"input"`
	Output      float64 `yaml:"output"`
	CachedInput float64 `yaml:"cached_input"`
}

// Check reports gateway.yaml's pricing entries that are not prices, through
// r, whose keys are below pricing.
func Check(r confkit.Reporter, prices map[string]Price) {
	for model, p := range prices {
		if p.Input < 0 || p.Output < 0 || p.CachedInput < 0 || math.IsNaN(p.Input+p.Output+p.CachedInput) {
			r.Add(r.Line(model), "pricing.%s: prices must be non-negative numbers (USD per million tokens)", model)
		}
	}
}
