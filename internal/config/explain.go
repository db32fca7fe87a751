package config

import (
	"fmt"
	"io"
	"net/url"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/sacpgw/gateway/internal/protocol"
	"github.com/sacpgw/gateway/internal/roster"
	"github.com/sacpgw/gateway/internal/team"
	"github.com/sacpgw/gateway/sacp"
	"github.com/sacpgw/gateway/upstream"
	"gopkg.in/yaml.v3"
)

// Setting is one value of the effective configuration (defaults applied)
// and where it came from, as `gateway config check --explain` prints it.
type Setting struct {
	// Key is the value's path: "listen", "upstreams[0].models",
	// "agents.claude-3.rate_limit", "protocol.timeouts.response".
	Key string
	// Value is written as in the files: strings quoted, durations, sizes,
	// rates and budgets with their units; a secret as [set] or [empty].
	Value string
	// Source is "FILE:LINE", "env ${VAR} at FILE:LINE", or "default"
	// (with the line of an empty value that let the default through).
	Source string
}

// secretKeys are the keys whose values are credentials: Explain shows
// whether they are set, never what they are. (Token hashes are not
// secrets: the files hold nothing else.)
var secretKeys = map[string]bool{
	"api_key": true,
	// state.redis' ACL passwords (its own and the Sentinels').
	"password": true,
	// A Slack-compatible webhook URL is its own credential.
	"webhook": true,
	// policy.bundle's bearer token.
	"token": true,
	// Object storage credentials (audit.ship).
	"secret_access_key": true, "session_token": true,
	// people.oidc's registration with the identity provider.
	"client_secret": true,
	// mcp's key of the people's stored tokens.
	"token_key": true, "previous_token_key": true,
}

// Explain loads dir as Load does and also returns every setting of the
// effective configuration with its source, file by file in the order of
// the files' fields. On a problem it returns Load's Problems.
func Explain(dir string, opts ...Options) (*Config, []Setting, error) {
	cfg, l, err := load(dir, opts...)
	if err != nil {
		return nil, nil, err
	}
	e := &explainer{l: l}
	e.file(GatewayFile, "", reflect.ValueOf(&cfg.Gateway).Elem())
	agents := struct {
		Agents map[string]*roster.Agent `yaml:"agents"`
	}{cfg.Agents}
	e.file(AgentsFile, "", reflect.ValueOf(agents))
	protocolDoc := struct {
		Protocol protocol.Config `yaml:"protocol"`
	}{cfg.Protocol}
	e.file(ProtocolFile, "", reflect.ValueOf(protocolDoc))
	if l.roots[RegistryFile] != nil {
		registry := struct {
			Registry Registry `yaml:"registry"`
		}{cfg.Registry}
		e.file(RegistryFile, "", reflect.ValueOf(registry))
	}
	if l.roots[TeamsFile] != nil {
		e.file(TeamsFile, "", reflect.ValueOf(team.File{Teams: cfg.Teams}))
	}
	return cfg, e.out, nil
}

// WriteSettings writes settings as "key = value  # source" lines, the
// sources aligned in a column (lines too long for it keep two spaces).
func WriteSettings(w io.Writer, settings []Setting) error {
	const widest = 48
	width := 0
	for _, s := range settings {
		if n := len(s.Key) + 3 + len(s.Value); n <= widest && n > width {
			width = n
		}
	}
	var b strings.Builder
	for _, s := range settings {
		left := s.Key + " = " + s.Value
		b.WriteString(left)
		b.WriteString(strings.Repeat(" ", max(0, width-len(left))+2))
		b.WriteString("# ")
		b.WriteString(s.Source)
		b.WriteByte('\n')
	}
	_, err := io.WriteString(w, b.String())
	return err
}

type explainer struct {
	l   *loader
	out []Setting
}

// file walks one file's document: v holds its top-level fields.
func (e *explainer) file(file, key string, v reflect.Value) {
	root := e.l.roots[file]
	if root != nil && root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	e.walk(file, key, root, 0, v)
}

var unmarshalerLeaf = reflect.TypeFor[yaml.Unmarshaler]()

// walk explains v, whose node in the file is n (nil: absent, so the value
// is a default) and whose key sits at keyLine.
func (e *explainer) walk(file, key string, n *yaml.Node, keyLine int, v reflect.Value) {
	t := v.Type()
	if t.Kind() == reflect.Pointer {
		if v.IsNil() {
			e.leaf(file, key, n, keyLine, "unset")
			return
		}
		v, t = v.Elem(), t.Elem()
	}
	if reflect.PointerTo(t).Implements(unmarshalerLeaf) {
		e.leaf(file, key, n, keyLine, formatValue(v))
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		for i := range t.NumField() {
			f := t.Field(i)
			if Inlined(f) {
				e.walk(file, key, n, keyLine, v.Field(i))
				continue
			}
			name, ok := YAMLName(f)
			if !ok {
				continue
			}
			child, line := field(n, name)
			fv := v.Field(i)
			k := join(key, name)
			if s, ok := effectiveNil(t, name, v, fv); ok {
				e.leaf(file, k, child, line, s)
				continue
			}
			if secretKeys[name] && fv.Kind() == reflect.String {
				e.leaf(file, k, child, line, secret(fv.String()))
				continue
			}
			if (name == "redis_url" || k == "state.redis.url") && fv.Kind() == reflect.String {
				e.leaf(file, k, child, line, redactURL(fv.String()))
				continue
			}
			e.walk(file, k, child, line, fv)
		}
	case reflect.Slice:
		elem := t.Elem()
		for elem.Kind() == reflect.Pointer {
			elem = elem.Elem()
		}
		if elem.Kind() != reflect.Struct || v.Len() == 0 {
			e.leaf(file, key, n, keyLine, formatValue(v))
			return
		}
		for i := range v.Len() {
			var item *yaml.Node
			if n != nil && n.Kind == yaml.SequenceNode && i < len(n.Content) {
				item = n.Content[i]
			}
			line := keyLine
			if item != nil {
				line = item.Line
			}
			e.walk(file, key+"["+strconv.Itoa(i)+"]", item, line, v.Index(i))
		}
	case reflect.Map:
		if v.Len() == 0 {
			e.leaf(file, key, n, keyLine, "{}")
			return
		}
		keys := make([]string, 0, v.Len())
		for _, k := range v.MapKeys() {
			keys = append(keys, k.String())
		}
		sort.Strings(keys)
		for _, k := range keys {
			child, line := field(n, k)
			e.walk(file, join(key, k), child, line, v.MapIndex(reflect.ValueOf(k).Convert(t.Key())))
		}
	default:
		e.leaf(file, key, n, keyLine, formatValue(v))
	}
}

// field returns the value node of key in the mapping n and the line to
// show for it: the value's own line for a scalar, the key's for a block.
func field(n *yaml.Node, key string) (*yaml.Node, int) {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, 0
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			v := n.Content[i+1]
			if v.Kind == yaml.ScalarNode {
				return v, v.Line
			}
			return v, n.Content[i].Line
		}
	}
	return nil, 0
}

// leaf records one setting; its source follows from its node.
func (e *explainer) leaf(file, key string, n *yaml.Node, line int, value string) {
	where := filepath.Join(e.l.dir, file) + ":" + strconv.Itoa(line)
	var source string
	switch {
	case n == nil:
		source = "default"
	case emptyScalar(n) && value != `""` && value != "[empty]" && value != "unset":
		// Written, but empty: the loader filled the default in.
		source = "default (empty at " + where + ")"
		if ref := e.envRef(n); ref != "" {
			source = "default (" + ref + " is empty at " + where + ")"
		}
	default:
		source = where
		if ref := e.envRef(n); ref != "" {
			source = "env " + ref + " at " + where
		}
	}
	e.out = append(e.out, Setting{Key: key, Value: value, Source: source})
}

// envRef is the ${...} text of n or of the first scalar under it that
// named the environment, or "".
func (e *explainer) envRef(n *yaml.Node) string {
	if raw, ok := e.l.envRefs[n]; ok {
		return raw
	}
	for _, c := range n.Content {
		if ref := e.envRef(c); ref != "" {
			return ref
		}
	}
	return ""
}

func emptyScalar(n *yaml.Node) bool {
	return n.Kind == yaml.ScalarNode && (n.Value == "" || n.Tag == "!!null")
}

// effectiveNil gives the effective value of the optional fields whose
// absence means a default that lives in a method, not in the loader.
func effectiveNil(parent reflect.Type, name string, pv, fv reflect.Value) (string, bool) {
	if fv.Kind() != reflect.Pointer || !fv.IsNil() {
		return "", false
	}
	switch {
	case parent == reflect.TypeFor[upstream.Config]() && name == "max_retries":
		return strconv.Itoa(pv.Interface().(upstream.Config).Retries()), true
	case parent == reflect.TypeFor[sacp.Config]() && name == "reask":
		return strconv.FormatBool(pv.Interface().(sacp.Config).ReaskEnabled()), true
	}
	return "", false
}

func secret(s string) string {
	if s == "" {
		return "[empty]"
	}
	return "[set]"
}

// redactURL hides a URL's password (redis://:secret@host): the host is
// worth seeing, the credential is not.
func redactURL(s string) string {
	if s == "" {
		return `""`
	}
	u, err := url.Parse(s)
	if err != nil {
		return "[set]" // unparsable: it may be anything, a password included
	}
	return strconv.Quote(u.Redacted())
}

// formatValue writes a value as the files would.
func formatValue(v reflect.Value) string {
	switch x := v.Interface().(type) {
	case Duration:
		return formatDuration(time.Duration(x))
	case Size:
		return formatSize(x)
	case Rate:
		return x.String()
	case Money:
		return x.String()
	case string:
		return strconv.Quote(x)
	}
	switch v.Kind() {
	case reflect.Slice:
		if v.Len() > 8 && v.Type().Elem().Kind() == reflect.Float64 {
			// An embedding: its numbers say nothing to a reader.
			return fmt.Sprintf("[%d numbers]", v.Len())
		}
		items := make([]string, v.Len())
		for i := range items {
			items[i] = formatValue(v.Index(i))
		}
		return "[" + strings.Join(items, ", ") + "]"
	case reflect.Pointer:
		if v.IsNil() {
			return "unset"
		}
		return formatValue(v.Elem())
	}
	return fmt.Sprint(v.Interface())
}

// formatDuration writes d as a config file would: "1m", "168h", not
// "1m0s", "168h0m0s" (both parse back to the same value).
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// formatSize writes a size in the largest unit that divides it.
func formatSize(s Size) string {
	for _, u := range []struct {
		unit string
		n    Size
	}{{"GB", 1 << 30}, {"MB", 1 << 20}, {"KB", 1 << 10}} {
		if s != 0 && s%u.n == 0 {
			return strconv.FormatInt(int64(s/u.n), 10) + u.unit
		}
	}
	return strconv.FormatInt(int64(s), 10) + "B"
}
