package envelope

import (
	"bytes"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/sacpgw/gateway/internal/jsonlex"
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
// envelope says; this scanner refuses both. It walks the structure itself and
// takes every token (whitespace, strings, numbers, literals) from
// internal/jsonlex, so that it reads them as the gateway's other JSON readers
// do; only the wording of a refused token is its own (lexError).
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
	s.pos = jsonlex.Space(s.data, s.pos)
	if s.pos >= len(s.data) {
		return nil, s.fail("empty input")
	}
	if s.data[s.pos] != '{' {
		return nil, s.fail("must be a JSON object")
	}
	if err := s.objectInto(base+1, &s.root); err != nil {
		return nil, err
	}
	s.pos = jsonlex.Space(s.data, s.pos)
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

// value scans one value whose container is at depth; collect (non-nil) is
// where the members go if the value is an object to be collected.
func (s *scanner) value(depth int, collect *[]member) *FieldError {
	s.pos = jsonlex.Space(s.data, s.pos)
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
	case c == 't' || c == 'f' || c == 'n':
		return s.literal(jsonlex.Word(c))
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
	s.pos = jsonlex.Space(s.data, s.pos)
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		return nil
	}
	for {
		s.pos = jsonlex.Space(s.data, s.pos)
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
			key = jsonlex.AppendUnquoted(make([]byte, 0, len(key)), key)
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
		s.pos = jsonlex.Space(s.data, s.pos)
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			return s.syntax("expected ':' after object key")
		}
		s.pos++
		s.pos = jsonlex.Space(s.data, s.pos)
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
		if more, err := s.more('}', "object"); err != nil || !more {
			return err
		}
	}
}

func (s *scanner) array(depth int) *FieldError {
	if depth > maxDepth {
		return s.fail(fmt.Sprintf("nesting deeper than %d levels", maxDepth))
	}
	s.pos++ // '['
	s.pos = jsonlex.Space(s.data, s.pos)
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
		more, err := s.more(']', "array")
		if err != nil {
			return err
		}
		if !more {
			s.path = s.path[:len(s.path)-1]
			return nil
		}
	}
}

// more reads what follows a member of an object or an element of an
// array (what): true after a ',', false after closer, the container's end.
func (s *scanner) more(closer byte, what string) (bool, *FieldError) {
	s.pos = jsonlex.Space(s.data, s.pos)
	if s.pos >= len(s.data) {
		return false, s.syntax("unexpected end of input in " + what)
	}
	switch s.data[s.pos] {
	case ',':
		s.pos++
		return true, nil
	case closer:
		s.pos++
		return false, nil
	}
	return false, s.syntax(fmt.Sprintf("expected ',' or '%c' in %s", closer, what))
}

// literal reads lit at s.pos. A refused literal is reported where it starts,
// not at the byte jsonlex found wrong: "nul}" is one bad word, not a bad '}'.
func (s *scanner) literal(lit string) *FieldError {
	end, err := jsonlex.Literal(s.data, s.pos, lit)
	if err != nil {
		return s.syntax("invalid literal")
	}
	s.pos = end
	return nil
}

func (s *scanner) number() *FieldError {
	end, err := jsonlex.Number(s.data, s.pos)
	if err != nil {
		return s.lexError(err, "unexpected end of input")
	}
	s.pos = end
	return nil
}

// str reads a string token and reports whether it holds an escape.
func (s *scanner) str() (bool, *FieldError) {
	end, esc, err := jsonlex.String(s.data, s.pos)
	if err != nil {
		return esc, s.lexError(err, "unterminated string")
	}
	s.pos = end
	return esc, nil
}

// lexError words a token jsonlex refused in the scanner's own terms, which
// are older than jsonlex and part of what clients see. eof is the wording
// for input that ends inside the token: jsonlex reports that at the input's
// length without saying where in the token, and a cut-off document is the
// fault whatever the token's last bytes were.
func (s *scanner) lexError(e *jsonlex.Error, eof string) *FieldError {
	s.pos = e.Off
	switch e.Kind {
	case jsonlex.EOF:
		return s.syntax(eof)
	case jsonlex.Control:
		return s.syntax("control character in string")
	case jsonlex.BadEscape:
		return s.syntax("invalid escape")
	case jsonlex.BadUnicodeEscape:
		return s.syntax(`invalid \u escape`)
	case jsonlex.Surrogate:
		// jsonlex names the escape's backslash; the scanner has always
		// named the offset after the escape. Off+3 is the escape's second
		// hex digit: c-f for a low surrogate (DC00-DFFF), 8-b for a high
		// one (D800-DBFF).
		s.pos = e.Off + 6
		if c := s.data[e.Off+3] | 0x20; c >= 'c' && c <= 'f' {
			return s.syntax("lone low surrogate escape")
		}
		return s.syntax("lone high surrogate escape")
	case jsonlex.BadUTF8:
		return s.syntax("invalid UTF-8 in string")
	case jsonlex.NoIntDigit:
		return s.syntax("invalid number")
	case jsonlex.LeadingZero:
		return s.syntax("invalid number: leading zero")
	case jsonlex.NoFracDigit:
		return s.syntax("invalid number: no digits after '.'")
	case jsonlex.NoExpDigit:
		return s.syntax("invalid number: no digits in exponent")
	}
	return s.syntax(e.Kind.String())
}

// stringValue decodes a string token the scanner has accepted (quotes
// included); in an accepted token every backslash starts an escape.
func stringValue(tok []byte) string {
	in := tok[1 : len(tok)-1]
	return jsonlex.Unquote(in, bytes.IndexByte(in, '\\') >= 0)
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
