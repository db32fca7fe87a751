// Package confkit is what every part's configuration is written with: the
// units of the files (sizes, durations, rates, budgets), the did-you-mean
// rule, and Reporter, through which a part's Check reports its problems to
// the loader (internal/config) at the file and line where the operator
// wrote them. A part owns its config type, its defaults and its checks;
// the loader reads the files and composes the parts.
package confkit

import (
	"errors"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"
)

// Reporter is one part's section of a config file, as the loader hands it
// to the part's Check.
type Reporter interface {
	// Line is the line where the key at path (mapping keys, or list
	// indexes in decimal, below the section) was written, or the line of
	// the nearest written key on the way, so that a problem of a default
	// still points at the neighbourhood.
	Line(path ...string) int
	// Has reports whether the key at path was written.
	Has(path ...string) bool
	// Add records a problem at line; every problem is reported at once.
	Add(line int, format string, args ...any)
	// Resolve makes a relative path of the file relative to the directory
	// of the file that holds it, never to the process's working
	// directory; an absolute or empty path stays as it is.
	Resolve(p *string)
	// Shown is how a path of the file appears in a problem: joined to the
	// config dir as given on the command line, not made absolute.
	Shown(p string) string
	// LookupEnv reads the environment the loader reads (a default taken
	// from it, as a chain id from $POD_NAME).
	LookupEnv(name string) (string, bool)
}

// FileExists reports, at line, a path that is set but cannot be read, as
// "field path: error".
func FileExists(r Reporter, line int, field, p string) {
	if p == "" {
		return
	}
	if _, err := os.Stat(p); err != nil {
		r.Add(line, "%s %s: %v", field, p, errors.Unwrap(err))
	}
}

// HTTPURL reports whether s is an absolute http or https URL with a host.
func HTTPURL(s string) bool {
	u, err := url.Parse(s)
	return err == nil && (u.Scheme == "http" || u.Scheme == "https") && u.Host != ""
}

// OneOf reports whether v is in set.
func OneOf(v string, set ...string) bool { return slices.Contains(set, v) }

// DurationSetting is a duration of a section: its key (dotted below the
// section), where it is kept, and its default.
type DurationSetting struct {
	Key     string
	V       *Duration
	Default time.Duration
}

// Durations gives each unset duration its default and refuses a negative
// one at its line, as "section.key: must be positive".
func Durations(r Reporter, section string, ds []DurationSetting) {
	for _, d := range ds {
		if *d.V == 0 {
			*d.V = Duration(d.Default)
		}
		if *d.V < 0 {
			r.Add(r.Line(strings.Split(d.Key, ".")...), "%s.%s: must be positive", section, d.Key)
		}
	}
}
