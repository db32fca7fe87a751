package confkit

import (
	"testing"
	"time"
)

func TestParseUnits(t *testing.T) {
	sizes := []struct {
		in   string
		want Size
		ok   bool
	}{
		{"50KB", 50 << 10, true}, {"1MB", 1 << 20, true}, {"512B", 512, true}, {"2gb", 2 << 30, true},
		{" 10 KB ", 10 << 10, true}, {"0B", 0, true},
		{"50", 0, false}, {"KB", 0, false}, {"-1KB", 0, false}, {"1.5MB", 0, false}, {"10TB", 0, false},
		{"9999999999999GB", 0, false},
	}
	for _, tc := range sizes {
		got, err := ParseSize(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseSize(%q) = %d, %v; want %d ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
	rates := []struct {
		in   string
		want Rate
		ok   bool
	}{
		{"100/hour", Rate{100, time.Hour}, true}, {"5/second", Rate{5, time.Second}, true},
		{"60/minute", Rate{60, time.Minute}, true}, {"1000/day", Rate{1000, 24 * time.Hour}, true},
		{"10/s", Rate{10, time.Second}, true}, {"3/H", Rate{3, time.Hour}, true},
		{"100", Rate{}, false}, {"0/hour", Rate{}, false}, {"-5/hour", Rate{}, false}, {"5/week", Rate{5, Week}, true}, {"5/fortnight", Rate{}, false}, {"x/hour", Rate{}, false},
	}
	for _, tc := range rates {
		got, err := ParseRate(tc.in)
		if (err == nil) != tc.ok || got != tc.want {
			t.Errorf("ParseRate(%q) = %v, %v; want %v ok=%v", tc.in, got, err, tc.want, tc.ok)
		}
	}
	durs := []struct {
		in   string
		want time.Duration
		ok   bool
	}{
		{"5000ms", 5 * time.Second, true}, {"10s", 10 * time.Second, true}, {"86400000ms", 24 * time.Hour, true}, {"1h30m", 90 * time.Minute, true},
		{"5000", 0, false}, {"", 0, false}, {"-1s", 0, false}, {"soon", 0, false},
	}
	for _, tc := range durs {
		got, err := ParseDuration(tc.in)
		if (err == nil) != tc.ok || got.D() != tc.want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v ok=%v", tc.in, got.D(), err, tc.want, tc.ok)
		}
	}
	if r := (Rate{N: 100, Period: time.Hour}); r.String() != "100/hour" || r.PerSecond() != 100.0/3600 {
		t.Errorf("Rate helpers: %s %v", r, r.PerSecond())
	}
}

func TestParseMoney(t *testing.T) {
	cases := []struct {
		in   string
		want Money
		ok   bool
	}{
		{"25USD/day", Money{MicroUSD: 25_000_000, Period: 24 * time.Hour}, true},
		{"0.5USD/hour", Money{MicroUSD: 500_000, Period: time.Hour}, true},
		{" 1.000001USD / minute ", Money{MicroUSD: 1_000_001, Period: time.Minute}, true},
		{"25/day", Money{}, false},
		{"25EUR/day", Money{}, false},
		{"0USD/day", Money{}, false},
		{"-1USD/day", Money{}, false},
		{"NaNUSD/day", Money{}, false},
		{"500USD/month", Money{MicroUSD: 500_000_000, Period: Month}, true},
		{"25USD/week", Money{MicroUSD: 25_000_000, Period: Week}, true},
		{"25USD/year", Money{}, false},
		{"0.0000001USD/day", Money{}, false},
	}
	for _, c := range cases {
		got, err := ParseMoney(c.in)
		if (err == nil) != c.ok || got != c.want {
			t.Errorf("ParseMoney(%q) = %+v, %v; want %+v ok=%v", c.in, got, err, c.want, c.ok)
		}
	}
}

// TestUnitStrings: money budgets and rates are written back the way the
// config check and the audit entries show them, each period named one way.
func TestUnitStrings(t *testing.T) {
	for _, c := range []struct {
		got, want string
	}{
		{Money{MicroUSD: 25_000_000, Period: 24 * time.Hour}.String(), "25USD/day"},
		{Money{MicroUSD: 500_000, Period: time.Second}.String(), "0.5USD/second"},
		{Money{MicroUSD: 1, Period: 90 * time.Minute}.String(), "0.000001USD/1h30m0s"},
		{Rate{N: 10, Period: time.Minute}.String(), "10/minute"},
		{Rate{N: 3, Period: 2 * time.Hour}.String(), "3/2h0m0s"},
		{Money{MicroUSD: 500_000_000, Period: Month}.String(), "500USD/month"},
		{Rate{N: 7, Period: Week}.String(), "7/week"},
	} {
		if c.got != c.want {
			t.Errorf("got %q, want %q", c.got, c.want)
		}
	}
}
