package usagepage

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/sacpgw/gateway/internal/ledger"
	"github.com/sacpgw/gateway/internal/pricing"
)

// view is the page as the template draws it.
type view struct {
	Who       string
	Admin     bool
	Now       time.Time
	Forbidden bool
	Error     string
	Teams     []card
	Agents    []card
}

// card is one team's or agent's last 30 days: a chart per measure.
type card struct {
	Name   string
	Charts []chart
}

// chart is one measure's 30 days as bars, oldest left, today right.
type chart struct {
	Measure string // requests, tokens, spend
	// Total and Today say in words what the bars show (colour and height
	// are never the only sign); Peak names the busiest day.
	Total, Today, Peak string
	Bars               []column
	// Label is the chart's text alternative.
	Label string
}

// column is one day's bar: X and Y its top-left corner, H its height, in
// the chart's viewBox (chartW × chartH).
type column struct {
	X, Y, H int
	Title   string
}

// The chart's viewBox: 30 bars of barW with a gap of 2.
const (
	chartH = 48
	barW   = 8
	step   = barW + 2
	chartW = ledger.Days * step
)

func cardOf(name string, s *ledger.Series, today string) card {
	c := card{Name: name}
	measures := []struct {
		name string
		get  func(ledger.Counts) int64
		say  func(int64) string
	}{
		{"requests", func(c ledger.Counts) int64 { return c.Requests }, count},
		{"tokens", func(c ledger.Counts) int64 { return c.Tokens }, count},
		{"spend", func(c ledger.Counts) int64 { return c.MicroUSD }, money},
	}
	for _, m := range measures {
		c.Charts = append(c.Charts, chartOf(m.name, s.Days, today, m.get, m.say))
	}
	return c
}

func chartOf(measure string, days []ledger.DayCounts, today string, get func(ledger.Counts) int64, say func(int64) string) chart {
	ch := chart{Measure: measure}
	var top, total, now int64
	peak := ""
	for _, d := range days {
		v := get(d.Counts)
		total += v
		if v > top {
			top, peak = v, d.Day
		}
		if d.Day == today {
			now = v
		}
	}
	for i, d := range days {
		v := get(d.Counts)
		h := 0
		if top > 0 && v > 0 {
			h = max(1, int(v*chartH/top)) // a day with any use shows
		}
		ch.Bars = append(ch.Bars, column{X: i * step, Y: chartH - h, H: h, Title: d.Day + ": " + say(v)})
	}
	ch.Total, ch.Today = say(total), say(now)
	if peak != "" {
		ch.Peak = fmt.Sprintf("busiest %s (%s)", peak, say(top))
	}
	ch.Label = fmt.Sprintf("%s per day over %d days: %s in all, %s today", measure, len(days), ch.Total, ch.Today)
	return ch
}

// count writes n with thousands separators.
func count(n int64) string {
	s := strconv.FormatInt(n, 10)
	var b strings.Builder
	for i := range len(s) {
		if i > 0 && (len(s)-i)%3 == 0 {
			b.WriteByte(',')
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// money writes micro-dollars as dollars: cents at least ($18.40), and
// every digit a smaller amount has ($0.0004), so a sub-cent spend never
// reads as nothing.
func money(microUSD int64) string {
	s := pricing.FormatUSD(microUSD)
	whole, frac, _ := strings.Cut(s, ".")
	return "$" + whole + "." + (frac + "00")[:max(2, len(frac))]
}
