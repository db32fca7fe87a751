package sacp

import (
	"encoding/json"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// This file is a JSON reader for the one job the validator has: check that a
// candidate is a JSON object, split it into its top-level members, and decode
// "data" for the schema, all in one pass over the model's answer.
//
// encoding/json does that in three passes (validate, split into RawMessage
// copies, decode data with reflection) and was most of the cost of Check: on
// a 16 KB answer it alone took several times the latency budget. This reader
// accepts exactly the inputs encoding/json accepts (except nesting deeper
// than maxDepth) and decodes to the same values as a json.Decoder with
// UseNumber; FuzzParseMatchesEncodingJSON holds it to that. Strings without
// escapes are returned as substrings of the input, so most values cost no
// copy.
//
// One refusal is on purpose: a name repeated in an object, at any depth
// (compared after decoding, so "n" and "\u006e" are the same name).
// encoding/json keeps the last of them; other readers keep the first or
// refuse. A validator that read one while the client reads the other would
// pass on a value it never checked, so such an answer is invalid.

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

func (p *parser) ws() {
	for p.i < len(p.s) {
		switch p.s[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

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
	raw, plain, err := p.str()
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
	if plain {
		return raw, nil
	}
	return unquote(raw), nil
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
		raw, plain, err := p.str()
		if err != nil || !build {
			return nil, err
		}
		if plain {
			return raw, nil
		}
		return unquote(raw), nil
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
// quotes. plain reports that the contents are already the decoded string: no
// escapes and valid UTF-8.
func (p *parser) str() (raw string, plain bool, err error) {
	s := p.s
	p.i++
	start := p.i
	escaped, nonASCII := false, false
	for {
		// Most of an answer is string contents: skip eight plain bytes at
		// a time, then look at the rest one by one.
		for p.i+8 <= len(s) {
			// Inlined by hand: as a function this is over the inlining
			// budget, and the call costs as much as the test.
			b := s[p.i : p.i+8]
			w := uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
				uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
			q, bs := w^(ones*'"'), w^(ones*'\\')
			if ((w-ones*0x20)&^w|(q-ones)&^q|(bs-ones)&^bs|w)&highs != 0 {
				break
			}
			p.i += 8
		}
		if p.i >= len(s) {
			return "", false, errEOF
		}
		c := s[p.i]
		if strPlain[c] {
			p.i++
			continue
		}
		switch {
		case c == '"':
			raw = s[start:p.i]
			p.i++
			return raw, !escaped && (!nonASCII || utf8.ValidString(raw)), nil
		case c == '\\':
			escaped = true
			if p.i+1 >= len(s) {
				return "", false, errEOF
			}
			switch e := s[p.i+1]; e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.i += 2
			case 'u':
				p.i += 2
				for range 4 {
					if p.i >= len(s) {
						return "", false, errEOF
					}
					if !isHex(s[p.i]) {
						return "", false, badChar(s[p.i], "in \\u hexadecimal character escape")
					}
					p.i++
				}
			default:
				return "", false, badChar(e, "in string escape code")
			}
		case c < 0x20:
			return "", false, badChar(c, "in string literal")
		default: // non-ASCII: JSON allows any bytes, decoding coerces to UTF-8
			nonASCII = true
			p.i++
		}
	}
}

// Constants of the eight-bytes-at-a-time test in str, the classic SWAR
// tests: (x - ones) &^ x & highs is non-zero iff some byte of x is zero, and
// (x - n*ones) &^ x & highs iff some byte is below n (exact as a yes/no
// answer). XOR with c*ones turns "byte == c" into "byte is zero"; the high
// bits of x itself flag non-ASCII bytes.
const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// strPlain marks the bytes a string literal can hold without a closer look.
var strPlain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func (p *parser) number() (string, error) {
	s, start := p.s, p.i
	digits := func() {
		for p.i < len(s) && '0' <= s[p.i] && s[p.i] <= '9' {
			p.i++
		}
	}
	// need requires a digit at p.i.
	need := func(context string) error {
		if p.i >= len(s) {
			return errEOF
		}
		if c := s[p.i]; c < '0' || c > '9' {
			return badChar(c, context)
		}
		return nil
	}
	if s[p.i] == '-' {
		p.i++
		if err := need("in numeric literal"); err != nil {
			return "", err
		}
	}
	if s[p.i] == '0' {
		p.i++
	} else {
		digits()
	}
	if p.i < len(s) && s[p.i] == '.' {
		p.i++
		if err := need("after decimal point in numeric literal"); err != nil {
			return "", err
		}
		digits()
	}
	if p.i < len(s) && (s[p.i] == 'e' || s[p.i] == 'E') {
		p.i++
		if p.i < len(s) && (s[p.i] == '+' || s[p.i] == '-') {
			p.i++
		}
		if err := need("in exponent of numeric literal"); err != nil {
			return "", err
		}
		digits()
	}
	return s[start:p.i], nil
}

func (p *parser) literal(lit string) error {
	for k := 0; k < len(lit); k++ {
		if p.i >= len(p.s) {
			return errEOF
		}
		if p.s[p.i] != lit[k] {
			return badChar(p.s[p.i], "in literal "+lit+" (expecting "+strconv.QuoteRune(rune(lit[k]))+")")
		}
		p.i++
	}
	return nil
}

// unquote decodes the contents of a validated string literal. It follows
// encoding/json: invalid UTF-8 and unpaired surrogates become U+FFFD.
func unquote(raw string) string {
	valid := utf8.ValidString(raw)
	next := strings.IndexByte(raw, '\\')
	if next < 0 && valid {
		return raw
	}
	var b strings.Builder
	b.Grow(len(raw))
	if !valid {
		// Rare: coerce byte by byte, exactly as encoding/json does.
		for r := 0; r < len(raw); {
			switch c := raw[r]; {
			case c == '\\':
				r += unescape(&b, raw[r:])
			case c < utf8.RuneSelf:
				b.WriteByte(c)
				r++
			default:
				rr, size := utf8.DecodeRuneInString(raw[r:])
				b.WriteRune(rr)
				r += size
			}
		}
		return b.String()
	}
	// Valid UTF-8: copy the runs between escapes in bulk.
	for next >= 0 {
		b.WriteString(raw[:next])
		raw = raw[next+unescape(&b, raw[next:]):]
		next = strings.IndexByte(raw, '\\')
	}
	b.WriteString(raw)
	return b.String()
}

// unescape writes the escape sequence at the start of s and returns its
// length.
func unescape(b *strings.Builder, s string) int {
	switch e := s[1]; e {
	case 'b':
		b.WriteByte('\b')
	case 'f':
		b.WriteByte('\f')
	case 'n':
		b.WriteByte('\n')
	case 'r':
		b.WriteByte('\r')
	case 't':
		b.WriteByte('\t')
	case 'u':
		rr := hex4(s[2:])
		if utf16.IsSurrogate(rr) {
			if len(s) >= 12 && s[6] == '\\' && s[7] == 'u' {
				if dec := utf16.DecodeRune(rr, hex4(s[8:])); dec != unicode.ReplacementChar {
					b.WriteRune(dec)
					return 12
				}
			}
			rr = unicode.ReplacementChar
		}
		b.WriteRune(rr)
		return 6
	default: // '"', '\\', '/'
		b.WriteByte(e)
	}
	return 2
}

// hex4 decodes the four hex digits at the start of s, already validated.
func hex4(s string) rune {
	var r rune
	for _, c := range []byte(s[:4]) {
		switch {
		case c <= '9':
			c -= '0'
		case c <= 'F':
			c -= 'A' - 10
		default:
			c -= 'a' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
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
