// Package pricing turns token usage into money: a table of model prices
// (USD per million tokens) and the cost of a call in micro-dollars.
//
// The table ships with the list prices of common models; gateway.yaml's
// pricing adds models and replaces shipped entries. A model is found by its
// exact name, else by the longest entry that is a prefix of it at a
// separator ('-', '@' or ':'), so that dated and versioned variants
// (gpt-4o-2024-08-06, claude-sonnet-4-20250514, claude-3-5-sonnet@20240620)
// cost what their family costs. A model found neither way has no price: its
// cost is unknown, and the caller decides what that means (a budget cannot
// be enforced on it).
//
// Amounts are integers of micro-dollars (confkit.Money's unit), so sums
// never drift; a call's cost is rounded up to the micro-dollar, so a
// budget never undercounts.
package pricing

import (
	"math"
	"strconv"
	"strings"
)

// Usage is what one call consumed, as the provider reported it.
type Usage struct {
	// Prompt is every prompt token, the cached ones included (OpenAI's
	// prompt_tokens).
	Prompt int
	// Cached is how many of Prompt the provider served from its prompt
	// cache (prompt_tokens_details.cached_tokens), priced at CachedInput.
	Cached int
	// Completion is every generated token, reasoning included.
	Completion int
}

// shipped are list prices in USD per million tokens, as the providers
// published them; they are a default, not a contract: negotiated rates,
// new models and price changes belong in gateway.yaml's pricing, whose
// entries replace these. CachedInput is OpenAI's cached input and
// Anthropic's cache read; Anthropic's cache writes are not reported through
// the OpenAI-compatible API and are priced as input.
var shipped = map[string]Price{
	// OpenAI.
	"gpt-4o":                 {Input: 2.50, CachedInput: 1.25, Output: 10.00},
	"gpt-4o-2024-05-13":      {Input: 5.00, Output: 15.00}, // the first gpt-4o, priced higher and without caching
	"gpt-4o-mini":            {Input: 0.15, CachedInput: 0.075, Output: 0.60},
	"gpt-4.1":                {Input: 2.00, CachedInput: 0.50, Output: 8.00},
	"gpt-4.1-mini":           {Input: 0.40, CachedInput: 0.10, Output: 1.60},
	"gpt-4.1-nano":           {Input: 0.10, CachedInput: 0.025, Output: 0.40}, // else priced as gpt-4.1, its prefix
	"o3-mini":                {Input: 1.10, CachedInput: 0.55, Output: 4.40},
	"text-embedding-3-small": {Input: 0.02},
	"text-embedding-3-large": {Input: 0.13},
	"text-embedding-ada-002": {Input: 0.10},
	// Anthropic.
	"claude-3-5-sonnet": {Input: 3.00, CachedInput: 0.30, Output: 15.00},
	"claude-3-5-haiku":  {Input: 0.80, CachedInput: 0.08, Output: 4.00},
	"claude-3-7-sonnet": {Input: 3.00, CachedInput: 0.30, Output: 15.00},
	"claude-sonnet-4":   {Input: 3.00, CachedInput: 0.30, Output: 15.00},
	"claude-opus-4":     {Input: 15.00, CachedInput: 1.50, Output: 75.00},
}

// Table maps model names to prices. It is immutable once built and safe
// for concurrent use; the nil *Table is the shipped table.
type Table struct {
	prices map[string]Price
}

// defaultTable is the shipped table, built once.
var defaultTable = New(nil)

// Default returns the shipped table (list prices only).
func Default() *Table { return defaultTable }

// New returns the shipped table with overrides (gateway.yaml's pricing)
// added, an override replacing a shipped entry of the same name whole.
func New(overrides map[string]Price) *Table {
	t := &Table{prices: make(map[string]Price, len(shipped)+len(overrides))}
	for m, p := range shipped {
		t.prices[m] = p
	}
	for m, p := range overrides {
		t.prices[m] = p
	}
	return t
}

// Lookup returns model's price: its exact entry, else the longest entry
// that is a prefix of model ending at a separator ('-', '@', ':').
// Requiring the separator keeps "gpt-4o" from pricing a "gpt-4oz".
func (t *Table) Lookup(model string) (Price, bool) {
	if t == nil {
		t = defaultTable
	}
	if p, ok := t.prices[model]; ok {
		return p, true
	}
	// Cutting at separators from the right finds the longest prefix first.
	for i := len(model) - 1; i > 0; i-- {
		switch model[i] {
		case '-', '@', ':':
			if p, ok := t.prices[model[:i]]; ok {
				return p, true
			}
		}
	}
	return Price{}, false
}

// Cost is what u costs on model, in micro-dollars; known is false (and the
// cost 0) when the model has no price.
func (t *Table) Cost(model string, u Usage) (microUSD int64, known bool) {
	p, ok := t.Lookup(model)
	if !ok {
		return 0, false
	}
	return MicroUSD(p, u), true
}

// MicroUSD is what u costs at p, in micro-dollars, rounded up. Cached
// tokens are priced at CachedInput, or at Input when the price sets none
// (an unset cached price must not make cached tokens free). Counts are
// clamped to sense (no negative tokens, no more cached than prompt) and the
// sum saturates rather than wraps, so a provider's absurd report cannot
// turn into a refund.
func MicroUSD(p Price, u Usage) int64 {
	prompt := max(0, u.Prompt)
	cached := min(max(0, u.Cached), prompt)
	cachedPrice := p.CachedInput
	if cachedPrice == 0 {
		cachedPrice = p.Input
	}
	// USD per million tokens is micro-dollars per token; in pico-dollars
	// per token the shipped and usual prices are whole numbers, so the
	// products and their sum are exact integers.
	pico := addSat(addSat(
		mulSat(int64(prompt-cached), perToken(p.Input)),
		mulSat(int64(cached), perToken(cachedPrice))),
		mulSat(int64(max(0, u.Completion)), perToken(p.Output)))
	micro := pico / picoPerMicro
	if pico%picoPerMicro != 0 {
		micro++
	}
	return micro
}

// Both 10⁶: pico-dollars in a micro-dollar, micro-dollars in a dollar.
const (
	picoPerMicro = 1_000_000
	microPerUSD  = 1_000_000
)

// perToken converts USD per million tokens to pico-dollars per token.
func perToken(usdPerMillion float64) int64 {
	v := math.Round(usdPerMillion * 1e6)
	switch {
	case !(v > 0): // zero, negative, NaN: config refuses the last two
		return 0
	case v >= math.MaxInt64:
		return math.MaxInt64
	}
	return int64(v)
}

func mulSat(a, b int64) int64 {
	if a == 0 || b == 0 {
		return 0
	}
	if a > math.MaxInt64/b {
		return math.MaxInt64
	}
	return a * b
}

func addSat(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

// FormatUSD writes micro-dollars as an exact decimal amount of dollars
// without trailing zeros: 1234567 is "1.234567", 25000000 is "25", 120 is
// "0.00012".
func FormatUSD(microUSD int64) string {
	var b strings.Builder
	u := uint64(microUSD)
	if microUSD < 0 {
		b.WriteByte('-')
		u = -u // two's complement: right for math.MinInt64 too
	}
	b.WriteString(strconv.FormatUint(u/microPerUSD, 10))
	if frac := u % microPerUSD; frac != 0 {
		s := strconv.FormatUint(frac+microPerUSD, 10)[1:] // six digits, leading zeros kept
		b.WriteByte('.')
		b.WriteString(strings.TrimRight(s, "0"))
	}
	return b.String()
}
