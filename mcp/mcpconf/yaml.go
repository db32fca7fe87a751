package mcpconf

import (
	"errors"
	"fmt"
	"net/textproto"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sacpgw/gateway/internal/confkit"
)

// UnmarshalYAML reads a mapping of header names to values. A name given
// twice (HTTP names ignore case) or that is not a header name, and a value
// that could split the header, are refused; the value is never quoted in
// the problem.
func (s *Secrets) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return confkit.ScalarError(n, errors.New("want a mapping of header names to values"))
	}
	out := make(Secrets, len(n.Content)/2)
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		canon := textproto.CanonicalMIMEHeaderKey(k.Value)
		switch {
		case k.Kind != yaml.ScalarNode || v.Kind != yaml.ScalarNode:
			return confkit.ScalarError(k, errors.New("want header names with text values"))
		case !headerName(k.Value):
			return confkit.ScalarError(k, fmt.Errorf("%q is not a header name", k.Value))
		case seen[canon]:
			return confkit.ScalarError(k, fmt.Errorf("header %s is given twice (names ignore case)", canon))
		case strings.ContainsAny(v.Value, "\r\n\x00"):
			return confkit.ScalarError(v, fmt.Errorf("the value of header %s holds a line break or NUL", canon))
		}
		seen[canon] = true
		out[k.Value] = v.Value
	}
	*s = out
	return nil
}

// UnmarshalYAML reads a virtual server's member: a name, or {name, prefix}.
func (mb *Member) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		mb.Name = n.Value
		return nil
	}
	type plain Member
	return n.Decode((*plain)(mb))
}

// UnmarshalYAML reads a mapping of environment variable names (letters,
// digits and '_', not first a digit) to values without NUL; the value is
// never quoted in a problem.
func (e *Env) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		return confkit.ScalarError(n, errors.New("want a mapping of variable names to values"))
	}
	out := make(Env, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		switch {
		case k.Kind != yaml.ScalarNode || v.Kind != yaml.ScalarNode:
			return confkit.ScalarError(k, errors.New("want variable names with text values"))
		case !envName(k.Value):
			return confkit.ScalarError(k, fmt.Errorf("%q is not a variable name (letters, digits and _)", k.Value))
		case out[k.Value] != "" || k.Value == "PATH":
			return confkit.ScalarError(k, fmt.Errorf("variable %s is given twice (PATH is the gateway's)", k.Value))
		case strings.ContainsRune(v.Value, 0):
			return confkit.ScalarError(v, fmt.Errorf("the value of %s holds a NUL", k.Value))
		}
		out[k.Value] = v.Value
	}
	*e = out
	return nil
}

func envName(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || i > 0 && c >= '0' && c <= '9') {
			return false
		}
	}
	return s != ""
}

// headerName reports whether s is an HTTP field name (RFC 9110 token).
func headerName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return true
}
