package confkit

import "testing"

func FuzzParseSize(f *testing.F) {
	for _, s := range []string{"50KB", "1MB", "0B", "-1KB", "9223372036854775807B", "99999999999GB", "KB", " 1 gb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseSize(s)
		if err == nil && n < 0 {
			t.Fatalf("ParseSize(%q) = %d", s, n)
		}
		if err != nil && n != 0 {
			t.Fatalf("ParseSize(%q) returned %d with error", s, n)
		}
	})
}

func FuzzParseRate(f *testing.F) {
	for _, s := range []string{"100/hour", "1/s", "0/day", "/", "5/", "2147483648/second"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		r, err := ParseRate(s)
		if err == nil && (r.N <= 0 || r.Period <= 0 || r.PerSecond() <= 0) {
			t.Fatalf("ParseRate(%q) = %+v", s, r)
		}
	})
}

func FuzzParseDuration(f *testing.F) {
	for _, s := range []string{"5000ms", "10s", "1h", "5000", "-1s", "1e9h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseDuration(s)
		if err == nil && d < 0 {
			t.Fatalf("ParseDuration(%q) = %v", s, d)
		}
	})
}
