package redact

import (
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// maxJSONDepth matches encoding/json's nesting limit.
const maxJSONDepth = 10000

// JSON redacts every string value of a JSON document (in objects, arrays,
// nested, or the document itself) and returns it as compact JSON. Keys,
// numbers and the order of members are kept byte for byte; a string that
// needs no change keeps its original escaping. It is used for the SACP
// fields message and data. The error, for a document that is not valid
// JSON, gives the offset but none of the content.
//
// The document is parsed in one pass by hand rather than through
// encoding/json: decoding into maps would reorder keys and round numbers,
// and costs several times more.
func (r *Redactor) JSON(raw []byte) ([]byte, Result, error) {
	w := jsonWriter{r: r, s: string(raw), out: make([]byte, 0, len(raw))}
	w.space()
	if err := w.value(0); err != nil {
		return nil, Result{}, err
	}
	w.space()
	if w.i < len(w.s) {
		return nil, Result{}, w.syntax("data after the top-level value")
	}
	return w.out, w.res, nil
}

type jsonWriter struct {
	r       *Redactor
	s       string
	i       int
	out     []byte
	res     Result
	scratch []byte // decoded string values
}

func (w *jsonWriter) syntax(what string) error {
	return fmt.Errorf("redact: invalid JSON at offset %d: %s", w.i, what)
}

func (w *jsonWriter) space() {
	for w.i < len(w.s) {
		switch w.s[w.i] {
		case ' ', '\t', '\n', '\r':
			w.i++
		default:
			return
		}
	}
}

func (w *jsonWriter) value(depth int) error {
	if w.i >= len(w.s) {
		return w.syntax("unexpected end")
	}
	switch c := w.s[w.i]; {
	case c == '{' || c == '[':
		if depth >= maxJSONDepth {
			return w.syntax("nested too deep")
		}
		return w.container(depth)
	case c == '"':
		return w.str(true)
	case c == 't':
		return w.literal("true")
	case c == 'f':
		return w.literal("false")
	case c == 'n':
		return w.literal("null")
	case c == '-' || isDigit(c):
		return w.number()
	}
	return w.syntax("unexpected character")
}

// container copies an object or an array; member keys are copied as they
// are, values are redacted.
func (w *jsonWriter) container(depth int) error {
	open := w.s[w.i]
	end := byte(']')
	if open == '{' {
		end = '}'
	}
	w.out = append(w.out, open)
	w.i++
	w.space()
	if w.i < len(w.s) && w.s[w.i] == end {
		w.out = append(w.out, end)
		w.i++
		return nil
	}
	for {
		if open == '{' {
			if w.i >= len(w.s) || w.s[w.i] != '"' {
				return w.syntax("expected a string key")
			}
			if err := w.str(false); err != nil {
				return err
			}
			w.space()
			if w.i >= len(w.s) || w.s[w.i] != ':' {
				return w.syntax("expected ':'")
			}
			w.out = append(w.out, ':')
			w.i++
			w.space()
		}
		if err := w.value(depth + 1); err != nil {
			return err
		}
		w.space()
		if w.i >= len(w.s) {
			return w.syntax("unexpected end")
		}
		switch w.s[w.i] {
		case ',':
			w.out = append(w.out, ',')
			w.i++
			w.space()
		case end:
			w.out = append(w.out, end)
			w.i++
			return nil
		default:
			return w.syntax("expected ',' or '" + string(end) + "'")
		}
	}
}

func (w *jsonWriter) literal(lit string) error {
	if len(w.s)-w.i < len(lit) || w.s[w.i:w.i+len(lit)] != lit {
		return w.syntax("invalid literal")
	}
	w.out = append(w.out, lit...)
	w.i += len(lit)
	return nil
}

func (w *jsonWriter) number() error {
	s, start := w.s, w.i
	i := w.i
	digits := func() int {
		k := i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		return i - k
	}
	if s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case digits() == 0:
		w.i = i
		return w.syntax("invalid number")
	}
	if i < len(s) && s[i] == '.' {
		i++
		if digits() == 0 {
			w.i = i
			return w.syntax("invalid number")
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		if digits() == 0 {
			w.i = i
			return w.syntax("invalid number")
		}
	}
	w.out = append(w.out, s[start:i]...)
	w.i = i
	return nil
}

// str copies the string at w.i, redacting it when it is a value.
func (w *jsonWriter) str(redact bool) error {
	s, start := w.s, w.i
	i, escaped := start+1, false
	for {
		// Skip eight plain bytes at a time; most of a document is string
		// content.
		for i+8 <= len(s) && !jsonSpecial8(load64(s, i)) {
			i += 8
		}
		if i >= len(s) {
			w.i = i
			return w.syntax("unterminated string")
		}
		c := s[i]
		if c == '"' {
			break
		}
		if c < 0x20 {
			w.i = i
			return w.syntax("control character in string")
		}
		if c != '\\' {
			i++
			continue
		}
		escaped = true
		if i+1 >= len(s) {
			w.i = i
			return w.syntax("unterminated string")
		}
		switch s[i+1] {
		case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			i += 2
		case 'u':
			if len(s)-i < 6 || !isHex4(s[i+2:i+6]) {
				w.i = i
				return w.syntax("invalid \\u escape")
			}
			i += 6
		default:
			w.i = i
			return w.syntax("invalid escape")
		}
	}
	raw := s[start : i+1]
	w.i = i + 1
	if !redact {
		w.out = append(w.out, raw...)
		return nil
	}
	val := raw[1 : len(raw)-1]
	if escaped {
		w.scratch = unquote(w.scratch[:0], val)
		val = string(w.scratch)
	}
	red, changed := w.r.redact(val, &w.res)
	if !changed {
		w.out = append(w.out, raw...)
		return nil
	}
	w.out = appendQuoted(w.out, red)
	return nil
}

func isHex4(s string) bool {
	for i := 0; i < 4; i++ {
		c := s[i]
		if !isDigit(c) && (c|0x20 < 'a' || c|0x20 > 'f') {
			return false
		}
	}
	return true
}

// jsonSpecial8 reports whether any of the eight bytes in x ends or escapes
// a JSON string or is a control byte ('"', '\\', < 0x20). Each test is the
// exact "has a byte below n" bit trick: a borrow reaches a byte's top bit
// only from a byte that matched.
func jsonSpecial8(x uint64) bool {
	const ones, tops = 0x0101010101010101, 0x8080808080808080
	q, b := x^(ones*'"'), x^(ones*'\\')
	return ((q-ones)&^q|(b-ones)&^b|(x-ones*0x20)&^x)&tops != 0
}

// quoteSpecial8 is jsonSpecial8 plus 0xe2, the lead byte of U+2028/U+2029.
func quoteSpecial8(x uint64) bool {
	const ones, tops = 0x0101010101010101, 0x8080808080808080
	e := x ^ (ones * 0xe2)
	return jsonSpecial8(x) || (e-ones)&^e&tops != 0
}

// unquote appends the decoded form of a validated JSON string body to b.
// Lone surrogates become U+FFFD, as in encoding/json.
func unquote(b []byte, v string) []byte {
	for {
		k := strings.IndexByte(v, '\\')
		if k < 0 {
			return append(b, v...)
		}
		b = append(b, v[:k]...)
		v = v[k:]
		n := 2
		switch v[1] {
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r := hex4(v[2:6])
			n = 6
			if utf16.IsSurrogate(r) {
				r2 := utf8.RuneError
				if len(v) >= 12 && v[6] == '\\' && v[7] == 'u' {
					r2 = hex4(v[8:12])
				}
				if dec := utf16.DecodeRune(r, r2); dec != utf8.RuneError {
					r, n = dec, 12
				} else {
					r = utf8.RuneError
				}
			}
			b = utf8.AppendRune(b, r)
			v = v[n:]
			continue
		default: // '"', '\\', '/'
			b = append(b, v[1])
		}
		v = v[n:]
	}
}

func hex4(s string) rune {
	var r rune
	for i := 0; i < 4; i++ {
		c := s[i]
		switch {
		case isDigit(c):
			c -= '0'
		default:
			c = c | 0x20 - 'a' + 10
		}
		r = r<<4 | rune(c)
	}
	return r
}

// appendQuoted appends v as a JSON string. It escapes what JSON requires
// and U+2028/U+2029, which break JavaScript; other bytes, including invalid
// UTF-8 that came in, pass unchanged.
func appendQuoted(b []byte, v string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	last := 0
	for i := 0; i < len(v); i++ {
		for i+8 <= len(v) && !quoteSpecial8(load64(v, i)) {
			i += 8
		}
		if i >= len(v) {
			break
		}
		c := v[i]
		var esc string
		switch {
		case c == '"':
			esc = `\"`
		case c == '\\':
			esc = `\\`
		case c == '\n':
			esc = `\n`
		case c == '\r':
			esc = `\r`
		case c == '\t':
			esc = `\t`
		case c < 0x20:
			b = append(b, v[last:i]...)
			b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			last = i + 1
			continue
		case c == 0xe2 && i+2 < len(v) && v[i+1] == 0x80 && (v[i+2] == 0xa8 || v[i+2] == 0xa9):
			b = append(b, v[last:i]...)
			b = append(b, `\u202`...)
			b = append(b, hex[v[i+2]&0xf])
			i += 2
			last = i + 1
			continue
		default:
			continue
		}
		b = append(b, v[last:i]...)
		b = append(b, esc...)
		last = i + 1
	}
	b = append(b, v[last:]...)
	return append(b, '"')
}
