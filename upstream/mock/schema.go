package mock

import (
	"bytes"
	"encoding/json"
	"math"
	"net/url"
	"slices"
	"strconv"
	"strings"
)

// is then the best the rules above give, which may not validate.
type schemaGen struct {
	root json.RawMessage
	text string // the user's last message, for string values
}

func newSchemaGen(schema json.RawMessage, text string) *schemaGen {
	return &schemaGen{root: schema, text: text}
}

// document is the value of the whole schema.
func (g *schemaGen) document() any { return g.value(g.root, "", 0, 0) }

// maxSchemaDepth stops a self-referencing schema that the array rule
// cannot end (a required object member that is itself).
const maxSchemaDepth = 64

// schemaNode is one schema object, its keywords not yet decoded.
type schemaNode map[string]json.RawMessage

func parseSchema(raw json.RawMessage) schemaNode {
	var s schemaNode
	// A boolean schema or none at all is the empty schema.
	if json.Unmarshal(raw, &s) != nil || s == nil {
		s = schemaNode{}
	}
	return s
}

func (s schemaNode) has(k string) bool { _, ok := s[k]; return ok }

func (s schemaNode) num(k string) (float64, bool) {
	var f float64
	if raw, ok := s[k]; ok && json.Unmarshal(raw, &f) == nil {
		return f, true
	}
	return 0, false
}

func (s schemaNode) str(k string) string {
	var v string
	_ = json.Unmarshal(s[k], &v)
	return v
}

func (s schemaNode) list(k string) []json.RawMessage {
	var v []json.RawMessage
	_ = json.Unmarshal(s[k], &v)
	return v
}

func (s schemaNode) strings(k string) []string {
	var v []string
	if json.Unmarshal(s[k], &v) != nil {
		var one string
		if json.Unmarshal(s[k], &one) == nil {
			v = []string{one}
		}
	}
	return v
}

func (s schemaNode) without(keys ...string) schemaNode {
	out := make(schemaNode, len(s))
	for k, v := range s {
		if !slices.Contains(keys, k) {
			out[k] = v
		}
	}
	return out
}

// merge adds b's keywords to a's: a's win, except properties and required,
// which are joined (a's first).
func merge(a, b schemaNode) schemaNode {
	out := a.without()
	for k, v := range b {
		switch {
		case k == "properties" && a.has(k):
			obj := &jsonObject{}
			for _, src := range []json.RawMessage{a[k], v} {
				var m map[string]json.RawMessage
				_ = json.Unmarshal(src, &m)
				for _, key := range objectKeys(src) {
					if !obj.has(key) {
						obj.add(key, m[key])
					}
				}
			}
			out[k], _ = json.Marshal(obj)
		case k == "required" && a.has(k):
			req := a.strings(k)
			for _, r := range b.strings(k) {
				if !slices.Contains(req, r) {
					req = append(req, r)
				}
			}
			out[k], _ = json.Marshal(req)
		case !a.has(k):
			out[k] = v
		}
	}
	return out
}

// resolve folds $ref, allOf, anyOf and oneOf into one schema.
func (g *schemaGen) resolve(s schemaNode, depth int) schemaNode {
	for range maxSchemaDepth {
		switch {
		case s.has("$ref"):
			s = merge(s.without("$ref"), g.pointer(s.str("$ref")))
		case s.has("allOf"):
			out := s.without("allOf")
			for _, sub := range s.list("allOf") {
				if depth < maxSchemaDepth {
					out = merge(out, g.resolve(parseSchema(sub), depth+1))
				}
			}
			s = out
		case s.has("anyOf") || s.has("oneOf"):
			key := "anyOf"
			if !s.has(key) {
				key = "oneOf"
			}
			branches := s.list(key)
			var pick schemaNode
			for _, b := range branches {
				if sub := parseSchema(b); pick == nil || schemaTypeOf(pick) == "null" {
					pick = sub
				}
			}
			if pick == nil {
				pick = schemaNode{}
			}
			s = merge(s.without(key), pick)
		default:
			return s
		}
	}
	return s
}

// pointer resolves a $ref within the document; any other is the empty
// schema.
func (g *schemaGen) pointer(ref string) schemaNode {
	if ref != "#" && !strings.HasPrefix(ref, "#/") {
		return schemaNode{}
	}
	cur := g.root
	for _, tok := range strings.Split(strings.TrimPrefix(ref, "#"), "/")[1:] {
		if t, err := url.PathUnescape(tok); err == nil {
			tok = t
		}
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		var obj map[string]json.RawMessage
		var arr []json.RawMessage
		switch {
		case json.Unmarshal(cur, &obj) == nil:
			cur = obj[tok]
		case json.Unmarshal(cur, &arr) == nil:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(arr) {
				return schemaNode{}
			}
			cur = arr[i]
		default:
			return schemaNode{}
		}
	}
	return parseSchema(cur)
}

// schemaTypeOf is the type a schema asks for, or implies.
func schemaTypeOf(s schemaNode) string {
	types := s.strings("type")
	for _, t := range types {
		if t != "null" {
			return t
		}
	}
	if len(types) > 0 {
		return "null"
	}
	switch {
	case s.has("properties") || s.has("required") || s.has("additionalProperties") || s.has("minProperties"):
		return "object"
	case s.has("items") || s.has("prefixItems") || s.has("minItems") || s.has("maxItems"):
		return "array"
	case s.has("minimum") || s.has("maximum") || s.has("exclusiveMinimum") || s.has("exclusiveMaximum") || s.has("multipleOf"):
		return "number"
	}
	return "string"
}

// value generates the value of schema raw for a property named prop ("" at
// the root and in arrays of unnamed things); variant tells sibling array
// elements apart.
func (g *schemaGen) value(raw json.RawMessage, prop string, variant, depth int) any {
	if depth > maxSchemaDepth {
		return nil
	}
	s := g.resolve(parseSchema(raw), depth)
	if c, ok := s["const"]; ok {
		return c
	}
	if enum := s.list("enum"); len(enum) > 0 {
		if w, ok := wordAfter(g.text, prop); ok {
			for _, e := range enum {
				var v string
				if json.Unmarshal(e, &v) == nil && strings.EqualFold(v, w) {
					return e
				}
			}
		}
		return enum[variant%len(enum)]
	}
	switch schemaTypeOf(s) {
	case "object":
		return g.object(s, variant, depth)
	case "array":
		return g.array(s, prop, variant, depth)
	case "integer":
		return schemaNumber(s, true, variant)
	case "number":
		return schemaNumber(s, false, variant)
	case "boolean":
		return variant%2 == 0
	case "null":
		return nil
	}
	return g.string(s, prop, variant)
}

func (g *schemaGen) object(s schemaNode, variant, depth int) *jsonObject {
	var props map[string]json.RawMessage
	_ = json.Unmarshal(s["properties"], &props)
	order := objectKeys(s["properties"])
	required := s.strings("required")
	out := &jsonObject{}
	for _, k := range order {
		if slices.Contains(required, k) {
			out.add(k, g.value(props[k], k, variant, depth+1))
		}
	}
	extra, closed := s["additionalProperties"], string(s["additionalProperties"]) == "false"
	for _, k := range required {
		if _, ok := props[k]; !ok && !out.has(k) && !closed {
			out.add(k, g.value(extra, k, variant, depth+1))
		}
	}
	if minProps, ok := s.num("minProperties"); ok {
		for _, k := range order {
			if float64(len(out.keys)) >= minProps {
				break
			}
			if !out.has(k) {
				out.add(k, g.value(props[k], k, variant, depth+1))
			}
		}
	}
	return out
}

// maxMockItems bounds a generated array whatever minItems asks.
const maxMockItems = 1024

func (g *schemaGen) array(s schemaNode, prop string, variant, depth int) []any {
	n := 1
	if depth > 8 {
		n = 0
	}
	if x, ok := s.num("minItems"); ok && x > float64(n) {
		n = int(min(x, maxMockItems))
	}
	if x, ok := s.num("maxItems"); ok && x < float64(n) {
		n = max(int(x), 0)
	}
	prefix := s.list("prefixItems")
	items := s["items"]
	if tuple := s.list("items"); len(tuple) > 0 && len(prefix) == 0 {
		// draft 4 to 2019-09 tuples: items as a list
		prefix, items = tuple, s["additionalItems"]
	}
	if string(items) == "false" {
		n = min(n, len(prefix))
	}
	out := make([]any, n)
	for i := range out {
		sub := items
		if i < len(prefix) {
			sub = prefix[i]
		}
		out[i] = g.value(sub, prop, variant+i, depth+1)
	}
	return out
}

// formatSamples are fixed valid values of the string formats the mock
// knows; the date is the mock's "created" time.
var formatSamples = map[string]string{
	"date-time": "2023-11-14T22:13:20Z",
	"date":      "2023-11-14",
	"time":      "22:13:20Z",
	"email":     "user@example.com",
	"uri":       "https://example.com/",
	"hostname":  "example.com",
	"ipv4":      "192.0.2.1",
	"ipv6":      "2001:db8::1",
	"uuid":      "00000000-0000-4000-8000-000000000000",
}

func (g *schemaGen) string(s schemaNode, prop string, variant int) string {
	v, ok := formatSamples[s.str("format")]
	if !ok {
		v = "example"
		if w, found := wordAfter(g.text, prop); found {
			v = w
		}
		if variant > 0 {
			v += "-" + strconv.Itoa(variant+1)
		}
	}
	r := []rune(v)
	if x, ok := s.num("maxLength"); ok && float64(len(r)) > x {
		r = r[:max(int(x), 0)]
	}
	if x, ok := s.num("minLength"); ok && float64(len(r)) < x {
		r = append(r, []rune(strings.Repeat("x", int(min(x, maxMockItems))-len(r)))...)
	}
	return string(r)
}

// schemaNumber is 1 (plus the variant), moved into the schema's bounds and
// onto its multipleOf when it can be.
func schemaNumber(s schemaNode, integer bool, variant int) json.Number {
	lo, hi := math.Inf(-1), math.Inf(1)
	loEx, hiEx := false, false
	if x, ok := s.num("minimum"); ok {
		lo = x
	}
	if x, ok := s.num("exclusiveMinimum"); ok && x >= lo {
		lo, loEx = x, true
	}
	if x, ok := s.num("maximum"); ok {
		hi = x
	}
	if x, ok := s.num("exclusiveMaximum"); ok && x <= hi {
		hi, hiEx = x, true
	}
	if integer {
		if loEx {
			lo = math.Floor(lo) + 1
		} else {
			lo = math.Ceil(lo)
		}
		if hiEx {
			hi = math.Ceil(hi) - 1
		} else {
			hi = math.Floor(hi)
		}
		loEx, hiEx = false, false
	}
	inside := func(v float64) bool {
		return v >= lo && v <= hi && !(loEx && v == lo) && !(hiEx && v == hi)
	}
	v := float64(1 + variant)
	if !inside(v) {
		switch {
		case v <= lo && !loEx:
			v = lo
		case v <= lo && inside(lo+1):
			v = lo + 1
		case v >= hi && !hiEx:
			v = hi
		case v >= hi && inside(hi-1):
			v = hi - 1
		default:
			v = lo + (hi-lo)/2
		}
	}
	if m, ok := s.num("multipleOf"); ok && m > 0 {
		k := math.Ceil(v / m)
		for _, c := range []float64{k, k + 1, k - 1, k - 2} {
			// Rounding to 12 digits keeps 3 × 0.1 at "0.3", which a
			// validator's exact arithmetic accepts as a multiple of 0.1.
			if x, _ := strconv.ParseFloat(strconv.FormatFloat(c*m, 'g', 12, 64), 64); inside(x) {
				v = x
				break
			}
		}
	}
	if integer && !math.IsInf(v, 0) && !math.IsNaN(v) {
		return json.Number(strconv.FormatFloat(math.Round(v), 'f', -1, 64))
	}
	if math.IsInf(v, 0) || math.IsNaN(v) {
		return "1"
	}
	if math.Abs(v) < 1e21 {
		return json.Number(strconv.FormatFloat(v, 'f', -1, 64))
	}
	return json.Number(strconv.FormatFloat(v, 'g', -1, 64))
}

// jsonObject is a JSON object that keeps its members in insertion order,
// so that a generated document follows its schema's property order, as a
// model's answer does.
type jsonObject struct {
	keys []string
	vals []any
}

func (o *jsonObject) add(k string, v any) {
	o.keys = append(o.keys, k)
	o.vals = append(o.vals, v)
}

func (o *jsonObject) has(k string) bool { return slices.Contains(o.keys, k) }

func (o *jsonObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(o.vals[i])
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// objectKeys lists the member names of a JSON object in document order
// (once each), which decoding into a map loses.
func objectKeys(raw json.RawMessage) []string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			break
		}
		k, _ := t.(string)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			break
		}
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}
