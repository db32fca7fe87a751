package confkit

import (
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Size is a byte count written with a unit: "512B", "50KB", "1MB", "2GB".
// Units are binary (1KB = 1024 B), as in the approval protocol's agent registry.
type Size int64

// Rate is "N/period": N events allowed per second, minute, hour, day, week or month.
// The zero Rate means "no limit".
type Rate struct {
	N      int
	Period time.Duration
}

// Money is a spend rate: "25USD/day" is 25,000,000 micro-dollars a day.
// Amounts are kept in micro-dollars, integers, so sums never round.
type Money struct {
	MicroUSD int64
	Period   time.Duration
}

// IsZero reports an unset budget.
func (m Money) IsZero() bool { return m.MicroUSD == 0 }

func (m Money) String() string {
	if m.IsZero() {
		return "unlimited"
	}
	amount := strconv.FormatFloat(float64(m.MicroUSD)/1e6, 'f', -1, 64) + "USD/"
	return amount + PeriodName(m.Period)
}

// ParseMoney parses "25USD/day" (a positive amount of at most six decimals,
// USD, and a period second, minute, hour, day, week or month).
func ParseMoney(s string) (Money, error) {
	amount, per, ok := strings.Cut(strings.TrimSpace(s), "/")
	num, found := strings.CutSuffix(strings.TrimSpace(amount), "USD")
	if !ok || !found {
		return Money{}, fmt.Errorf("invalid budget %q: want an amount in USD per period, e.g. 25USD/day", s)
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(num), 64)
	micro := int64(math.Round(f * 1e6))
	if err != nil || f <= 0 || math.IsInf(f, 0) || micro <= 0 || f > 1e12 {
		return Money{}, fmt.Errorf("invalid budget %q: the amount must be a positive number", s)
	}
	d, ok := periods[strings.ToLower(strings.TrimSpace(per))]
	if !ok {
		return Money{}, fmt.Errorf("invalid budget %q: period must be second, minute, hour, day, week or month", s)
	}
	return Money{MicroUSD: micro, Period: d}, nil
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (m *Money) UnmarshalYAML(n *yaml.Node) error { return unmarshalScalar(n, m, ParseMoney) }

// Duration is a time span written with a unit ("5000ms", "10s", "24h").
// A bare number is refused: "5000" could mean milliseconds or seconds.
type Duration time.Duration

// ParseSize parses a size such as "50KB". The unit is required.
func ParseSize(s string) (Size, error) {
	t := strings.TrimSpace(s)
	upper := strings.ToUpper(t)
	units := []struct {
		suffix string
		mult   int64
	}{{"KB", 1 << 10}, {"MB", 1 << 20}, {"GB", 1 << 30}, {"B", 1}}
	for _, u := range units {
		if !strings.HasSuffix(upper, u.suffix) {
			continue
		}
		num := strings.TrimSpace(t[:len(t)-len(u.suffix)])
		n, err := strconv.ParseInt(num, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("invalid size %q: want a non-negative integer and a unit B, KB, MB or GB", s)
		}
		if n > math.MaxInt64/u.mult {
			return 0, fmt.Errorf("invalid size %q: too large", s)
		}
		return Size(n * u.mult), nil
	}
	return 0, fmt.Errorf("invalid size %q: want a unit B, KB, MB or GB (e.g. 50KB)", s)
}

var periods = map[string]time.Duration{
	"second": time.Second, "sec": time.Second, "s": time.Second,
	"minute": time.Minute, "min": time.Minute, "m": time.Minute,
	"hour": time.Hour, "h": time.Hour,
	"day": 24 * time.Hour, "d": 24 * time.Hour,
	// A week is 7 days and a month 30: the limits are token buckets that
	// refill evenly over the period, not calendar windows, so a month is a
	// span, not a date.
	"week": Week, "w": Week,
	"month": Month,
}

// Week and Month are the longest periods a rate or budget may name.
const (
	Week  = 7 * 24 * time.Hour
	Month = 30 * 24 * time.Hour
)

// ParseRate parses "100/hour". Periods: second, minute, hour, day, week,
// month (or s, m, h, d, w).
func ParseRate(s string) (Rate, error) {
	num, per, ok := strings.Cut(strings.TrimSpace(s), "/")
	if !ok {
		return Rate{}, fmt.Errorf("invalid rate %q: want N/period, e.g. 100/hour", s)
	}
	n, err := strconv.Atoi(strings.TrimSpace(num))
	if err != nil || n <= 0 {
		return Rate{}, fmt.Errorf("invalid rate %q: N must be a positive integer", s)
	}
	d, ok := periods[strings.ToLower(strings.TrimSpace(per))]
	if !ok {
		return Rate{}, fmt.Errorf("invalid rate %q: period must be second, minute, hour, day, week or month", s)
	}
	return Rate{N: n, Period: d}, nil
}

// ParseDuration parses a duration with a unit ("5000ms", "10s", "1h30m").
func ParseDuration(s string) (Duration, error) {
	t := strings.TrimSpace(s)
	if t == "" {
		return 0, fmt.Errorf("invalid duration %q: empty", s)
	}
	if _, err := strconv.ParseFloat(t, 64); err == nil {
		return 0, fmt.Errorf("invalid duration %q: a unit is required (ms, s, m, h)", s)
	}
	d, err := time.ParseDuration(t)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("invalid duration %q: want e.g. 5000ms, 10s or 24h", s)
	}
	return Duration(d), nil
}

// IsZero reports whether the rate is unset (no limit).
func (r Rate) IsZero() bool { return r.N == 0 }

// PerSecond is the sustained rate in events per second.
func (r Rate) PerSecond() float64 {
	if r.IsZero() {
		return 0
	}
	return float64(r.N) / r.Period.Seconds()
}

func (r Rate) String() string {
	if r.IsZero() {
		return "unlimited"
	}
	// Written for every request's audit entry: no map, no fmt.
	return strconv.Itoa(r.N) + "/" + PeriodName(r.Period)
}

// PeriodName names a period of a money budget or a rate one way (the
// periods map has short aliases too): second, minute, hour, day, week or
// month, else as a duration.
func PeriodName(d time.Duration) string {
	switch d {
	case time.Second:
		return "second"
	case time.Minute:
		return "minute"
	case time.Hour:
		return "hour"
	case 24 * time.Hour:
		return "day"
	case Week:
		return "week"
	case Month:
		return "month"
	}
	return d.String()
}

// D returns the value as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// ScalarError reports a bad value as a yaml.TypeError so that the YAML decoder
// records it and keeps going: every problem in a file is reported at once.
func ScalarError(n *yaml.Node, err error) error {
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %v", n.Line, err)}}
}

// unmarshalScalar sets *v to the scalar n as parse reads it; a bad value
// is a ScalarError, so the decoder goes on to the next.
func unmarshalScalar[T any](n *yaml.Node, v *T, parse func(string) (T, error)) error {
	if n.Kind != yaml.ScalarNode {
		return ScalarError(n, fmt.Errorf("want a scalar value"))
	}
	p, err := parse(n.Value)
	if err != nil {
		return ScalarError(n, err)
	}
	*v = p
	return nil
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (s *Size) UnmarshalYAML(n *yaml.Node) error { return unmarshalScalar(n, s, ParseSize) }

// UnmarshalYAML implements yaml.Unmarshaler.
func (r *Rate) UnmarshalYAML(n *yaml.Node) error { return unmarshalScalar(n, r, ParseRate) }

// UnmarshalYAML implements yaml.Unmarshaler.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error { return unmarshalScalar(n, d, ParseDuration) }
