package compact

// The parser below is compact's own walk of a document's structure (objects,
// arrays, depth, duplicate keys, member order) and its own error messages;
// every token inside that structure is read by internal/jsonlex, the rules
// the gateway's other JSON readers share, so that compact cannot accept a
// string or number that they refuse or read it differently.

import (
	"fmt"
	"unicode/utf8"

	"github.com/sacpgw/gateway/internal/jsonlex"
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
	p.pos = jsonlex.Space(p.data, p.pos)
	if p.pos == len(p.data) {
		return value{}, &syntaxError{off: 0, msg: "no JSON value"}
	}
	v, err := p.value()
	if err != nil {
		return value{}, err
	}
	p.pos = jsonlex.Space(p.data, p.pos)
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

// lexWording is compact's wording for each token jsonlex refuses.
var lexWording = [...]string{
	jsonlex.EOF:              "unexpected end of input",
	jsonlex.Control:          "control character in a string",
	jsonlex.BadEscape:        "invalid escape in a string",
	jsonlex.BadUnicodeEscape: "invalid \\u escape in a string",
	jsonlex.Surrogate:        "unpaired surrogate escape in a string",
	jsonlex.BadUTF8:          "invalid UTF-8 in a string",
	jsonlex.NoIntDigit:       "invalid number",
	jsonlex.LeadingZero:      "invalid number: leading zero",
	jsonlex.NoFracDigit:      "invalid number: no digits after '.'",
	jsonlex.NoExpDigit:       "invalid number: no digits in the exponent",
	jsonlex.BadLiteral:       "invalid literal",
}

// lexFail is fail for a token jsonlex refused, at the offset it names.
// Invalid UTF-8 and unpaired surrogate escapes are refused on purpose:
// encoding/json reads them as U+FFFD while other readers keep them, so two
// readers would see different strings (and different keys).
func (p *parser) lexFail(e *jsonlex.Error) *syntaxError {
	p.pos = e.Off
	msg := e.Kind.String() // a kind added to jsonlex after this table
	if int(e.Kind) < len(lexWording) && lexWording[e.Kind] != "" {
		msg = lexWording[e.Kind]
	}
	if e.Kind == jsonlex.BadUTF8 || e.Kind == jsonlex.Surrogate {
		return p.refuse(msg)
	}
	return p.fail(msg)
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
	end, err := jsonlex.Literal(p.data, p.pos, lit)
	if err != nil {
		return value{}, p.lexFail(err)
	}
	p.pos = end
	return v, nil
}

func (p *parser) enter() *syntaxError {
	p.depth++
	if p.depth > maxDepth {
		return p.refuse(fmt.Sprintf("nesting deeper than %d levels", maxDepth))
	}
	return nil
}

// open enters the object or array at p.pos; empty: it closed at once, at
// closer.
func (p *parser) open(closer byte) (empty bool, err *syntaxError) {
	if err := p.enter(); err != nil {
		return false, err
	}
	p.pos++ // '{' or '['
	p.pos = jsonlex.Space(p.data, p.pos)
	return p.leave(closer), nil
}

// leave leaves the container when closer comes next.
func (p *parser) leave(closer byte) bool {
	if p.peek() != closer {
		return false
	}
	p.pos++
	p.depth--
	return true
}

// more reads what follows a member or an element: true at a ',', false
// at closer (the container left), else the error expected.
func (p *parser) more(closer byte, expected string) (bool, *syntaxError) {
	p.pos = jsonlex.Space(p.data, p.pos)
	if p.peek() == ',' {
		p.pos++
		return true, nil
	}
	if p.leave(closer) {
		return false, nil
	}
	return false, p.fail(expected)
}

func (p *parser) object() (value, *syntaxError) {
	if empty, err := p.open('}'); err != nil || empty {
		return value{kind: kindObject}, err
	}
	base := len(p.stack)
	var seen map[string]struct{}
	for {
		p.pos = jsonlex.Space(p.data, p.pos)
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
		p.pos = jsonlex.Space(p.data, p.pos)
		if p.peek() != ':' {
			return value{}, p.fail("expected ':' after an object key")
		}
		p.pos++
		p.pos = jsonlex.Space(p.data, p.pos)
		v, err := p.value()
		if err != nil {
			return value{}, err
		}
		p.stack = append(p.stack, value{kind: kindString, str: key}, v)
		switch more, err := p.more('}', "expected ',' or '}' in an object"); {
		case err != nil:
			return value{}, err
		case !more:
			return value{kind: kindObject, kids: p.pop(base)}, nil
		}
	}
}

func (p *parser) array() (value, *syntaxError) {
	if empty, err := p.open(']'); err != nil || empty {
		return value{kind: kindArray}, err
	}
	base := len(p.stack)
	for {
		p.pos = jsonlex.Space(p.data, p.pos)
		v, err := p.value()
		if err != nil {
			return value{}, err
		}
		p.stack = append(p.stack, v)
		switch more, err := p.more(']', "expected ',' or ']' in an array"); {
		case err != nil:
			return value{}, err
		case !more:
			return value{kind: kindArray, kids: p.pop(base)}, nil
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
	end, err := jsonlex.Number(p.data, p.pos)
	if err != nil {
		return value{}, p.lexFail(err)
	}
	v := value{kind: kindNumber, str: p.src[p.pos:end]}
	p.pos = end
	return v, nil
}

// string reads a string starting at the opening quote. Strings without
// escapes (almost all of them) are substrings of src, not allocations.
func (p *parser) string() (string, *syntaxError) {
	end, escaped, err := jsonlex.String(p.data, p.pos)
	if err != nil {
		return "", p.lexFail(err)
	}
	s := jsonlex.Unquote(p.src[p.pos+1:end-1], escaped)
	p.pos = end
	return s, nil
}
