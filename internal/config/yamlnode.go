package config

import (
	"fmt"
	"os"
	"reflect"
	"regexp"
	"strconv"
	"strings"

	"github.com/sacpgw/gateway/internal/confkit"
	"gopkg.in/yaml.v3"
)

// expandEnv replaces ${VAR} and ${VAR:-default} in every scalar value of the
// tree. It works on parsed values, not on the raw text, so an environment
// variable can never inject YAML structure, and line numbers stay exact.
func expandEnv(n *yaml.Node, lookup func(string) (string, bool)) {
	if n.Kind == yaml.ScalarNode && strings.Contains(n.Value, "${") {
		n.Value = os.Expand(n.Value, func(key string) string {
			name, def, hasDef := strings.Cut(key, ":-")
			if v, ok := lookup(name); ok && (v != "" || !hasDef) {
				return v
			}
			return def
		})
		return
	}
	for _, c := range n.Content {
		expandEnv(c, lookup)
	}
}

// noteEnvRefs records, before expandEnv, the text of every scalar that names
// the environment, so that Explain can say a value came from ${VAR}.
func noteEnvRefs(n *yaml.Node, refs map[*yaml.Node]string) {
	if n.Kind == yaml.ScalarNode && strings.Contains(n.Value, "${") {
		refs[n] = n.Value
	}
	for _, c := range n.Content {
		noteEnvRefs(c, refs)
	}
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// repeated reports the key k of a mapping (what is "key" of a struct,
// "entry" of a map) when seen already has it, with the line it was first
// at, and otherwise adds it to seen.
func repeated(seen map[string]int, k *yaml.Node, what, where string, report func(int, string)) bool {
	if first, dup := seen[k.Value]; dup {
		report(k.Line, fmt.Sprintf("duplicate %s %q%s (first at line %d)", what, k.Value, in(where), first))
		return true
	}
	seen[k.Value] = k.Line
	return false
}

// checkKeys walks the node against the Go type it will be decoded into and
// reports every unknown or duplicate key. yaml.v3's KnownFields is only
// available on a Decoder over raw bytes, and we decode from an env-expanded
// node tree, so the check is done here, reporting all problems, not the first.
func checkKeys(n *yaml.Node, t reflect.Type, where string, report func(line int, msg string)) {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		return
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		checkKeys(n.Content[0], t, where, report)
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			return // the decoder reports the type mismatch
		}
		fields := yamlFields(t)
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if repeated(seen, k, "key", where, report) {
				continue
			}
			ft, ok := fields[k.Value]
			if !ok {
				report(k.Line, fmt.Sprintf("unknown key %q%s%s", k.Value, in(where), confkit.DidYouMean(k.Value, sortedKeys(fields))))
				continue
			}
			checkKeys(v, ft, join(where, k.Value), report)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			return
		}
		seen := map[string]int{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if !repeated(seen, k, "entry", where, report) {
				checkKeys(v, t.Elem(), join(where, k.Value), report)
			}
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			return
		}
		for i, c := range n.Content {
			checkKeys(c, t.Elem(), join(where, strconv.Itoa(i)), report)
		}
	}
}

// YAMLName is the key a config struct field is read from, and false for a
// field no file sets (unexported, or tagged "-": derived from others).
func YAMLName(f reflect.StructField) (string, bool) {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	if name == "-" || !f.IsExported() {
		return "", false
	}
	if name == "" {
		name = strings.ToLower(f.Name)
	}
	return name, true
}

// Inlined reports an embedded struct whose keys are read as the outer
// struct's own (yaml:",inline"): a part's settings beside what the loader
// adds to its section.
func Inlined(f reflect.StructField) bool {
	_, opts, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return f.Anonymous && f.Type.Kind() == reflect.Struct && opts == "inline"
}

func yamlFields(t reflect.Type) map[string]reflect.Type {
	out := map[string]reflect.Type{}
	for i := range t.NumField() {
		f := t.Field(i)
		if Inlined(f) {
			for k, v := range yamlFields(f.Type) {
				out[k] = v
			}
			continue
		}
		name, ok := YAMLName(f)
		if !ok {
			continue
		}
		out[name] = f.Type
	}
	return out
}

func in(where string) string {
	if where == "" {
		return ""
	}
	return " in " + where
}

func join(where, key string) string {
	if where == "" {
		return key
	}
	return where + "." + key
}

// lineOf returns the line of the value at path (mapping keys, or sequence
// indexes as decimal strings), or of the deepest node found on the way, so
// that a semantic error still points at the right neighbourhood.
func lineOf(root *yaml.Node, path ...string) int {
	n := root
	if n == nil {
		return 0
	}
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	line := n.Line
	for _, p := range path {
		var next *yaml.Node
		switch n.Kind {
		case yaml.MappingNode:
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == p {
					line = n.Content[i].Line
					next = n.Content[i+1]
					break
				}
			}
		case yaml.SequenceNode:
			if i, err := strconv.Atoi(p); err == nil && i >= 0 && i < len(n.Content) {
				next = n.Content[i]
			}
		}
		if next == nil {
			return line
		}
		n = next
		if n.Kind == yaml.ScalarNode || n.Kind == yaml.AliasNode {
			line = n.Line
		} // for a block mapping or list, the key's line reads better
	}
	return line
}

var (
	yamlLineRE    = regexp.MustCompile(`^(?:yaml: )?line (\d+): (.*)$`)
	yamlUnknownRE = regexp.MustCompile(`(already defined at line|already set in type|not found in type)`)
	yamlTypeRE    = regexp.MustCompile(`cannot unmarshal !!(\w+) ` + "`" + `?([^` + "`" + `]*)` + "`" + `? into (\S+)`)
)

// splitYAMLError turns a yaml.v3 error into (line, message) pairs, dropping
// the duplicate/unknown key messages that checkKeys already reported better.
func splitYAMLError(err error) [][2]string {
	var msgs []string
	if te, ok := err.(*yaml.TypeError); ok {
		msgs = te.Errors
	} else {
		msgs = []string{err.Error()}
	}
	var out [][2]string
	for _, m := range msgs {
		if yamlUnknownRE.MatchString(m) {
			continue
		}
		line, msg := "0", m
		if sm := yamlLineRE.FindStringSubmatch(m); sm != nil {
			line, msg = sm[1], sm[2]
		}
		if tm := yamlTypeRE.FindStringSubmatch(msg); tm != nil {
			msg = fmt.Sprintf("invalid value %q: want %s", tm[2], friendlyType(tm[3]))
		}
		out = append(out, [2]string{line, msg})
	}
	return out
}

func friendlyType(goType string) string {
	switch {
	case goType == "time.Duration", goType == "*time.Duration":
		return "a duration such as 5s or 1m"
	case strings.HasPrefix(goType, "[]"):
		return "a list"
	case strings.HasPrefix(goType, "map["), strings.Contains(goType, "."):
		return "a mapping"
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "*int"):
		return "an integer"
	case goType == "bool", goType == "*bool":
		return "true or false"
	default:
		return "a " + goType
	}
}

func reflectTypeOf(v any) reflect.Type { return reflect.TypeOf(v) }

// hasKey reports whether the mapping path exists in the document.
func hasKey(root *yaml.Node, path ...string) bool {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) == 1 {
		n = n.Content[0]
	}
	for _, p := range path {
		if n.Kind == yaml.SequenceNode {
			i, err := strconv.Atoi(p)
			if err != nil || i < 0 || i >= len(n.Content) {
				return false
			}
			n = n.Content[i]
			continue
		}
		if n.Kind != yaml.MappingNode {
			return false
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == p {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return false
		}
		n = next
	}
	return true
}
