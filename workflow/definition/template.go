package definition

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
)

// blobWord is the only function word a placeholder may start with.
const blobWord = "blob"

// Template is a compiled node input: text with {{path}} and {{blob path}}
// placeholders.
type Template struct {
	src   string
	parts []tmplPart
	nodes []string
}

// tmplPart is literal text (path nil) or one placeholder.
type tmplPart struct {
	text string
	path []string
	blob bool
}

// ParseTemplate compiles "text {{path}} text {{blob path}}". A path is
// dot-separated segments ([A-Za-z0-9_-]+; a segment of digits indexes an
// array); the first segment is "input", "context", or a node name (which
// Parse checks against the workflow). "{{ path }}" may have spaces inside the
// braces. "{{" without a closing "}}", an empty path, a bad segment or an
// unknown function word are errors.
func ParseTemplate(s string) (*Template, error) {
	t := &Template{src: s}
	seen := map[string]bool{}
	rest, offset := s, 0
	for {
		i := strings.Index(rest, "{{")
		if i < 0 {
			t.addText(rest)
			break
		}
		t.addText(rest[:i])
		j := strings.Index(rest[i+2:], "}}")
		if j < 0 {
			return nil, fmt.Errorf("template: \"{{\" at offset %d has no closing \"}}\"", offset+i)
		}
		inner := rest[i+2 : i+2+j]
		part, err := parsePlaceholder(inner)
		if err != nil {
			return nil, fmt.Errorf("template: {{%s}} at offset %d: %w", inner, offset+i, err)
		}
		t.parts = append(t.parts, part)
		if root := part.path[0]; root != templateInputRoot && root != templateContextRoot && !seen[root] {
			seen[root] = true
			t.nodes = append(t.nodes, root)
		}
		rest, offset = rest[i+2+j+2:], offset+i+2+j+2
	}
	return t, nil
}

func (t *Template) addText(s string) {
	if s != "" {
		t.parts = append(t.parts, tmplPart{text: s})
	}
}

func parsePlaceholder(inner string) (tmplPart, error) {
	words := strings.Fields(inner)
	var part tmplPart
	var path string
	switch len(words) {
	case 0:
		return part, errors.New("empty path")
	case 1:
		path = words[0]
	case 2:
		if words[0] != blobWord {
			return part, fmt.Errorf("unknown function %q (only %q is known)", words[0], blobWord)
		}
		part.blob, path = true, words[1]
	default:
		return part, fmt.Errorf("too many words: a placeholder is a path or %q and a path", blobWord)
	}
	part.path = strings.Split(path, ".")
	for _, seg := range part.path {
		if !validSegment(seg) {
			return part, fmt.Errorf("bad path segment %q in %q: segments are [A-Za-z0-9_-]+", seg, path)
		}
	}
	return part, nil
}

func validSegment(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') && (c < '0' || c > '9') && c != '_' && c != '-' {
			return false
		}
	}
	return true
}

// String returns the source.
func (t *Template) String() string {
	if t == nil {
		return ""
	}
	return t.src
}

// Nodes returns the first segments of the paths that are not "input" or
// "context" (node names), deduplicated, in order of first use.
func (t *Template) Nodes() []string {
	return append([]string(nil), t.nodes...)
}

// Render fills the template from root, a JSON-decoded value: a map with
// keys "input", "context" and one per node that has answered ({"status",
// "message", "data", "thought"}). A string value is inserted as is; any other
// value as compact JSON with sorted map keys. {{blob path}} passes the
// resolved value to blob, which returns the text to insert. A path that does
// not resolve is an error naming the placeholder and the failing segment:
// sending an agent a prompt with a silently empty hole is worse than not
// calling it.
func (t *Template) Render(root map[string]any, blob func(ref any) (string, error)) (string, error) {
	var b strings.Builder
	for _, part := range t.parts {
		if part.path == nil {
			b.WriteString(part.text)
			continue
		}
		v, err := resolve(root, part.path)
		if err != nil {
			return "", fmt.Errorf("%s: %w", part.placeholder(), err)
		}
		if part.blob {
			if blob == nil {
				return "", fmt.Errorf("%s: no blob function to resolve it", part.placeholder())
			}
			s, err := blob(v)
			if err != nil {
				return "", fmt.Errorf("%s: %w", part.placeholder(), err)
			}
			b.WriteString(s)
			continue
		}
		s, err := formatValue(v)
		if err != nil {
			return "", fmt.Errorf("%s: %w", part.placeholder(), err)
		}
		b.WriteString(s)
	}
	return b.String(), nil
}

// placeholder is the normalized source of a placeholder, for messages.
func (p tmplPart) placeholder() string {
	if p.blob {
		return "{{" + blobWord + " " + strings.Join(p.path, ".") + "}}"
	}
	return "{{" + strings.Join(p.path, ".") + "}}"
}

// resolve walks path from root. Besides the JSON-decoded map[string]any and
// []any it accepts other string-keyed maps and slices, so that a caller
// assembling root by hand ([]string of guesses) gets the same result.
func resolve(root map[string]any, path []string) (any, error) {
	first := path[0]
	cur, ok := root[first]
	if !ok {
		return nil, fmt.Errorf("%q is not available (no such input, context or node answer)", first)
	}
	for i := 1; i < len(path); i++ {
		seg, where := path[i], strings.Join(path[:i], ".")
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[seg]
			if !ok {
				return nil, fmt.Errorf("%q is not in %s", seg, where)
			}
			cur = next
			continue
		case []any:
			idx, err := index(seg, len(v), where)
			if err != nil {
				return nil, err
			}
			cur = v[idx]
			continue
		}
		rv := reflect.ValueOf(cur)
		switch rv.Kind() {
		case reflect.Map:
			if rv.Type().Key().Kind() != reflect.String {
				return nil, fmt.Errorf("cannot read %q: %s is a map without string keys", seg, where)
			}
			next := rv.MapIndex(reflect.ValueOf(seg).Convert(rv.Type().Key()))
			if !next.IsValid() {
				return nil, fmt.Errorf("%q is not in %s", seg, where)
			}
			cur = next.Interface()
		case reflect.Slice, reflect.Array:
			idx, err := index(seg, rv.Len(), where)
			if err != nil {
				return nil, err
			}
			cur = rv.Index(idx).Interface()
		default:
			return nil, fmt.Errorf("cannot read %q: %s is %s, not an object or array", seg, where, jsonKind(cur))
		}
	}
	return cur, nil
}

func index(seg string, n int, where string) (int, error) {
	idx, err := strconv.Atoi(seg)
	if err != nil || idx < 0 {
		if isDigits(seg) {
			return 0, fmt.Errorf("index %s is out of range of %s (length %d)", seg, where, n)
		}
		return 0, fmt.Errorf("%q is not an index: %s is an array", seg, where)
	}
	if idx >= n {
		return 0, fmt.Errorf("index %d is out of range of %s (length %d)", idx, where, n)
	}
	return idx, nil
}

func isDigits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

func jsonKind(v any) string {
	switch v.(type) {
	case nil:
		return "null"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case json.Number, float64, float32, int, int64, int32, uint, uint64, uint32:
		return "a number"
	}
	return fmt.Sprintf("a %T", v)
}

// formatValue inserts strings as they are (the usual case: text for a
// prompt) and everything else as compact JSON. HTML escaping is off: the
// text goes to a model, not a browser, and "\u003c" for "<" only confuses it.
func formatValue(v any) (string, error) {
	switch s := v.(type) {
	case string:
		return s, nil
	case json.Number:
		return s.String(), nil
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return "", fmt.Errorf("cannot encode the value as JSON: %w", err)
	}
	return strings.TrimSuffix(buf.String(), "\n"), nil
}
