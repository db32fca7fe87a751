package confkit

import "slices"

// Sub is r narrowed to the keys below key: what a part hands the parts
// its own section holds.
func Sub(r Reporter, key ...string) Reporter { return sub{r, key} }

type sub struct {
	Reporter
	key []string
}

func (s sub) Line(p ...string) int { return s.Reporter.Line(slices.Concat(s.key, p)...) }

func (s sub) Has(p ...string) bool { return s.Reporter.Has(slices.Concat(s.key, p)...) }
