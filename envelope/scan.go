package envelope

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// maxDepth bounds nesting so that hostile input cannot exhaust the stack; the
// envelope object itself is depth 1.
const maxDepth = 64

// dupMapAt is the member count from which duplicate-key detection switches
// from a linear scan to a map, so that an object with many keys costs O(n),
// not O(n²).
const dupMapAt = 32

// member is one key/value pair of a JSON object, as spans of the input.
type member struct {
	key    []byte // decoded key
	rawKey []byte // key token as received, quotes included
	val    []byte // value token as received (not compacted)
}

// sub names the second-level objects the decoder needs the members of; they
// are collected during the single validating pass instead of re-scanned.
type sub int

const (
	subSender sub = iota
	subRecipient
	subError
	subPayload
	subMetadata
	numSubs
)

func subOf(key []byte) (sub, bool) {
	switch string(key) {
	case "sender":
		return subSender, true
	case "recipient":
		return subRecipient, true
	case "error":
		return subError, true
	case "payload":
		return subPayload, true
	case "metadata":
		return subMetadata, true
	}
	return 0, false
}

// pathSeg is one step of the JSON path to the value being scanned; it is only
// rendered into a string when an error is reported.
type pathSeg struct {
	key   []byte // nil for an array element
	index int
}

// scanner is a strict JSON validator: one value, RFC 8259 grammar, valid UTF-8,
// no lone surrogate escapes, no duplicate keys at any depth, bounded depth and
// no trailing data. encoding/json accepts duplicates (last wins) and invalid
// UTF-8 (replaced), which would let two parsers disagree about what an
// envelope says; this scanner refuses both.
type scanner struct {
	data []byte
	pos  int
	base int // depth of the value's container (0 for a whole document)

	collectSubs bool // collect members of the root's second-level objects
	root        []member
	subs        [numSubs][]member

	subAll []member // backing store of subs; sub-objects never nest in each other

	keys [][]byte // keys of the objects being scanned, innermost last
	path []pathSeg
}

// scanObject validates data as one JSON object nested at depth base+1 and
// returns its members. Errors are *FieldError with the offending path,
// prefixed by prefix (e.g. "payload") when data is a part of an envelope.
func (s *scanner) scanObject(data []byte, base int, prefix string) ([]member, *FieldError) {
	s.data, s.pos, s.base = data, 0, base
	// Capacities fit a typical envelope, so that scanning one allocates
	// these slices once instead of growing them; a reused scanner keeps
	// them (the previous scan's members are no longer needed then).
	if s.keys == nil {
		s.keys, s.path, s.root = make([][]byte, 0, 32), make([]pathSeg, 0, 8), make([]member, 0, 16)
	}
	s.keys, s.path, s.root = s.keys[:0], s.path[:0], s.root[:0]
	s.subs = [numSubs][]member{}
	if s.collectSubs {
		s.subAll = make([]member, 0, 16)
	}
	if prefix != "" {
		s.path = append(s.path, pathSeg{key: []byte(prefix)})
	}
	s.ws()
	if s.pos >= len(s.data) {
		return nil, s.fail("empty input")
	}
	if s.data[s.pos] != '{' {
		return nil, s.fail("must be a JSON object")
	}
	if err := s.objectInto(base+1, &s.root); err != nil {
		return nil, err
	}
	s.ws()
	if s.pos != len(s.data) {
		return nil, &FieldError{Field: s.pathString(), Reason: fmt.Sprintf("trailing data after JSON object at offset %d", s.pos)}
	}
	return s.root, nil
}

func (s *scanner) fail(reason string) *FieldError {
	return &FieldError{Field: s.pathString(), Reason: reason}
}

func (s *scanner) syntax(what string) *FieldError {
	return s.fail(fmt.Sprintf("invalid JSON at offset %d: %s", s.pos, what))
}

func (s *scanner) ws() {
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t', '\n', '\r':
			s.pos++
		default:
			return
		}
	}
}

// value scans one value whose container is at depth; collect (non-nil) is
// where the members go if the value is an object to be collected.
func (s *scanner) value(depth int, collect *[]member) *FieldError {
	s.ws()
	if s.pos >= len(s.data) {
		return s.syntax("unexpected end of input")
	}
	switch c := s.data[s.pos]; {
	case c == '{':
		return s.objectInto(depth+1, collect)
	case c == '[':
		return s.array(depth + 1)
	case c == '"':
		_, err := s.str()
		return err
	case c == 't':
		return s.literal("true")
	case c == 'f':
		return s.literal("false")
	case c == 'n':
		return s.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return s.number()
	default:
		return s.syntax(fmt.Sprintf("unexpected character %s", quoteByte(c)))
	}
}

// objectInto scans an object at depth, appending its members to *collect
// when collect is not nil.
func (s *scanner) objectInto(depth int, collect *[]member) *FieldError {
	if depth > maxDepth {
		return s.fail(fmt.Sprintf("nesting deeper than %d levels", maxDepth))
	}
	isRoot := depth == s.base+1
	s.pos++ // '{'
	keyBase := len(s.keys)
	defer func() { s.keys = s.keys[:keyBase] }()
	var seen map[string]struct{}
	s.ws()
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		return nil
	}
	for {
		s.ws()
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			return s.syntax("expected a string key")
		}
		kstart := s.pos
		esc, err := s.str()
		if err != nil {
			return err
		}
		rawKey := s.data[kstart:s.pos]
		key := rawKey[1 : len(rawKey)-1]
		if esc {
			key = unescape(key)
		}
		s.path = append(s.path, pathSeg{key: key})
		n := len(s.keys) - keyBase
		switch {
		case seen != nil:
			if _, dup := seen[string(key)]; dup {
				return s.fail("duplicate key")
			}
			seen[string(key)] = struct{}{}
		default:
			for _, k := range s.keys[keyBase:] {
				if bytes.Equal(k, key) {
					return s.fail("duplicate key")
				}
			}
			if n+1 >= dupMapAt {
				seen = make(map[string]struct{}, 2*dupMapAt)
				for _, k := range s.keys[keyBase:] {
					seen[string(k)] = struct{}{}
				}
				seen[string(key)] = struct{}{}
			}
		}
		s.keys = append(s.keys, key)
		s.ws()
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			return s.syntax("expected ':' after object key")
		}
		s.pos++
		s.ws()
		var into *[]member
		subKey, subStart := sub(-1), len(s.subAll)
		if isRoot && s.collectSubs {
			if k, ok := subOf(key); ok && s.pos < len(s.data) && s.data[s.pos] == '{' {
				subKey, into = k, &s.subAll
			}
		}
		vstart := s.pos
		if err := s.value(depth, into); err != nil {
			return err
		}
		if subKey >= 0 {
			s.subs[subKey] = s.subAll[subStart:len(s.subAll):len(s.subAll)]
		}
		if collect != nil {
			*collect = append(*collect, member{key: key, rawKey: rawKey, val: s.data[vstart:s.pos]})
		}
		s.path = s.path[:len(s.path)-1]
		s.ws()
		if s.pos >= len(s.data) {
			return s.syntax("unexpected end of input in object")
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return nil
		default:
			return s.syntax("expected ',' or '}' in object")
		}
	}
}

func (s *scanner) array(depth int) *FieldError {
	if depth > maxDepth {
		return s.fail(fmt.Sprintf("nesting deeper than %d levels", maxDepth))
	}
	s.pos++ // '['
	s.ws()
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		return nil
	}
	s.path = append(s.path, pathSeg{})
	for i := 0; ; i++ {
		s.path[len(s.path)-1].index = i
		if err := s.value(depth, nil); err != nil {
			return err
		}
		s.ws()
		if s.pos >= len(s.data) {
			return s.syntax("unexpected end of input in array")
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
		case ']':
			s.pos++
			s.path = s.path[:len(s.path)-1]
			return nil
		default:
			return s.syntax("expected ',' or ']' in array")
		}
	}
}

func (s *scanner) literal(lit string) *FieldError {
	if !bytes.HasPrefix(s.data[s.pos:], []byte(lit)) {
		return s.syntax("invalid literal")
	}
	s.pos += len(lit)
	return nil
}

func (s *scanner) number() *FieldError {
	d := s.data
	if d[s.pos] == '-' {
		s.pos++
	}
	switch {
	case s.pos < len(d) && d[s.pos] == '0':
		s.pos++
		if s.pos < len(d) && d[s.pos] >= '0' && d[s.pos] <= '9' {
			return s.syntax("invalid number: leading zero")
		}
	case s.pos < len(d) && d[s.pos] >= '1' && d[s.pos] <= '9':
		s.digits()
	default:
		return s.syntax("invalid number")
	}
	if s.pos < len(d) && d[s.pos] == '.' {
		s.pos++
		if s.digits() == 0 {
			return s.syntax("invalid number: no digits after '.'")
		}
	}
	if s.pos < len(d) && (d[s.pos] == 'e' || d[s.pos] == 'E') {
		s.pos++
		if s.pos < len(d) && (d[s.pos] == '+' || d[s.pos] == '-') {
			s.pos++
		}
		if s.digits() == 0 {
			return s.syntax("invalid number: no digits in exponent")
		}
	}
	return nil
}

func (s *scanner) digits() int {
	start := s.pos
	for s.pos < len(s.data) && s.data[s.pos] >= '0' && s.data[s.pos] <= '9' {
		s.pos++
	}
	return s.pos - start
}

// str scans a string token and reports whether it contains escapes.
func (s *scanner) str() (esc bool, err *FieldError) {
	d := s.data
	s.pos++ // opening quote
	for {
		// Fast path over plain ASCII.
		for s.pos < len(d) {
			c := d[s.pos]
			if c < 0x20 || c == '"' || c == '\\' || c >= utf8.RuneSelf {
				break
			}
			s.pos++
		}
		if s.pos >= len(d) {
			return esc, s.syntax("unterminated string")
		}
		switch c := d[s.pos]; {
		case c == '"':
			s.pos++
			return esc, nil
		case c == '\\':
			esc = true
			if err := s.escape(); err != nil {
				return esc, err
			}
		case c < 0x20:
			return esc, s.syntax("control character in string")
		default:
			r, size := utf8.DecodeRune(d[s.pos:])
			if r == utf8.RuneError && size == 1 {
				return esc, s.syntax("invalid UTF-8 in string")
			}
			s.pos += size
		}
	}
}

// escape scans one escape sequence at s.pos (the backslash).
func (s *scanner) escape() *FieldError {
	d := s.data
	if s.pos+1 >= len(d) {
		return s.syntax("unterminated escape")
	}
	switch d[s.pos+1] {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		s.pos += 2
		return nil
	case 'u':
	default:
		return s.syntax("invalid escape")
	}
	r, ok := hex4(d[s.pos+2:])
	if !ok {
		return s.syntax("invalid \\u escape")
	}
	s.pos += 6
	switch {
	case r >= 0xDC00 && r <= 0xDFFF:
		return s.syntax("lone low surrogate escape")
	case r >= 0xD800 && r <= 0xDBFF:
		if s.pos+1 >= len(d) || d[s.pos] != '\\' || d[s.pos+1] != 'u' {
			return s.syntax("lone high surrogate escape")
		}
		lo, ok := hex4(d[s.pos+2:])
		if !ok || lo < 0xDC00 || lo > 0xDFFF {
			return s.syntax("lone high surrogate escape")
		}
		s.pos += 6
	}
	return nil
}

func hex4(b []byte) (rune, bool) {
	if len(b) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range b[:4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// unescape decodes the inside of a string token the scanner has validated.
func unescape(in []byte) []byte {
	out := make([]byte, 0, len(in))
	for i := 0; i < len(in); {
		c := in[i]
		if c != '\\' {
			out = append(out, c)
			i++
			continue
		}
		switch in[i+1] {
		case 'b':
			out = append(out, '\b')
		case 'f':
			out = append(out, '\f')
		case 'n':
			out = append(out, '\n')
		case 'r':
			out = append(out, '\r')
		case 't':
			out = append(out, '\t')
		case 'u':
			r, _ := hex4(in[i+2:])
			i += 6
			if r >= 0xD800 && r <= 0xDBFF {
				lo, _ := hex4(in[i+2:])
				r = (r-0xD800)<<10 | (lo - 0xDC00) + 0x10000
				i += 6
			}
			out = utf8.AppendRune(out, r)
			continue
		default: // '"', '\\', '/'
			out = append(out, in[i+1])
		}
		i += 2
	}
	return out
}

// stringValue decodes a validated string token (quotes included).
func stringValue(tok []byte) string {
	in := tok[1 : len(tok)-1]
	if bytes.IndexByte(in, '\\') < 0 {
		return string(in)
	}
	return string(unescape(in))
}

// pathString renders the current path as "a.b[2].c". Keys that are not plain
// identifiers are quoted; long keys are cut and a long path keeps only its
// tail, the part nearest the error, so that an error never echoes more than
// maxEcho bytes of the input's keys.
func (s *scanner) pathString() string {
	segs := make([]string, 0, len(s.path))
	for _, seg := range s.path {
		if seg.key == nil {
			segs = append(segs, "["+strconv.Itoa(seg.index)+"]")
			continue
		}
		segs = append(segs, string(appendPathKey(nil, seg.key)))
	}
	return joinPath(segs)
}

// maxPathKey is the longest part of one key a path shows.
const maxPathKey = 32

// appendPathKey appends key as a path segment: ".key" for identifiers,
// `["key"]` otherwise; the leading dot is dropped by joinPath at the start.
func appendPathKey(b, key []byte) []byte {
	plain := len(key) > 0
	for _, c := range key {
		if !(c == '_' || c == '-' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z') {
			plain = false
			break
		}
	}
	k := string(key)
	cutOff := false
	if len(k) > maxPathKey {
		n := maxPathKey
		for n > 0 && !utf8.RuneStart(k[n]) {
			n--
		}
		k, cutOff = k[:n], true
	}
	if plain {
		b = append(append(b, '.'), k...)
		if cutOff {
			b = append(b, "..."...)
		}
		return b
	}
	b = strconv.AppendQuote(append(b, '['), k)
	if cutOff {
		b = append(b, "..."...)
	}
	return append(b, ']')
}

// joinPath joins segments, keeping as many trailing ones as fit in maxEcho
// bytes.
func joinPath(segs []string) string {
	first, size := len(segs), 0
	for first > 0 && size+len(segs[first-1]) <= maxEcho {
		first--
		size += len(segs[first])
	}
	if first == len(segs) && first > 0 { // a single segment longer than the cap
		first--
	}
	p := strings.Join(segs[first:], "")
	if first > 0 {
		return "..." + p
	}
	return strings.TrimPrefix(p, ".")
}

func quoteByte(c byte) string {
	return strconv.QuoteRuneToASCII(rune(c))
}
