package sacp

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sacpgw/gateway/internal/jsonlex"
)

// This file is a JSON reader for the one job the validator has: check that a
// candidate is a JSON object, split it into its top-level members, and decode
// "data" for the schema, all in one pass over the model's answer.
//
// encoding/json does that in three passes (validate, split into RawMessage
// copies, decode data with reflection) and was most of the cost of Check: on
// a 16 KB answer it alone took several times the latency budget. Its tokens
// come from internal/jsonlex, the gateway's one set of JSON lexical rules;
// it decodes to the same values as a json.Decoder with UseNumber, and
// accepts what encoding/json accepts except nesting deeper than maxDepth
// and three things refused on purpose, each a string two readers could read
// differently: invalid UTF-8 and an unpaired surrogate escape (encoding/json
// turns both into U+FFFD, other readers keep them), and a name repeated in
// an object at any depth, compared after decoding ("n" and "\u006e" are one
// name: encoding/json keeps the last, other readers the first or refuse). A
// validator that read one string while the client read another would pass
// on a value it never checked, so such an answer is invalid.
// FuzzParseMatchesEncodingJSON holds the reader to all of that. Strings
// without escapes are returned as substrings of the input, so most values
// cost no copy.

// object is a parsed top-level JSON object.
type object struct {
	// text is the object in the input, braces included.
	text string
	// members are the top-level members in input order, values as raw JSON.
	members []member
	// data is the decoded value of the last "data" member, when decoding was
	// asked for.
	data any
}

type member struct{ key, raw string }

// get returns the raw value of key (names are unique: the parser refuses
// repeats).
func (o *object) get(key string) (string, bool) {
	for i := range o.members {
		if o.members[i].key == key {
			return o.members[i].raw, true
		}
	}
	return "", false
}

// syntaxError is a parse failure; messages follow encoding/json's wording.
type syntaxError struct{ msg string }

func (e *syntaxError) Error() string { return e.msg }

var errEOF = &syntaxError{"unexpected end of JSON input"}

func badChar(c byte, context string) error {
	var q string
	switch c {
	case '\'':
		q = `'\''`
	case '"':
		q = `'"'`
	default:
		s := strconv.Quote(string(rune(c)))
		q = "'" + s[1:len(s)-1] + "'"
	}
	return &syntaxError{"invalid character " + q + " " + context}
}

// parseObject reads the JSON object at the start of s (s[0] must be '{') and
// stops after its closing brace; what follows is not looked at. With
// decodeData the value of each top-level "data" member is decoded.
func parseObject(s string, decodeData bool) (object, error) {
	p := parser{s: s}
	var o object
	p.i, p.depth = 1, 1
	p.ws()
	if p.i < len(s) && s[p.i] == '}' {
		p.i++
		o.text = s[:p.i]
		return o, nil
	}
	// The top-level names are found repeated among o.members, so that a
	// candidate the sanitizer tries costs no allocation for them.
	var seen map[string]struct{}
	for {
		if p.i >= len(s) {
			return o, errEOF
		}
		if s[p.i] != '"' {
			return o, badChar(s[p.i], "looking for beginning of object key string")
		}
		key, err := p.key()
		if err != nil {
			return o, err
		}
		if seen, err = o.addName(seen, key); err != nil {
			return o, err
		}
		start := p.i
		if decodeData && key == "data" {
			o.data, err = p.value(true)
		} else {
			_, err = p.value(false)
		}
		if err != nil {
			return o, err
		}
		o.members = append(o.members, member{key, s[start:p.i]})
		done, err := p.next('}', "after object key:value pair")
		if err != nil {
			return o, err
		}
		if done {
			o.text = s[:p.i]
			return o, nil
		}
	}
}

// decodeValue decodes s, a whole JSON value with optional surrounding
// whitespace. It exists for tests that compare the reader to encoding/json.
func decodeValue(s string) (any, error) {
	p := parser{s: s}
	p.ws()
	v, err := p.value(true)
	if err != nil {
		return nil, err
	}
	p.ws()
	if p.i < len(s) {
		return nil, badChar(s[p.i], "after top-level value")
	}
	return v, nil
}

type parser struct {
	s     string
	i     int
	depth int
	// names are the member names of the objects being read, innermost
	// last, for finding a repeated name.
	names []string
}

// dupMapAt is the member count from which an object's repeated names are
// found with a map rather than a linear scan, so that an object of many
// names costs O(n), not O(n²).
const dupMapAt = 32

// nameSet is the names of one object being read: those on the parser's
// stack from base, then, past dupMapAt, a map.
type nameSet struct {
	base int
	seen map[string]struct{}
}

// addName records key as a name of the object s, refusing a repeat.
func (p *parser) addName(s *nameSet, key string) error {
	if s.seen != nil {
		if _, dup := s.seen[key]; dup {
			return duplicateName(key)
		}
		s.seen[key] = struct{}{}
		return nil
	}
	for _, k := range p.names[s.base:] {
		if k == key {
			return duplicateName(key)
		}
	}
	p.names = append(p.names, key)
	if len(p.names)-s.base >= dupMapAt {
		s.seen = make(map[string]struct{}, 2*dupMapAt)
		for _, k := range p.names[s.base:] {
			s.seen[k] = struct{}{}
		}
	}
	return nil
}

// addName refuses key when o already has a member of that name; seen is
// the map that replaces the linear scan from dupMapAt members on.
func (o *object) addName(seen map[string]struct{}, key string) (map[string]struct{}, error) {
	if seen != nil {
		if _, dup := seen[key]; dup {
			return seen, duplicateName(key)
		}
		seen[key] = struct{}{}
		return seen, nil
	}
	for _, m := range o.members {
		if m.key == key {
			return nil, duplicateName(key)
		}
	}
	if len(o.members)+1 >= dupMapAt {
		seen = make(map[string]struct{}, 2*dupMapAt)
		for _, m := range o.members {
			seen[m.key] = struct{}{}
		}
		seen[key] = struct{}{}
	}
	return seen, nil
}

// endObject forgets the names of the object s once it is read.
func (p *parser) endObject(s *nameSet) { p.names = p.names[:s.base] }

// maxNameEcho bounds how much of a repeated name an error quotes: the
// message goes back to the model and into the audit trail.
const maxNameEcho = 32

func duplicateName(key string) error {
	if len(key) > maxNameEcho {
		n := maxNameEcho
		for n > 0 && !utf8.RuneStart(key[n]) {
			n--
		}
		key = key[:n] + "..."
	}
	return &syntaxError{"duplicate object key " + strconv.Quote(key)}
}

func (p *parser) ws() { p.i = jsonlex.Space(p.s, p.i) }

// next consumes the separator after a member or element: ',' (more follows)
// or the closing byte (done).
func (p *parser) next(closing byte, context string) (done bool, err error) {
	p.ws()
	if p.i >= len(p.s) {
		return false, errEOF
	}
	switch c := p.s[p.i]; c {
	case ',':
		p.i++
		p.ws()
		return false, nil
	case closing:
		p.i++
		p.depth--
		return true, nil
	default:
		return false, badChar(c, context)
	}
}

// key reads an object key and the colon after it.
func (p *parser) key() (string, error) {
	raw, escaped, err := p.str()
	if err != nil {
		return "", err
	}
	p.ws()
	if p.i >= len(p.s) {
		return "", errEOF
	}
	if p.s[p.i] != ':' {
		return "", badChar(p.s[p.i], "after object key")
	}
	p.i++
	p.ws()
	return jsonlex.Unquote(raw, escaped), nil
}

// value reads one JSON value at p.i. With build it returns the value as
// encoding/json with UseNumber would; without, it only validates.
func (p *parser) value(build bool) (any, error) {
	if p.i >= len(p.s) {
		return nil, errEOF
	}
	switch c := p.s[p.i]; {
	case c == '{':
		return p.object(build)
	case c == '[':
		return p.array(build)
	case c == '"':
		raw, escaped, err := p.str()
		if err != nil || !build {
			return nil, err
		}
		return jsonlex.Unquote(raw, escaped), nil
	case c == '-' || '0' <= c && c <= '9':
		n, err := p.number()
		if err != nil || !build {
			return nil, err
		}
		return json.Number(n), nil
	case c == 't':
		return true, p.literal("true")
	case c == 'f':
		return false, p.literal("false")
	case c == 'n':
		return nil, p.literal("null")
	default:
		return nil, badChar(c, "looking for beginning of value")
	}
}

func (p *parser) enter() error {
	p.depth++
	if p.depth > maxDepth {
		return &syntaxError{"exceeded max depth"}
	}
	p.i++
	p.ws()
	return nil
}

func (p *parser) object(build bool) (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	var m map[string]any
	if build {
		m = map[string]any{}
	}
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		p.depth--
		return m, nil
	}
	names := nameSet{base: len(p.names)}
	defer p.endObject(&names)
	for {
		if p.i >= len(p.s) {
			return nil, errEOF
		}
		if p.s[p.i] != '"' {
			return nil, badChar(p.s[p.i], "looking for beginning of object key string")
		}
		k, err := p.key()
		if err != nil {
			return nil, err
		}
		if err := p.addName(&names, k); err != nil {
			return nil, err
		}
		v, err := p.value(build)
		if err != nil {
			return nil, err
		}
		if build {
			m[k] = v
		}
		done, err := p.next('}', "after object key:value pair")
		if err != nil {
			return nil, err
		}
		if done {
			return m, nil
		}
	}
}

func (p *parser) array(build bool) (any, error) {
	if err := p.enter(); err != nil {
		return nil, err
	}
	var a []any
	if build {
		a = []any{}
	}
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		p.depth--
		return a, nil
	}
	for {
		v, err := p.value(build)
		if err != nil {
			return nil, err
		}
		if build {
			a = append(a, v)
		}
		done, err := p.next(']', "after array element")
		if err != nil {
			return nil, err
		}
		if done {
			return a, nil
		}
	}
}

// str reads a string literal at p.i and returns its contents without the
// quotes, and whether they hold an escape (without one, raw is already the
// decoded string: jsonlex refuses invalid UTF-8).
func (p *parser) str() (raw string, escaped bool, err error) {
	start := p.i + 1
	end, escaped, lerr := jsonlex.String(p.s, p.i)
	if lerr != nil {
		return "", false, p.lexical(lerr, "")
	}
	p.i = end
	return p.s[start : end-1], escaped, nil
}

func (p *parser) number() (string, error) {
	start := p.i
	end, lerr := jsonlex.Number(p.s, p.i)
	if lerr != nil {
		if lerr.Kind != jsonlex.LeadingZero {
			return "", p.lexical(lerr, "")
		}
		// "01" is the number 0 followed by a stray digit, which the
		// caller refuses in its own words, as encoding/json does.
		end = lerr.Off
	}
	p.i = end
	return p.s[start:end], nil
}

func (p *parser) literal(lit string) error {
	end, lerr := jsonlex.Literal(p.s, p.i, lit)
	if lerr != nil {
		return p.lexical(lerr, lit)
	}
	p.i = end
	return nil
}

// lexical words a token jsonlex refused as encoding/json words its syntax
// errors (these messages go back to the model in a re-ask), the two
// refusals encoding/json does not make (invalid UTF-8, an unpaired
// surrogate escape) in the same style. lit is the literal being read.
func (p *parser) lexical(e *jsonlex.Error, lit string) error {
	s := p.s
	switch e.Kind {
	case jsonlex.EOF:
		return errEOF
	case jsonlex.Control:
		return badChar(s[e.Off], "in string literal")
	case jsonlex.BadEscape:
		return badChar(s[e.Off+1], "in string escape code")
	case jsonlex.BadUnicodeEscape:
		for k := e.Off + 2; k < e.Off+6 && k < len(s); k++ {
			if !isHex(s[k]) {
				return badChar(s[k], "in \\u hexadecimal character escape")
			}
		}
		return errEOF
	case jsonlex.Surrogate:
		return &syntaxError{"invalid unpaired surrogate escape " + s[e.Off:e.Off+6] + " in string literal"}
	case jsonlex.BadUTF8:
		return &syntaxError{"invalid UTF-8 in string literal"}
	case jsonlex.NoIntDigit:
		return badChar(s[e.Off], "in numeric literal")
	case jsonlex.NoFracDigit:
		return badChar(s[e.Off], "after decimal point in numeric literal")
	case jsonlex.NoExpDigit:
		return badChar(s[e.Off], "in exponent of numeric literal")
	case jsonlex.BadLiteral:
		k := e.Off - p.i
		return badChar(s[e.Off], "in literal "+lit+" (expecting "+strconv.QuoteRune(rune(lit[k]))+")")
	}
	return &syntaxError{e.Kind.String()}
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// unquote decodes the contents of a string literal the parser accepted.
func unquote(raw string) string {
	return jsonlex.Unquote(raw, strings.IndexByte(raw, '\\') >= 0)
}

// kindOf names the JSON type of raw by its first byte, using JSON Schema's
// type names so error messages read alike. raw must be valid JSON or empty.
func kindOf[T ~string | ~[]byte](raw T) string {
	i := 0
	for i < len(raw) && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\r' || raw[i] == '\n') {
		i++
	}
	if i == len(raw) {
		return ""
	}
	switch raw[i] {
	case '"':
		return "string"
	case '{':
		return "object"
	case '[':
		return "array"
	case 't', 'f':
		return "boolean"
	case 'n':
		return "null"
	default:
		return "number"
	}
}
