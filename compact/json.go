package compact

import (
	"fmt"
	"unicode/utf8"
)

// maxDepth bounds the nesting of arrays and objects (the top-level object is
// depth 1). It also bounds the recursion of the parser and of subtask
// validation.
const maxDepth = 64

// dupMapThreshold is the object size from which duplicate keys are found with
// a map instead of comparing against every earlier key, keeping large objects
// linear.
const dupMapThreshold = 16

type kind uint8

const (
	kindNull kind = iota
	kindBool
	kindNumber
	kindString
	kindArray
	kindObject
)

// value is a parsed JSON value. It is kept small because a message is a tree
// of them: an object stores its members as alternating key and value entries
// of kids, in document order, and the parser guarantees that keys are unique.
type value struct {
	kind    kind
	boolean bool
	str     string  // kindString: the decoded text; kindNumber: the literal
	kids    []value // kindArray: the elements; kindObject: key, value, key, value, ...
}

// members returns the number of members of an object.
func (v *value) members() int { return len(v.kids) / 2 }

// key and val return member i of an object.
func (v *value) key(i int) string { return v.kids[2*i].str }
func (v *value) val(i int) *value { return &v.kids[2*i+1] }

// member is a view of one member of an object.
type member struct {
	key string
	val *value
}

func (v *value) member(i int) member { return member{key: v.kids[2*i].str, val: &v.kids[2*i+1]} }

// get returns the member named key of an object.
func (v *value) get(key string) *value {
	for i := 0; i+1 < len(v.kids); i += 2 {
		if v.kids[i].str == key {
			return &v.kids[i+1]
		}
	}
	return nil
}

// describe names a value for an error message without echoing more than
// maxEcho bytes of it.
func describe(v *value) string {
	switch v.kind {
	case kindNull:
		return "null"
	case kindBool:
		if v.boolean {
			return "true"
		}
		return "false"
	case kindNumber:
		return "a number"
	case kindString:
		return "the string " + clipQuote(v.str)
	case kindArray:
		return "an array"
	default:
		return "an object"
	}
}

// syntaxError is a document the parser refuses, at byte offset off. strict
// marks documents that are valid JSON but refused on purpose (duplicate key,
// invalid UTF-8, unpaired surrogate, too deep).
type syntaxError struct {
	off    int
	msg    string
	strict bool
}

// refuse is fail for documents that are valid JSON but refused on purpose.
func (p *parser) refuse(msg string) *syntaxError {
	return &syntaxError{off: p.pos, msg: msg, strict: true}
}

type parser struct {
	data []byte
	// src is data as a string, copied once so that strings without escapes
	// (almost all of them) are substrings of it rather than allocations each;
	// it is a copy so that nothing parsed aliases the caller's buffer.
	src   string
	pos   int
	depth int
	// stack holds the children of the containers being parsed; a container
	// moves its children to the end of arena when it closes and keeps that
	// subslice. Children are never written again once moved, so a subslice
	// stays correct even after arena regrows, and a message costs a few
	// allocations in all instead of one per array or object.
	stack []value
	arena []value
}

// parse reads exactly one JSON value, surrounded by optional whitespace.
func parse(data []byte) (value, *syntaxError) {
	// Up to 64 entries hold the open containers of a typical message (top
	// level, plan, step, params) without regrowing; a short answer needs
	// fewer.
	p := parser{data: data, src: string(data), stack: make([]value, 0, min(64, 8+len(data)/16))}
	// A value takes at least two bytes of input ("1,"); messages with
	// parameters average far more, so len/8 rarely regrows.
	p.arena = make([]value, 0, min(4096, 8+len(data)/8))
	p.skipSpace()
	if p.pos == len(p.data) {
		return value{}, &syntaxError{off: 0, msg: "no JSON value"}
	}
	v, err := p.value()
	if err != nil {
		return value{}, err
	}
	p.skipSpace()
	if p.pos != len(p.data) {
		return value{}, p.fail("data after the JSON value")
	}
	return v, nil
}

func (p *parser) fail(msg string) *syntaxError {
	if p.pos >= len(p.data) {
		return &syntaxError{off: len(p.data), msg: "unexpected end of input"}
	}
	return &syntaxError{off: p.pos, msg: msg}
}

func (p *parser) skipSpace() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// peek returns the current byte, or 0 at the end of input (0 is never valid
// where peek is used, so the caller's error path handles both).
func (p *parser) peek() byte {
	if p.pos < len(p.data) {
		return p.data[p.pos]
	}
	return 0
}

func (p *parser) value() (value, *syntaxError) {
	switch c := p.peek(); {
	case c == '{':
		return p.object()
	case c == '[':
		return p.array()
	case c == '"':
		s, err := p.string()
		return value{kind: kindString, str: s}, err
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	case c == 't':
		return p.literal("true", value{kind: kindBool, boolean: true})
	case c == 'f':
		return p.literal("false", value{kind: kindBool})
	case c == 'n':
		return p.literal("null", value{kind: kindNull})
	default:
		if c >= utf8.RuneSelf {
			return value{}, p.fail(fmt.Sprintf("unexpected byte 0x%02x", c))
		}
		return value{}, p.fail(fmt.Sprintf("unexpected character %q", c))
	}
}

func (p *parser) literal(lit string, v value) (value, *syntaxError) {
	if len(p.data)-p.pos < len(lit) || string(p.data[p.pos:p.pos+len(lit)]) != lit {
		return value{}, p.fail("invalid literal")
	}
	p.pos += len(lit)
	return v, nil
}

func (p *parser) enter() *syntaxError {
	p.depth++
	if p.depth > maxDepth {
		return p.refuse(fmt.Sprintf("nesting deeper than %d levels", maxDepth))
	}
	return nil
}

func (p *parser) object() (value, *syntaxError) {
	if err := p.enter(); err != nil {
		return value{}, err
	}
	p.pos++ // '{'
	p.skipSpace()
	if p.peek() == '}' {
		p.pos++
		p.depth--
		return value{kind: kindObject}, nil
	}
	base := len(p.stack)
	var seen map[string]struct{}
	for {
		p.skipSpace()
		if p.peek() != '"' {
			return value{}, p.fail("expected a string key")
		}
		keyOff := p.pos
		key, err := p.string()
		if err != nil {
			return value{}, err
		}
		dup := false
		if seen != nil {
			_, dup = seen[key]
			seen[key] = struct{}{}
		} else {
			for i := base; i < len(p.stack); i += 2 {
				if p.stack[i].str == key {
					dup = true
					break
				}
			}
			if (len(p.stack)-base)/2 == dupMapThreshold {
				seen = make(map[string]struct{}, 2*dupMapThreshold)
				for i := base; i < len(p.stack); i += 2 {
					seen[p.stack[i].str] = struct{}{}
				}
				seen[key] = struct{}{}
			}
		}
		if dup {
			return value{}, &syntaxError{off: keyOff, msg: "duplicate key " + clipQuote(key), strict: true}
		}
		p.skipSpace()
		if p.peek() != ':' {
			return value{}, p.fail("expected ':' after an object key")
		}
		p.pos++
		p.skipSpace()
		v, err := p.value()
		if err != nil {
			return value{}, err
		}
		p.stack = append(p.stack, value{kind: kindString, str: key}, v)
		p.skipSpace()
		switch p.peek() {
		case ',':
			p.pos++
		case '}':
			p.pos++
			p.depth--
			return value{kind: kindObject, kids: p.pop(base)}, nil
		default:
			return value{}, p.fail("expected ',' or '}' in an object")
		}
	}
}

func (p *parser) array() (value, *syntaxError) {
	if err := p.enter(); err != nil {
		return value{}, err
	}
	p.pos++ // '['
	p.skipSpace()
	if p.peek() == ']' {
		p.pos++
		p.depth--
		return value{kind: kindArray}, nil
	}
	base := len(p.stack)
	for {
		p.skipSpace()
		v, err := p.value()
		if err != nil {
			return value{}, err
		}
		p.stack = append(p.stack, v)
		p.skipSpace()
		switch p.peek() {
		case ',':
			p.pos++
		case ']':
			p.pos++
			p.depth--
			return value{kind: kindArray, kids: p.pop(base)}, nil
		default:
			return value{}, p.fail("expected ',' or ']' in an array")
		}
	}
}

// pop moves the children above base off the stack into the arena.
func (p *parser) pop(base int) []value {
	start := len(p.arena)
	p.arena = append(p.arena, p.stack[base:]...)
	p.stack = p.stack[:base]
	// The capacity limit keeps an append to kids (there is none today) from
	// overwriting a sibling's children.
	return p.arena[start:len(p.arena):len(p.arena)]
}

func (p *parser) number() (value, *syntaxError) {
	start := p.pos
	if p.peek() == '-' {
		p.pos++
	}
	switch c := p.peek(); {
	case c == '0':
		p.pos++
	case c >= '1' && c <= '9':
		p.digits()
	default:
		return value{}, p.fail("invalid number")
	}
	if p.peek() == '.' {
		p.pos++
		if !p.digits() {
			return value{}, p.fail("invalid number: no digits after '.'")
		}
	}
	if c := p.peek(); c == 'e' || c == 'E' {
		p.pos++
		if c := p.peek(); c == '+' || c == '-' {
			p.pos++
		}
		if !p.digits() {
			return value{}, p.fail("invalid number: no digits in the exponent")
		}
	}
	return value{kind: kindNumber, str: p.src[start:p.pos]}, nil
}

// digits consumes a run of decimal digits and reports whether there was one.
func (p *parser) digits() bool {
	start := p.pos
	for p.pos < len(p.data) && p.data[p.pos] >= '0' && p.data[p.pos] <= '9' {
		p.pos++
	}
	return p.pos > start
}

// string reads a string starting at the opening quote. Strings without
// escapes (almost all of them) are sliced from the input in one copy.
func (p *parser) string() (string, *syntaxError) {
	start := p.pos + 1
	i := start
	for i < len(p.data) {
		c := p.data[i]
		switch {
		case c == '"':
			p.pos = i + 1
			return p.src[start:i], nil
		case c == '\\':
			return p.escapedString(start, i)
		case c < 0x20:
			p.pos = i
			return "", p.fail("control character in a string")
		case c < utf8.RuneSelf:
			i++
		default:
			r, size := utf8.DecodeRune(p.data[i:])
			if r == utf8.RuneError && size == 1 {
				p.pos = i
				return "", p.refuse("invalid UTF-8 in a string")
			}
			i += size
		}
	}
	p.pos = len(p.data)
	return "", p.fail("unterminated string")
}

// escapedString continues string from the first backslash at i.
func (p *parser) escapedString(start, i int) (string, *syntaxError) {
	buf := make([]byte, 0, i-start+16)
	buf = append(buf, p.data[start:i]...)
	for i < len(p.data) {
		c := p.data[i]
		switch {
		case c == '"':
			p.pos = i + 1
			return string(buf), nil
		case c == '\\':
			if i+1 >= len(p.data) {
				p.pos = len(p.data)
				return "", p.fail("unterminated string")
			}
			switch e := p.data[i+1]; e {
			case '"', '\\', '/':
				buf = append(buf, e)
			case 'b':
				buf = append(buf, '\b')
			case 'f':
				buf = append(buf, '\f')
			case 'n':
				buf = append(buf, '\n')
			case 'r':
				buf = append(buf, '\r')
			case 't':
				buf = append(buf, '\t')
			case 'u':
				r, n, msg := decodeUnicodeEscape(p.data[i:])
				if msg != "" {
					p.pos = i
					if n < 0 {
						return "", p.refuse(msg)
					}
					return "", p.fail(msg)
				}
				buf = utf8.AppendRune(buf, r)
				i += n
				continue
			default:
				p.pos = i
				return "", p.fail("invalid escape in a string")
			}
			i += 2
		case c < 0x20:
			p.pos = i
			return "", p.fail("control character in a string")
		case c < utf8.RuneSelf:
			buf = append(buf, c)
			i++
		default:
			r, size := utf8.DecodeRune(p.data[i:])
			if r == utf8.RuneError && size == 1 {
				p.pos = i
				return "", p.refuse("invalid UTF-8 in a string")
			}
			buf = append(buf, p.data[i:i+size]...)
			i += size
		}
	}
	p.pos = len(p.data)
	return "", p.fail("unterminated string")
}

// decodeUnicodeEscape decodes \uXXXX at the start of b, or a surrogate pair
// \uXXXX\uXXXX, and returns the rune and the bytes consumed. An unpaired
// surrogate is refused (n < 0): encoding/json turns it into U+FFFD while
// other readers keep it, so two readers would see different strings (and
// different keys).
func decodeUnicodeEscape(b []byte) (r rune, n int, msg string) {
	r, ok := hex4(b)
	if !ok {
		return 0, 0, "invalid \\u escape in a string"
	}
	switch {
	case r >= 0xDC00 && r <= 0xDFFF:
		return 0, -1, "unpaired surrogate escape in a string"
	case r >= 0xD800 && r <= 0xDBFF:
		if len(b) < 8 || b[6] != '\\' || b[7] != 'u' {
			return 0, -1, "unpaired surrogate escape in a string"
		}
		lo, ok := hex4(b[6:])
		if !ok {
			return 0, 0, "invalid \\u escape in a string"
		}
		if lo < 0xDC00 || lo > 0xDFFF {
			return 0, -1, "unpaired surrogate escape in a string"
		}
		return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), 12, ""
	}
	return r, 6, ""
}

// hex4 reads the four hex digits of \uXXXX at the start of b.
func hex4(b []byte) (rune, bool) {
	if len(b) < 6 {
		return 0, false
	}
	var r rune
	for _, c := range b[2:6] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}
