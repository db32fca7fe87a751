package config

import (
	"slices"

	"gopkg.in/yaml.v3"

	"github.com/sacpgw/gateway/internal/confkit"
)

// The units of the files are confkit's, where the parts take them from;
// the composite names them too, for the code that reads a Config.
type (
	Duration = confkit.Duration
	Size     = confkit.Size
	Rate     = confkit.Rate
	Money    = confkit.Money
)

// section is confkit.Reporter over one part's section of one file: the
// part's Check names its keys below prefix, and its problems land at the
// file's lines.
type section struct {
	l      *loader
	file   string
	root   *yaml.Node
	prefix []string
}

var _ confkit.Reporter = section{}

// section hands a part the keys of file below prefix.
func (l *loader) section(file string, root *yaml.Node, prefix ...string) section {
	return section{l: l, file: file, root: root, prefix: prefix}
}

func (s section) Line(p ...string) int { return lineOf(s.root, slices.Concat(s.prefix, p)...) }

func (s section) Has(p ...string) bool {
	return s.root != nil && hasKey(s.root, slices.Concat(s.prefix, p)...)
}

func (s section) Add(line int, format string, args ...any) { s.l.add(s.file, line, format, args...) }

func (s section) Resolve(p *string) { s.l.resolve(p) }

func (s section) Shown(p string) string { return s.l.shown(p) }

func (s section) LookupEnv(name string) (string, bool) { return s.l.env(name) }
