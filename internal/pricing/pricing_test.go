package pricing

import (
	"math"
	"testing"
)

func TestCost(t *testing.T) {
	overrides := map[string]Price{
		"gpt-4o":      {Input: 2, Output: 8},                   // replaces the shipped entry whole (no cached price)
		"local-llama": {},                                      // self-hosted: known, and free
		"acme":        {Input: 1, CachedInput: 0.5, Output: 2}, // a family: acme-large-2025 is priced by prefix
		"acme-large":  {Input: 10, Output: 20},
	}
	cases := []struct {
		name      string
		table     *Table
		model     string
		u         Usage
		want      int64
		wantKnown bool
	}{
		// 1000 × 0.15 + 500 × 0.60 = 150 + 300 µ$.
		{"exact", Default(), "gpt-4o-mini", Usage{Prompt: 1000, Completion: 500}, 450, true},
		{"exact, embeddings have no output", Default(), "text-embedding-3-small", Usage{Prompt: 1_000_000}, 20_000, true},
		{"dated variant by prefix", Default(), "gpt-4o-2024-08-06", Usage{Prompt: 1000, Completion: 1000}, 2500 + 10_000, true},
		{"longest prefix wins", Default(), "gpt-4o-mini-2024-07-18", Usage{Prompt: 1000, Completion: 1000}, 150 + 600, true},
		{"exact dated entry beats its prefix", Default(), "gpt-4o-2024-05-13", Usage{Prompt: 1000, Completion: 1000}, 5000 + 15_000, true},
		{"anthropic dated", Default(), "claude-sonnet-4-20250514", Usage{Prompt: 1000, Completion: 100}, 3000 + 1500, true},
		{"vertex @ version", Default(), "claude-3-5-sonnet@20240620", Usage{Prompt: 1000}, 3000, true},
		{"prefix needs a separator", Default(), "gpt-4oz", Usage{Prompt: 1000}, 0, false},
		{"unknown model", Default(), "llama-3-70b", Usage{Prompt: 1000, Completion: 1000}, 0, false},
		{"nil table is the shipped one", nil, "gpt-4.1", Usage{Prompt: 1_000_000}, 2_000_000, true},
		// 1000 uncached × 2.50 + 3000 cached × 1.25 + 10 × 10.
		{"cached tokens at the cached price", Default(), "gpt-4o", Usage{Prompt: 4000, Cached: 3000, Completion: 10}, 2500 + 3750 + 100, true},
		{"anthropic cache read", Default(), "claude-3-5-haiku-20241022", Usage{Prompt: 10_000, Cached: 10_000}, 800, true},
		{"override replaces", New(overrides), "gpt-4o", Usage{Prompt: 1000, Completion: 1000}, 2000 + 8000, true},
		{"override without a cached price: cached at input", New(overrides), "gpt-4o", Usage{Prompt: 1000, Cached: 1000}, 2000, true},
		{"override adds a model", New(overrides), "acme-small", Usage{Prompt: 1000, Cached: 1000}, 500, true},
		{"override longest prefix", New(overrides), "acme-large-2025", Usage{Prompt: 1000, Completion: 1000}, 10_000 + 20_000, true},
		{"zero price is known and free", New(overrides), "local-llama", Usage{Prompt: 1000, Completion: 1000}, 0, true},
		{"overrides keep the shipped rest", New(overrides), "claude-opus-4", Usage{Completion: 1000}, 75_000, true},
		// 1 token × 0.15 µ$ is rounded up, never down to free.
		{"rounded up to the micro-dollar", Default(), "gpt-4o-mini", Usage{Prompt: 1}, 1, true},
		{"exact sums are not rounded", Default(), "gpt-4o-mini", Usage{Prompt: 20}, 3, true},
		{"more cached than prompt is clamped", Default(), "gpt-4o", Usage{Prompt: 1000, Cached: 5000}, 1250, true},
		{"negative counts are zero", Default(), "gpt-4o", Usage{Prompt: -5, Completion: -5}, 0, true},
		{"absurd counts saturate", Default(), "claude-opus-4", Usage{Prompt: math.MaxInt, Completion: math.MaxInt}, math.MaxInt64/1_000_000 + 1, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, known := tc.table.Cost(tc.model, tc.u)
			if got != tc.want || known != tc.wantKnown {
				t.Errorf("Cost(%q, %+v) = %d, %v; want %d, %v", tc.model, tc.u, got, known, tc.want, tc.wantKnown)
			}
		})
	}
}

// Every shipped price is sane: an input price, and cached input cheaper
// than input, so that a typo in the table fails here.
func TestShippedPrices(t *testing.T) {
	for m, p := range shipped {
		if p.Input <= 0 || p.Output < 0 || p.CachedInput < 0 || p.CachedInput > p.Input {
			t.Errorf("%s: implausible price %+v", m, p)
		}
		if got, ok := Default().Lookup(m); !ok || got != p {
			t.Errorf("Lookup(%q) = %+v, %v", m, got, ok)
		}
	}
}

func TestFormatUSD(t *testing.T) {
	cases := []struct {
		in   int64
		want string
	}{
		{0, "0"},
		{1, "0.000001"},
		{120, "0.00012"},
		{1_234_567, "1.234567"},
		{25_000_000, "25"},
		{25_500_000, "25.5"},
		{-1_500_000, "-1.5"},
		{math.MaxInt64, "9223372036854.775807"},
		{math.MinInt64, "-9223372036854.775808"},
	}
	for _, tc := range cases {
		if got := FormatUSD(tc.in); got != tc.want {
			t.Errorf("FormatUSD(%d) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
